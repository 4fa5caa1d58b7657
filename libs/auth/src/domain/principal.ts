import { UnauthenticatedError } from '@aileron/errors';
import { higherRole, Role, spansWorkspaces } from './roles';

/** Who is calling, as the authentication layer established it. */
export interface Principal {
  kind: 'api_token' | 'user' | 'gateway' | 'session';
  /** token id or user id */
  id: string;
  name: string;
  organizationId: string;
  organizationSlug: string;
  /** role at the organisation level; null for a workspace-restricted token */
  orgRole: Role | null;
  /** explicit roles per workspace id (memberships, or a token's restriction) */
  workspaceRoles: ReadonlyMap<string, Role>;
  /** an API token bound to one workspace reaches nothing else */
  restrictedToWorkspaceId: string | null;
  platformOperator: boolean;
  /** for tokens: the id, so a JWT minted from a token dies with it */
  tokenId?: string;
  /**
   * for a user signed in by a credential that carries the IdP's claims (an IdP
   * JWT): the groups it names. Absent otherwise; the groups recorded at the
   * user's last sign-in then apply.
   */
  idpGroups?: readonly string[];
  /** for enrolled gateways: where they belong and the rollout groups they are in */
  gateway?: { workspaceId: string; workspaceSlug: string; groups: readonly string[] };
  /**
   * for an agent session's caveat token: what the token still allows. The
   * rest of the principal is its creator's, narrowed to the session's
   * workspace, so a session never does more than its creator could.
   */
  agentSession?: AgentSessionGrant;
  /**
   * for an OAuth access token an MCP client holds: the rest of the principal
   * is the person who consented, restricted to the one workspace whose MCP
   * endpoint the token's audience names (docs/oauth.md).
   */
  oauthClient?: OAuthClientGrant;
}

/** The consent an OAuth access token acts under. */
export interface OAuthClientGrant {
  /** the consent's id (the connected client an admin can revoke) */
  id: string;
  clientId: string;
  /** as the client's metadata named it: hostile input, never markup */
  clientName: string | null;
  workspaceSlug: string;
  /** the token's audience: the workspace's MCP endpoint */
  resource: string;
}

/** The caveats of a verified session token, as the layers that enforce them ask. */
export interface AgentSessionGrant {
  id: string;
  workspaceId: string;
  /** `token:<id>`, `user:<id>` or `gateway:<id>`: on whose behalf it acts */
  creator: string;
  caps: ReadonlySet<string>;
  /** whether the token reaches this server of the workspace */
  allowsServer(server: string): boolean;
  /** whether the token may see or call this tool (`server__tool`) */
  allowsTool(server: string, tool: string): boolean;
  /** whether the token reaches this sandbox (its `sandbox` caveats and the `sandbox:use` capability) */
  allowsSandbox(name: string): boolean;
}

/** An OAuth access token presented to a resource it was not issued for. */
export function oauthTokenElsewhere(resource: string): UnauthenticatedError {
  return new UnauthenticatedError(
    `This access token was issued for ${resource} and reaches nothing else; get a token for this endpoint`,
    'OAUTH_TOKEN_WRONG_RESOURCE',
  );
}

/** The caller's role inside one workspace, or null when it has no access at all. */
export function roleIn(principal: Principal, workspaceId: string): Role | null {
  if (principal.restrictedToWorkspaceId !== null && principal.restrictedToWorkspaceId !== workspaceId) return null;
  const explicit = principal.workspaceRoles.get(workspaceId) ?? null;
  return higherRole(explicit, orgWideRole(principal));
}

/** The organisation role that reaches every workspace: a token's always, a person's only when the role spans workspaces. */
function orgWideRole(principal: Principal): Role | null {
  return principal.kind === 'api_token'
    ? principal.orgRole
    : principal.orgRole && spansWorkspaces(principal.orgRole)
      ? principal.orgRole
      : null;
}

/**
 * The workspaces roleIn gives the caller a role in, as a filter a list can
 * put in its query (so a page holds only what the caller may see): every
 * workspace of the organisation, or these.
 */
export function workspacesVisibleTo(principal: Principal): 'all' | string[] {
  if (principal.restrictedToWorkspaceId !== null)
    return roleIn(principal, principal.restrictedToWorkspaceId) ? [principal.restrictedToWorkspaceId] : [];
  return orgWideRole(principal) ? 'all' : [...principal.workspaceRoles.keys()];
}

export function describePrincipal(principal: Principal): string {
  return `${principal.kind === 'api_token' ? 'token' : principal.kind}:${principal.id}`;
}
