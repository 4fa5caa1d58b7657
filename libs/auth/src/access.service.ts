import { Injectable } from '@nestjs/common';
import { ErrorCodeWithStatus, ForbiddenError, NotFoundError } from '@aileron/errors';
import { oauthTokenElsewhere, Principal, roleIn } from './domain/principal';
import { allows, GATEWAY_PERMISSIONS, Permission } from './domain/roles';
import { AuthRepository } from './auth.repository';
import { PrincipalCache } from './principal-cache.service';
import type { OrgScope, WorkspaceScope } from './scope';
import { SystemScopes } from './scope-issuer';

/**
 * Deny by default: the only way from a caller to a tenant scope. A workspace
 * the caller cannot see is a 404 (never confirm another tenant's names); one it
 * can see but may not act in is a 403.
 */
@Injectable()
export class AccessService {
  constructor(
    private readonly repository: AuthRepository,
    private readonly cache: PrincipalCache,
  ) {}

  organization(principal: Principal, permission: Permission): OrgScope {
    if (!allows(principal.orgRole, permission)) {
      throw new ForbiddenError(
        principal.restrictedToWorkspaceId
          ? `This token is limited to one workspace and may not ${permission}`
          : `Role "${principal.orgRole}" may not ${permission}`,
      );
    }
    return SystemScopes.organization(principal.organizationId);
  }

  /** The caller's own organisation, for reads every member may make. */
  callerOrganization(principal: Principal): OrgScope {
    return SystemScopes.organization(principal.organizationId);
  }

  /**
   * For resources addressed by their own id (an approval): the workspace they
   * belong to, as the caller may act in it. A gateway acts in its own workspace only.
   */
  async workspaceById(
    principal: Principal,
    workspaceId: string,
    permission: Permission,
    what: { kind: string; id: string; code: ErrorCodeWithStatus<404> },
  ): Promise<WorkspaceScope> {
    const workspace = await this.repository.findWorkspaceById(
      SystemScopes.organization(principal.organizationId),
      workspaceId,
    );
    if (principal.gateway) {
      if (!workspace || principal.gateway.workspaceId !== workspaceId)
        throw new NotFoundError(what.kind, what.id, what.code);
      return this.gatewayScope(principal, workspace, permission);
    }
    const role = workspace ? roleIn(principal, workspace.id) : null;
    if (!workspace || !role) throw new NotFoundError(what.kind, what.id, what.code);
    if (!allows(role, permission))
      throw new ForbiddenError(`Role "${role}" may not ${permission} in workspace "${workspace.slug}"`);
    return SystemScopes.workspace(principal.organizationId, workspace, role);
  }

  async workspace(principal: Principal, slug: string, permission: Permission): Promise<WorkspaceScope> {
    // before any lookup: the token names its workspace, and says nothing about any other
    if (principal.oauthClient && principal.oauthClient.workspaceSlug !== slug)
      throw oauthTokenElsewhere(principal.oauthClient.resource);
    // a slug that does not exist is cached too (as null): creating the workspace invalidates it
    const workspace = await this.cache.workspace(principal.organizationId, slug, () =>
      this.repository.findWorkspaceBySlug(SystemScopes.organization(principal.organizationId), slug),
    );
    if (principal.gateway) {
      if (!workspace || principal.gateway.workspaceId !== workspace.id)
        throw new NotFoundError('workspace', slug, 'WORKSPACE_NOT_FOUND');
      return this.gatewayScope(principal, workspace, permission);
    }
    const role = workspace ? roleIn(principal, workspace.id) : null;
    if (!workspace || !role) throw new NotFoundError('workspace', slug, 'WORKSPACE_NOT_FOUND');
    if (!allows(role, permission))
      throw new ForbiddenError(`Role "${role}" may not ${permission} in workspace "${slug}"`);
    return SystemScopes.workspace(principal.organizationId, workspace, role);
  }

  /** A gateway holds no role: in its own workspace it may do only what GATEWAY_PERMISSIONS lists. */
  private gatewayScope(
    principal: Principal,
    workspace: { id: string; slug: string },
    permission: Permission,
  ): WorkspaceScope {
    if (!GATEWAY_PERMISSIONS.has(permission))
      throw new ForbiddenError(`A gateway token may not ${permission}`, 'GATEWAY_TOKEN_NOT_ALLOWED');
    return SystemScopes.workspace(principal.organizationId, workspace, 'member');
  }
}
