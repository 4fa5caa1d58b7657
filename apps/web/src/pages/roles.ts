export const ROLES = ['owner', 'admin', 'approver', 'member', 'auditor'] as const;
export type Role = (typeof ROLES)[number];
export const roleOptions = ROLES.map((role) => ({ value: role, label: role }));
export const isRole = (value: string | null): value is Role => (ROLES as readonly string[]).includes(value ?? '');
