import { Injectable } from '@nestjs/common';
import {
  AccessService,
  BrowserKeys,
  canGrant,
  describePrincipal,
  Offboarding,
  OrgScope,
  Principal,
  Role,
  roleIn,
  TokensService,
  WorkspaceScope,
  workspacesVisibleTo,
} from '@aileron/auth';
import { Clock } from '@aileron/clock';
import { DatabaseService, isUniqueViolation, Keyset, Transaction } from '@aileron/database';
import { ConflictError, ForbiddenError, NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import type {
  CreateOrganizationBody,
  CreateUserBody,
  CreateWorkspaceBody,
  IdentityProviderBody,
  PolicyDefault,
} from './tenancy.schemas';
import {
  IdentityProviderData,
  MemberRecord,
  OrganizationRecord,
  TenancyRepository,
  UserRecord,
  WorkspaceRecord,
} from './tenancy.repository';
import { SystemScopes } from '@aileron/auth/scope-issuer';

async function uniquely<T>(work: () => Promise<T>, conflict: () => ConflictError): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict();
    throw error;
  }
}

@Injectable()
export class TenancyService {
  constructor(
    private readonly db: DatabaseService,
    private readonly repository: TenancyRepository,
    private readonly tokens: TokensService,
    private readonly access: AccessService,
    private readonly outbox: OutboxService,
    private readonly browserKeys: BrowserKeys,
    private readonly offboarding: Offboarding,
    private readonly clock: Clock,
  ) {}

  /** A new tenant with its first owner token, in one transaction. */
  async createOrganization(
    body: CreateOrganizationBody,
    actor: string | null,
    options: { platformOperator?: boolean; defaultWorkspace?: { policyDefault: PolicyDefault } } = {},
  ): Promise<{ organization: OrganizationRecord; tokenId: string; token: string }> {
    return uniquely(
      () =>
        this.db.transaction(async (tx) => {
          const organization = await this.repository.createOrganization(
            SystemScopes.system('a new organisation'),
            body,
            tx,
          );
          const scope = SystemScopes.organization(organization.id);
          const { record, token } = await this.tokens.mint(
            scope,
            {
              name: 'owner',
              role: 'owner',
              workspaceId: null,
              expiresAt: null,
              createdBy: actor,
              platformOperator: options.platformOperator ?? false,
            },
            tx,
          );
          if (options.defaultWorkspace) {
            const workspace = await this.repository.createWorkspace(
              scope,
              { slug: 'default', name: 'Default', policyDefault: options.defaultWorkspace.policyDefault },
              tx,
            );
            await this.outbox.record(tx, {
              topic: 'workspace.created',
              organizationId: organization.id,
              workspaceId: workspace.id,
              payload: { workspace: workspace.slug, name: workspace.name, actor },
            });
          }
          await this.outbox.record(tx, {
            topic: 'organization.created',
            organizationId: organization.id,
            payload: { organization: organization.slug, actor },
          });
          return { organization, tokenId: record.id, token };
        }),
      () => new ConflictError('ORGANIZATION_SLUG_TAKEN', `An organisation with slug "${body.slug}" already exists`),
    );
  }

  getOrganization(scope: OrgScope): Promise<OrganizationRecord> {
    return this.repository.getOrganization(scope);
  }

  getIdentityProvider(scope: OrgScope): Promise<IdentityProviderData | null> {
    return this.repository.getIdentityProvider(scope);
  }

  async putIdentityProvider(
    principal: Principal,
    scope: OrgScope,
    body: IdentityProviderBody,
  ): Promise<IdentityProviderData> {
    const data: IdentityProviderData = {
      issuer: body.issuer,
      jwksUrl: body.jwks_url,
      audience: body.audience ?? null,
      allowAnyAudience: body.allow_any_audience,
      trustUnverifiedEmail: body.trust_unverified_email,
      subjectClaim: body.claims.subject,
      emailClaim: body.claims.email,
      nameClaim: body.claims.name,
      roleClaim: body.claims.role ?? null,
      roleMapping: body.role_mapping,
      defaultRole: body.default_role,
      groupsClaim: body.claims.groups,
      clientId: body.client_id ?? null,
      clientSecretSealed:
        body.client_secret !== undefined ? this.browserKeys.sealClientSecret(scope, body.client_secret) : null,
      scopes: body.scopes ?? [],
    };
    if (data.clientId && body.client_secret === undefined) {
      // a GET-edit-PUT round trip cannot send the secret back (it is never shown): keep it for the same client at the
      // same issuer only; a secret given to one IdP must never be presented to another
      const current = await this.repository.getIdentityProvider(scope);
      if (current?.clientId === data.clientId && current.issuer === data.issuer)
        data.clientSecretSealed = current.clientSecretSealed;
    }
    await uniquely(
      () =>
        this.db.transaction(async (tx) => {
          await this.repository.putIdentityProvider(scope, data, tx);
          await this.outbox.record(tx, {
            topic: 'organization.identity_provider_updated',
            organizationId: scope.organizationId,
            payload: { issuer: data.issuer, actor: describePrincipal(principal) },
          });
        }),
      () => new ConflictError('ISSUER_TAKEN', 'Another organisation already uses this issuer'),
    );
    return data;
  }

