import type { ConnectionMode } from '@aileron/catalog';

/**
 * Connections of the pool to upstream MCP servers that sign in with OAuth
 * (docs/oauth.md, "The pool as an OAuth client"): whose connection a call
 * uses, what state a connection is in, and how a person is told to connect.
 * Pure rules, for the service, the routes and the pool.
 */

/** The subject of a per-workspace connection; a per-person one's is `user:<id>`. */
export const WORKSPACE_SUBJECT = 'workspace';

/** What a connection is as people see it (GET …/connections). */
export type ConnectionState = 'connected' | 'expired' | 'needs_reconnect';

/**
 * The person a call acts for, as `user:<id>`, or null when it is no person
 * (an API token, a gateway, an agent session one of those started). An
 * agent session acts for its creator: `requester` is the creator already.
 */
export function personOf(requester: string): string | null {
  return /^user:[0-9a-f-]{36}$/.test(requester) ? requester : null;
}

/** Whose connection a call of `requester` uses for a server connected `mode`; null when the caller has none to use. */
export function subjectFor(mode: ConnectionMode, requester: string): string | null {
  return mode === 'per_workspace' ? WORKSPACE_SUBJECT : personOf(requester);
}

/**
 * The state of a stored connection: `needs_reconnect` once the upstream
 * refused it (refresh token revoked or expired, or a fresh token refused),
 * `expired` when its access token ran out and there is no refresh token to
 * get another, else `connected`.
 */
export function stateOf(
  row: { state: string; accessExpiresAt: Date | null; hasRefreshToken: boolean },
  now: number,
): ConnectionState {
  if (row.state === 'needs_reconnect') return 'needs_reconnect';
  if (!row.hasRefreshToken && row.accessExpiresAt !== null && row.accessExpiresAt.getTime() <= now) return 'expired';
  return 'connected';
}

/**
 * Whether an access token should be refreshed before it is used: within a
 * minute of its expiry (or a tenth of a short lifetime), so a call never
 * carries a token that runs out on the way.
 */
export function refreshDue(accessExpiresAt: Date | null, lifetimeSeconds: number | null, now: number): boolean {
  if (accessExpiresAt === null) return false;
  const margin = Math.min(60_000, Math.max(1_000, ((lifetimeSeconds ?? 600) * 1000) / 10));
  return accessExpiresAt.getTime() - margin <= now;
}

/** Where a person connects a server of a workspace in a browser: the console's sign-in first if need be. */
export function connectUrl(publicUrl: string, workspace: string, server: string): string {
  return `${publicUrl}${CONNECT_PATH}?${new URLSearchParams({ workspace, server })}`;
}

export const CONNECTIONS_PATH = '/oauth/connections';
export const CONNECT_PATH = `${CONNECTIONS_PATH}/connect`;
export const CALLBACK_PATH = `${CONNECTIONS_PATH}/callback`;
/** the pool's own Client ID Metadata Document: its client_id is this URL */
export const CLIENT_METADATA_PATH = `${CONNECTIONS_PATH}/client-metadata.json`;

/** Why a call cannot get a token; each is a tool error's code. */
export type ConnectionProblem =
  /** nobody connected it yet (for this person, or for the workspace) */
  | 'CONNECTION_REQUIRED'
  /** it was connected, and the upstream no longer accepts it */
  | 'CONNECTION_NEEDS_RECONNECT'
  /** a per-person server, called by an API token or a gateway: no person to connect */
  | 'CONNECTION_PERSON_REQUIRED'
  /** the authorization server could not be reached to refresh: try again */
  | 'CONNECTION_UNAVAILABLE';

/**
 * What the caller is told: who must connect (or connect again) and where.
 * `person` is the caller's name when the connection is theirs.
 */
export function problemMessage(
  problem: ConnectionProblem,
  context: { server: string; workspace: string; mode: ConnectionMode; url: string; caller: string; scope?: string },
): string {
  const { server, workspace, mode, url } = context;
  const who = (again: string) =>
    mode === 'per_workspace'
      ? `an admin of workspace ${workspace} must connect it${again} for everyone`
      : `you (${context.caller}) must connect your own account${again}`;
  switch (problem) {
    case 'CONNECTION_REQUIRED':
      return `${server} needs an OAuth connection before it can be used: ${who('')}, in a browser, at ${url}`;
    case 'CONNECTION_NEEDS_RECONNECT':
      if (context.scope)
        return `${server} asks for more access (scope "${context.scope}") than ${mode === 'per_workspace' ? "the workspace's" : 'your'} connection was given: ${who(' again')}, granting it, in a browser, at ${url}`;
      return `${server} no longer accepts ${mode === 'per_workspace' ? "the workspace's" : 'your'} connection (it was revoked or has expired): ${who(' again')}, in a browser, at ${url}`;
    case 'CONNECTION_PERSON_REQUIRED':
      return `${server} connects per person, and this call comes from ${context.caller}, which is no person: call as a person (their own credential or an agent session they started), or ask an admin to make ${server} per_workspace`;
    case 'CONNECTION_UNAVAILABLE':
      return `${server}'s authorization server could not be reached to renew the connection's token; nothing was called. Retry shortly`;
  }
}
