import type { Role } from './domain/roles';
import type { OrgScope, SystemScope, WorkspaceScope } from './scope';

/** A slug the type system can see is empty does not compile: a scope names its workspace. */
type NonEmpty<S extends string> = S extends '' ? never : S;

export class EmptyWorkspaceSlugError extends Error {
  constructor(workspaceId: string) {
    super(`a workspace scope needs the workspace's slug (workspace ${workspaceId})`);
  }
}

/**
 * The only place scopes are made. AccessService uses it after checking the
 * caller; process-internal work (first-start bootstrap, authentication before
 * a tenant is known, jobs whose payload names the workspace, sweeps) uses it
 * directly, from the files .dependency-cruiser.cjs lists
 * (`system-scopes-in-system-contexts`): a request reaches a tenant only
 * through AccessService.
 */
export const SystemScopes = {
  organization(organizationId: string): OrgScope {
    return { organizationId } as OrgScope;
  },
  workspace<S extends string>(
    organizationId: string,
    workspace: { id: string; slug: NonEmpty<S> },
    role: Role = 'owner',
  ): WorkspaceScope {
    // events, audit records and review links name the workspace by its slug: an empty one would name none
    if (!workspace.slug) throw new EmptyWorkspaceSlugError(workspace.id);
    return {
      organizationId,
      workspaceId: workspace.id,
      workspaceSlug: workspace.slug as string,
      role,
    } as WorkspaceScope;
  },
  /** For repository methods that are not tenant-scoped; `context` says what the process is doing. */
  system(context: string): SystemScope {
    return { context } as SystemScope;
  },
};
