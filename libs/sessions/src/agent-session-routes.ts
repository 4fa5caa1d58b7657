import { idParams, wsIdParams, wsParams } from './agent-sessions.schemas';

/** `/v1/sessions…` answers as the workspace's paths do, until clients have moved (docs/api-changelog.md). */
const ALIAS = 'An alias of the same path under `/v1/workspaces/{ws}`, kept for the clients of the last release.';

/**
 * A session route under its workspace (`/v1/workspaces/{ws}/sessions` + `path`):
 * the guard checks the caller's access to `:ws` (reading sessions is the least
 * any of them needs; the service checks the rest) and the service that the
 * session is one of that workspace's.
 */
export function inWorkspace(
  path: '' | '/:id' | `/:id/${string}`,
  permission: 'session.read' | 'session.create' = 'session.read',
) {
  return {
    path: `/v1/workspaces/:ws/sessions${path}`,
    permission,
    tenancy: 'workspace' as const,
    params: path === '' ? wsParams : wsIdParams,
  };
}

/** The same route under `/v1/sessions`, where the service checks the caller's access to the session's workspace itself. */
export function sessionsAlias(path: '' | '/:id' | `/:id/${string}`, description: string) {
  return {
    path: `/v1/sessions${path}`,
    tenancy: 'caller' as const,
    description: `${description} ${ALIAS}`.trim(),
    ...(path === '' ? {} : { params: idParams }),
  };
}
