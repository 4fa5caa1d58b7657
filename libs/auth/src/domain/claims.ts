import { ROLES, Role, higherRole } from './roles';

export interface ClaimMapping {
  subjectClaim: string;
  emailClaim: string;
  nameClaim: string;
  roleClaim: string | null;
  roleMapping: Record<string, Role>;
  defaultRole: Role;
  /** where the IdP lists the user's groups (dotted path); `groups` unless configured */
  groupsClaim: string;
}

export interface MappedIdentity {
  subject: string;
  email: string | null;
  /** the IdP's `email_verified` claim is true (OIDC Core 5.1); a missing claim is not a verification */
  emailVerified: boolean;
  name: string | null;
  /** null when the IdP does not decide roles (no role claim configured) */
  role: Role | null;
  /** the IdP's groups for the user, as it names them; empty when the claim is absent */
  groups: string[];
}

// bounds against an IdP (or a token) that sends an absurd claim: these end up in a column
const MAX_GROUPS = 500;
const MAX_GROUP_LENGTH = 256;

/** Reads a claim by dotted path (`realm_access.roles`), as IdPs nest them. */
function claim(payload: Record<string, unknown>, path: string): unknown {
  let value: unknown = payload;
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

function text(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 ? value : null;
}

/**
 * Maps an identity provider's claims to a user and role. With a role claim the
 * highest mapped role wins; values that map to nothing give the default role.
 * Returns null when the subject claim is missing: such a token names nobody.
 */
export function mapClaims(payload: Record<string, unknown>, mapping: ClaimMapping): MappedIdentity | null {
  const subject = text(claim(payload, mapping.subjectClaim));
  if (!subject) return null;
  let role: Role | null = null;
  if (mapping.roleClaim) {
    const raw = claim(payload, mapping.roleClaim);
    const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
    for (const value of values) {
      if (typeof value !== 'string') continue;
      const mapped =
        mapping.roleMapping[value] ?? ((ROLES as readonly string[]).includes(value) ? (value as Role) : null);
      role = higherRole(role, mapped);
    }
    role ??= mapping.defaultRole;
  }
  return {
    subject,
    email: text(claim(payload, mapping.emailClaim)),
    emailVerified: verified(payload.email_verified),
    name: text(claim(payload, mapping.nameClaim)),
    role,
    groups: groupsOf(claim(payload, mapping.groupsClaim)),
  };
}

/** Some IdPs (older AWS Cognito pools) send the boolean as a string. */
function verified(value: unknown): boolean {
  return value === true || value === 'true';
}

/** A groups claim is a list of names, or one name; anything else is no groups. */
function groupsOf(raw: unknown): string[] {
  const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
  const groups = new Set<string>();
  for (const value of values) {
    if (typeof value === 'string' && value.length > 0 && value.length <= MAX_GROUP_LENGTH) groups.add(value);
    if (groups.size >= MAX_GROUPS) break;
  }
  return [...groups];
}
