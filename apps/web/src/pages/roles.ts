export const ROLES = ['owner', 'admin', 'approver', 'member', 'auditor'] as const;
export type Role = (typeof ROLES)[number];
export const roleOptions = ROLES.map((role) => ({ value: role, label: role }));
export const isRole = (value: string | null): value is Role => (ROLES as readonly string[]).includes(value ?? '');

/** Owners and admins: they change what others use (libs/auth's PERMISSIONS give them every `*.manage`, `*.revoke`, `*.settings`). */
export const isAdmin = (role: string | null | undefined): boolean => role === 'owner' || role === 'admin';
/** Owners, admins and auditors: those who read what others did (audit, gateways, connected clients). */
export const canOversee = (role: string | null | undefined): boolean => isAdmin(role) || role === 'auditor';
