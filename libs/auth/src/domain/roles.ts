export const ROLES = ['owner', 'admin', 'approver', 'member', 'auditor'] as const;
export type Role = (typeof ROLES)[number];

/** Used only to stop anyone granting more than they hold. */
const GRANT_RANK: Record<Role, number> = { owner: 3, admin: 2, approver: 1, member: 1, auditor: 1 };

export function canGrant(holder: Role, wanted: Role): boolean {
  return GRANT_RANK[holder] >= GRANT_RANK[wanted] && (GRANT_RANK[holder] > 1 || holder === wanted);
}

/** Organisation-wide roles that reach every workspace; others need a membership. */
export function spansWorkspaces(role: Role): boolean {
  return role === 'owner' || role === 'admin' || role === 'auditor';
}

export function higherRole(a: Role | null, b: Role | null): Role | null {
  if (!a) return b;
  if (!b) return a;
  return GRANT_RANK[b] > GRANT_RANK[a] ? b : a;
}

/**
 * Who may do what. Deny by default: an action missing here is refused to
 * everyone, and every route names the action it performs.
 */
export const PERMISSIONS = {
  'organization.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'organization.manage': ['owner'],
  'workspace.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'workspace.create': ['owner', 'admin'],
  'workspace.update': ['owner', 'admin'],
  'member.read': ['owner', 'admin', 'auditor'],
  'member.write': ['owner', 'admin'],
  'user.read': ['owner', 'admin', 'auditor'],
  'user.write': ['owner', 'admin'],
  'token.read': ['owner', 'admin', 'auditor'],
  'token.create': ['owner', 'admin'],
  'token.revoke': ['owner', 'admin'],
  // everyone in a workspace may see its policy and ask what it would decide: a
  // developer should be able to learn why a call was refused
  'policy.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'policy.evaluate': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'policy.write': ['owner', 'admin'],
  'catalog.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'catalog.write': ['owner', 'admin'],
  'server.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'server.write': ['owner', 'admin'],
  'gateway.read': ['owner', 'admin', 'auditor'],
  'gateway.enroll': ['owner', 'admin'],
  'gateway.manage': ['owner', 'admin'],
  'gateway.settings': ['owner', 'admin'],
  'audit.read': ['owner', 'admin', 'auditor'],
  'audit.manage': ['owner'],
  'webhook.read': ['owner', 'admin', 'auditor'],
  'webhook.manage': ['owner', 'admin'],
  // secrets are written by admins; nobody reads a value back, members see that a path exists
  'secret.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'secret.write': ['owner', 'admin'],
  'vault.rotate': ['owner', 'admin'],
  // everyone in a workspace sees its approval inbox (a developer follows their own request);
  // deciding is for the route's approvers, checked against the route itself
  'approval.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'approval.decide': ['owner', 'admin', 'approver', 'member'],
  'approval.routes': ['owner', 'admin'],
  // calling tools through the pool's MCP endpoints; auditors read, they do not act
  'mcp.use': ['owner', 'admin', 'approver', 'member'],
  'pool.read': ['owner', 'admin', 'auditor'],
  // an agent session acts for its creator, so whoever may call tools may start one;
  // ending another's session is an admin's (its creator may always end their own)
  'session.create': ['owner', 'admin', 'approver', 'member'],
  'session.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'session.end': ['owner', 'admin'],
  'session.message': ['owner', 'admin', 'approver', 'member'],
  'pool.manage': ['owner', 'admin'],
  // whoever may call tools may make a sandbox to call them in; its history is readable by all, as the audit log is not
  'sandbox.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'sandbox.write': ['owner', 'admin', 'approver', 'member'],
  // a sandbox that reaches the internet is code running with this installation's addresses: admins decide (AILERON_SANDBOX_EGRESS too)
  'sandbox.egress': ['owner', 'admin'],
  'shell_rules.write': ['owner', 'admin'],
  // the MCP clients people connected with OAuth: admins see and disconnect them (each person always their own)
  'oauth_client.read': ['owner', 'admin', 'auditor'],
  'oauth_client.revoke': ['owner', 'admin'],
  // whether dynamically registered clients may be given access at all
  'oauth.settings': ['owner', 'admin'],
  // the pool's OAuth connections to upstream servers: whoever may call tools connects their own and sees the
  // workspace's; admins make the workspace's and end anyone's; auditors see them all, as admins do
  'connection.read': ['owner', 'admin', 'approver', 'member', 'auditor'],
  'connection.read_all': ['owner', 'admin', 'auditor'],
  'connection.create': ['owner', 'admin', 'approver', 'member'],
  'connection.delete': ['owner', 'admin', 'approver', 'member'],
  'connection.manage': ['owner', 'admin'],
} as const satisfies Record<string, readonly Role[]>;

export type Permission = keyof typeof PERMISSIONS;

/**
 * What an enrolled gateway may do in its own workspace besides the gateway
 * API: follow the approvals it asked for, reach the pool, and start agent
 * sessions for the sandboxed agents it launches (it sees only those). A gateway is a
 * machine on a developer's laptop: it never decides, mints review links,
 * grants, or reads anything an admin reads. Deny by default, like PERMISSIONS.
 */
export const GATEWAY_PERMISSIONS: ReadonlySet<Permission> = new Set<Permission>([
  'approval.read',
  'mcp.use',
  'session.create',
  'session.read',
]);

export function allows(role: Role | null, permission: Permission): boolean {
  return role !== null && (PERMISSIONS[permission] as readonly Role[]).includes(role);
}