  async deleteIdentityProvider(principal: Principal, scope: OrgScope): Promise<void> {
    await this.db.transaction(async (tx) => {
      if (!(await this.repository.deleteIdentityProvider(scope, tx)))
        throw new NotFoundError('identity provider', 'current', 'IDENTITY_PROVIDER_NOT_FOUND');
      await this.outbox.record(tx, {
        topic: 'organization.identity_provider_deleted',
        organizationId: scope.organizationId,
        payload: { actor: describePrincipal(principal) },
      });
    });
  }

  /** Only the workspaces the caller can see, with its role in each. */
  async listWorkspaces(principal: Principal, page: Keyset<string>): Promise<(WorkspaceRecord & { role: Role })[]> {
    const visible = workspacesVisibleTo(principal);
    const rows = await this.repository.listWorkspaces(
      this.access.callerOrganization(principal),
      visible === 'all' ? {} : { ids: visible },
      page,
    );
    return rows.flatMap((ws) => {
      const role = roleIn(principal, ws.id);
      return role ? [{ ...ws, role }] : [];
    });
  }

  async createWorkspace(
    principal: Principal | null,
    scope: OrgScope,
    body: CreateWorkspaceBody,
  ): Promise<WorkspaceRecord> {
    return uniquely(
      () =>
        this.db.transaction(async (tx) => {
          const workspace = await this.repository.createWorkspace(
            scope,
            { slug: body.slug, name: body.name, policyDefault: body.policy_default },
            tx,
          );
          await this.outbox.record(tx, {
            topic: 'workspace.created',
            organizationId: scope.organizationId,
            workspaceId: workspace.id,
            payload: {
              workspace: workspace.slug,
              name: workspace.name,
              policy_default: workspace.policyDefault,
              actor: principal ? describePrincipal(principal) : 'system',
            },
          });
          return workspace;
        }),
      () => new ConflictError('WORKSPACE_SLUG_TAKEN', `A workspace with slug "${body.slug}" already exists`),
    );
  }

  getWorkspace(scope: WorkspaceScope): Promise<WorkspaceRecord> {
    return this.repository.getWorkspace(scope);
  }

  async updateWorkspace(principal: Principal, scope: WorkspaceScope, body: { name: string }): Promise<WorkspaceRecord> {
    return this.db.transaction(async (tx) => {
      const workspace = await this.repository.updateWorkspace(scope, body, tx);
      await this.outbox.record(tx, {
        topic: 'workspace.updated',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { workspace: workspace.slug, name: workspace.name, actor: describePrincipal(principal) },
      });
      return workspace;
    });
  }

