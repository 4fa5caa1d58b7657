import type { Role } from './domain/roles';
import type { OrgScope, WorkspaceScope } from './scope';

/**
 * The only place scopes are made. AccessService uses it after checking the
 * caller; process-internal work (first-start bootstrap, jobs whose payload names
 * the workspace) uses it directly. Controllers must not import this file
 * (.dependency-cruiser.cjs enforces it): a request reaches a tenant only
 * through AccessService.
 */
export const SystemScopes = {
  organization(organizationId: string): OrgScope {
    return { organizationId } as OrgScope;
  },
  workspace(organizationId: string, workspace: { id: string; slug: string }, role: Role = 'owner'): WorkspaceScope {
    return { organizationId, workspaceId: workspace.id, workspaceSlug: workspace.slug, role } as WorkspaceScope;
  },
};
