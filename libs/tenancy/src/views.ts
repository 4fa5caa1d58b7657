import type { z } from 'zod';
import type {
  IdentityProviderData,
  MemberRecord,
  OrganizationRecord,
  UserRecord,
  WorkspaceRecord,
} from './tenancy.repository';
import type { identityProviderView, memberView, organizationView, userView, workspaceView } from './tenancy.schemas';

export function toOrganizationView(o: OrganizationRecord): z.infer<typeof organizationView> {
  return { id: o.id, slug: o.slug, name: o.name, created_at: o.createdAt.toISOString() };
}

export function toWorkspaceView(
  w: WorkspaceRecord & { role?: z.infer<typeof workspaceView>['role'] },
): z.infer<typeof workspaceView> {
  return {
    id: w.id,
    slug: w.slug,
    name: w.name,
    policy_default: w.policyDefault,
    created_at: w.createdAt.toISOString(),
    ...(w.role ? { role: w.role } : {}),
  };
}

export function toUserView(u: UserRecord): z.infer<typeof userView> {
  return {
    id: u.id,
    email: u.email,
    name: u.name,
    role: u.role,
    linked: u.subject !== null,
    created_at: u.createdAt.toISOString(),
    last_login_at: u.lastLoginAt?.toISOString() ?? null,
    status: u.deactivatedAt ? 'deactivated' : 'active',
    deactivated_at: u.deactivatedAt?.toISOString() ?? null,
  };
}

export function toMemberView(m: MemberRecord): z.infer<typeof memberView> {
  return { user_id: m.userId, email: m.email, name: m.name, role: m.role, created_at: m.createdAt.toISOString() };
}

export function toIdentityProviderView(p: IdentityProviderData): z.infer<typeof identityProviderView> {
  return {
    issuer: p.issuer,
    jwks_url: p.jwksUrl,
    audience: p.audience,
    allow_any_audience: p.allowAnyAudience,
    trust_unverified_email: p.trustUnverifiedEmail,
    claims: {
      subject: p.subjectClaim,
      email: p.emailClaim,
      name: p.nameClaim,
      role: p.roleClaim,
      groups: p.groupsClaim,
    },
    role_mapping: p.roleMapping,
    default_role: p.defaultRole,
    client_id: p.clientId,
    client_secret_set: p.clientSecretSealed !== null,
    scopes: p.scopes,
  };
}