  listUsers(scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<UserRecord[]> {
    return this.repository.listUsers(scope, page);
  }

  /** Pre-provisions a user; the first sign-in with the same e-mail links the identity. */
  async createUser(principal: Principal, scope: OrgScope, body: CreateUserBody): Promise<UserRecord> {
    this.assertCanGrant(principal, body.role);
    return uniquely(
      () =>
        this.db.transaction(async (tx) => {
          const user = await this.repository.createUser(
            scope,
            { email: body.email, name: body.name ?? null, role: body.role },
            tx,
          );
          await this.outbox.record(tx, {
            topic: 'user.created',
            organizationId: scope.organizationId,
            payload: { user_id: user.id, role: user.role, actor: describePrincipal(principal) },
          });
          return user;
        }),
      () => new ConflictError('USER_EMAIL_TAKEN', `A user with e-mail "${body.email}" already exists`),
    );
  }

  async updateUserRole(principal: Principal, scope: OrgScope, id: string, role: Role): Promise<UserRecord> {
    this.assertCanGrant(principal, role);
    const existing = await this.repository.findUser(scope, id);
    if (!existing) throw new NotFoundError('user', id, 'USER_NOT_FOUND');
    this.assertCanGrant(principal, existing.role);
    return this.db.transaction(async (tx) => {
      const user = await this.repository.updateUserRole(scope, id, role, tx);
      await this.outbox.record(tx, {
        topic: 'user.role_changed',
        organizationId: scope.organizationId,
        payload: { user_id: id, from: existing.role, to: role, actor: describePrincipal(principal) },
      });
      return user;
    });
  }

  /**
   * Offboarding (docs/auth.md#offboarding): in one transaction with its audit
   * records, the person is marked deactivated, their memberships go, and
   * everything that acts for them ends (Offboarding); `remove` then deletes
   * the user row. The commit drops what every replica cached of them (the
   * principal and session caches follow `user.*`; gateways are dropped by
   * their step). Deactivating someone deactivated already changes nothing.
   */
  async offboard(
    principal: Principal,
    scope: OrgScope,
    id: string,
    mode: 'deactivate' | 'remove',
  ): Promise<UserRecord> {
    const existing = await this.repository.findUser(scope, id);
    if (!existing) throw new NotFoundError('user', id, 'USER_NOT_FOUND');
    this.assertCanGrant(principal, existing.role);
    if (await this.offboarding.isSelf(scope, principal, id))
      throw new ForbiddenError(
        'Nobody offboards themselves, nor the person whose token they call with: ask another admin',
        'SELF_OFFBOARDING_FORBIDDEN',
      );
    const actor = describePrincipal(principal);
    const at = this.clock.date();
    return this.db.transaction(async (tx) => {
      const { user, activeOwners } = await this.repository.lockForOffboarding(scope, id, tx);
      if (!user) throw new NotFoundError('user', id, 'USER_NOT_FOUND');
      if (activeOwners.length === 1 && activeOwners[0] === id)
        throw new ConflictError(
          'LAST_OWNER',
          "This is the organisation's last active owner: make another person owner first",
        );
      const topic = mode === 'remove' ? 'user.removed' : 'user.deactivated';
      let ended: Record<string, number> | undefined;
      let record = user;
      if (!user.deactivatedAt) {
        record = await this.repository.setDeactivated(scope, id, at, tx);
        const reason = mode === 'remove' ? 'user removed' : 'user deactivated';
        ended = { memberships: await this.removeMemberships(scope, id, actor, reason, tx) };
        Object.assign(
          ended,
          await this.offboarding.end(scope, { userId: id, email: user.email }, { tx, actor, reason, at }),
        );
      } else if (mode === 'deactivate') return user;
      if (mode === 'remove') await this.repository.deleteUser(scope, id, tx);
      await this.outbox.record(tx, {
        topic,
        organizationId: scope.organizationId,
        // the record keeps naming the person after the row is gone
        payload: { user_id: id, email: user.email, role: user.role, ...(ended ? { ended } : {}), actor },
      });
      return record;
    });
  }

  /** Deactivation undone: the person may sign in again, with no membership (those do not come back). */
  async reactivate(principal: Principal, scope: OrgScope, id: string): Promise<UserRecord> {
    const existing = await this.repository.findUser(scope, id);
    if (!existing) throw new NotFoundError('user', id, 'USER_NOT_FOUND');
    this.assertCanGrant(principal, existing.role);
    if (!existing.deactivatedAt) return existing;
    return this.db.transaction(async (tx) => {
      const user = await this.repository.setDeactivated(scope, id, null, tx);
      await this.outbox.record(tx, {
        topic: 'user.reactivated',
        organizationId: scope.organizationId,
        payload: { user_id: id, email: user.email, role: user.role, actor: describePrincipal(principal) },
      });
      return user;
    });
  }

  /** Each membership a `member.removed` record in its workspace's log, as removing them one by one would leave. */
  private async removeMemberships(
    scope: OrgScope,
    userId: string,
    actor: string,
    reason: string,
    tx: Transaction,
  ): Promise<number> {
    const removed = await this.repository.deleteMembershipsOf(scope, userId, tx);
    for (const membership of removed)
      await this.outbox.record(tx, {
        topic: 'member.removed',
        organizationId: scope.organizationId,
        workspaceId: membership.workspaceId,
        payload: { workspace: membership.workspaceSlug, user_id: userId, role: membership.role, reason, actor },
      });
    return removed.length;
  }

  listMembers(scope: WorkspaceScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<MemberRecord[]> {
    return this.repository.listMembers(scope, page);
  }

  async putMember(principal: Principal, scope: WorkspaceScope, userId: string, role: Role): Promise<MemberRecord> {
    if (!canGrant(scope.role, role))
      throw new ForbiddenError(`Role "${scope.role}" may not grant role "${role}"`, 'ROLE_ESCALATION');
    const user = await this.repository.findUser(scope, userId);
    if (!user) throw new NotFoundError('user', userId, 'USER_NOT_FOUND');
    return this.db.transaction(async (tx) => {
      await this.assertAboveMember(scope, userId, tx);
      const member = await this.repository.putMember(scope, userId, role, tx);
      await this.outbox.record(tx, {
        topic: 'member.updated',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { user_id: userId, role, actor: describePrincipal(principal) },
      });
      return member;
    });
  }

  async removeMember(principal: Principal, scope: WorkspaceScope, userId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await this.assertAboveMember(scope, userId, tx);
      if (!(await this.repository.deleteMember(scope, userId, tx)))
        throw new NotFoundError('member', userId, 'MEMBER_NOT_FOUND');
      await this.outbox.record(tx, {
        topic: 'member.removed',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { user_id: userId, actor: describePrincipal(principal) },
      });
    });
  }

  /** Nobody changes a grant above their own: a workspace admin neither demotes nor removes an owner's membership. */
  private async assertAboveMember(scope: WorkspaceScope, userId: string, tx: Transaction): Promise<void> {
    const existing = await this.repository.lockMember(scope, userId, tx);
    if (existing && !canGrant(scope.role, existing.role)) {
      throw new ForbiddenError(
        `Role "${scope.role}" may not change a membership with role "${existing.role}"`,
        'ROLE_ESCALATION',
      );
    }
  }

  private assertCanGrant(principal: Principal, role: Role): void {
    if (!principal.orgRole || !canGrant(principal.orgRole, role)) {
      throw new ForbiddenError(`Role "${principal.orgRole}" may not grant role "${role}"`, 'ROLE_ESCALATION');
    }
  }
}
