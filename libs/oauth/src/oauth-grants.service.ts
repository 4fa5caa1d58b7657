import { Injectable, OnModuleInit } from '@nestjs/common';
import {
  describePrincipal,
  Offboardee,
  Offboarding,
  OffboardingContext,
  OrgScope,
  Principal,
  PrincipalCache,
  WorkspaceScope,
} from '@aileron/auth';
import { DatabaseService, Keyset, Transaction } from '@aileron/database';
import { NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { OauthProvider, ProviderRevocation } from './oauth-provider.service';
import { GrantRecord, NewGrant, OauthRepository, OauthSettingsRecord } from './oauth.repository';

type Disconnection = 'revoked_by_admin' | 'revoked_by_person' | 'offboarding' | 'expired' | ProviderRevocation;

/**
 * The consents people give MCP clients ("connected clients"): made on the
 * consent page, listed and revoked by the person and by admins, ended at
 * offboarding. Revoking one deletes it and every code and token oidc-provider
 * issued under it, in one transaction with its audit record; every replica
 * forgets the tokens it cached before the answer leaves.
 */
@Injectable()
export class OauthGrants implements OnModuleInit {
  constructor(
    private readonly db: DatabaseService,
    private readonly repository: OauthRepository,
    private readonly outbox: OutboxService,
    private readonly cache: PrincipalCache,
    private readonly offboarding: Offboarding,
    private readonly provider: OauthProvider,
  ) {}

  onModuleInit(): void {
    // with the other credentials that act for the person (API tokens, gateways, agent sessions)
    this.offboarding.register({
      name: 'oauth clients',
      order: 25,
      end: (scope, person, context) => this.offboard(scope, person, context),
    });
    // the client revoked its refresh token, or a refresh token came twice: the provider ended the grant, so the consent ends
    this.provider.onGrantRevoked(async (scope, grant, why) => {
      const ended = await this.db.transaction(async (tx) => {
        const deleted = await this.repository.deleteGrant(scope, grant.id, {}, tx);
        if (deleted)
          await this.end(tx, scope, [deleted], why === 'revoked_by_client' ? `user:${grant.userId}` : 'system', why);
        return deleted;
      });
      if (ended) await this.cache.invalidateAll();
    });
  }

  /** The person allowed the client: the consent, and its audit record, naming the client as its metadata did. */
  async connect(principal: Principal, scope: WorkspaceScope, grant: Omit<NewGrant, 'userId'>): Promise<GrantRecord> {
    return this.db.transaction(async (tx) => {
      const created = await this.repository.createGrant(scope, { ...grant, userId: principal.id }, tx);
      await this.outbox.record(tx, {
        topic: 'oauth.client_connected',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          connection_id: created.id,
          client_id: grant.clientId,
          client_name: grant.clientName,
          registration: grant.registration,
          resource: grant.resource,
          scope: grant.scope,
          actor: describePrincipal(principal),
        },
      });
      return created;
    });
  }

  list(
    scope: WorkspaceScope,
    filter: { userId?: string },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<GrantRecord[]> {
    return this.repository.listGrants(scope, { workspaceId: scope.workspaceId, ...filter }, page);
  }

  listOfPerson(scope: OrgScope, userId: string, page: Keyset<{ createdAt: Date; id: string }>): Promise<GrantRecord[]> {
    return this.repository.listGrants(scope, { userId }, page);
  }

  /** An admin disconnects a client in the workspace, whoever connected it. */
  revoke(caller: Principal, scope: WorkspaceScope, id: string): Promise<GrantRecord> {
    return this.disconnect(caller, scope, id, { workspaceId: scope.workspaceId }, 'revoked_by_admin');
  }

  /** A person disconnects a client they connected, in whichever workspace. */
  revokeOwn(caller: Principal, scope: OrgScope, id: string): Promise<GrantRecord> {
    return this.disconnect(caller, scope, id, { userId: caller.id }, 'revoked_by_person');
  }

  /** A consent whose grant ran out of time: it goes from the connected clients, on the record. */
  async expire(scope: OrgScope, grant: GrantRecord): Promise<void> {
    await this.db.transaction(async (tx) => {
      const deleted = await this.repository.deleteGrant(scope, grant.id, {}, tx);
      if (deleted) await this.end(tx, scope, [deleted], 'system', 'expired');
    });
  }

  settings(scope: OrgScope): Promise<OauthSettingsRecord> {
    return this.repository.settings(scope);
  }

  async putSettings(
    caller: Principal,
    scope: OrgScope,
    settings: { allowDynamicRegistration: boolean },
  ): Promise<OauthSettingsRecord> {
    return this.db.transaction(async (tx) => {
      const saved = await this.repository.putSettings(scope, settings, tx);
      await this.outbox.record(tx, {
        topic: 'oauth.settings_updated',
        organizationId: scope.organizationId,
        payload: { allow_dynamic_registration: saved.allowDynamicRegistration, actor: describePrincipal(caller) },
      });
      return saved;
    });
  }

  private async disconnect(
    caller: Principal,
    scope: OrgScope,
    id: string,
    filter: { workspaceId?: string; userId?: string },
    reason: Disconnection,
  ): Promise<GrantRecord> {
    const ended = await this.db.transaction(async (tx) => {
      const grant = await this.repository.deleteGrant(scope, id, filter, tx);
      if (!grant) throw new NotFoundError('connected client', id, 'OAUTH_CLIENT_NOT_FOUND');
      await this.end(tx, scope, [grant], describePrincipal(caller), reason);
      return grant;
    });
    // before the answer: every replica forgets the tokens it had resolved
    await this.cache.invalidateAll();
    return ended;
  }

  /** The person's consents end with them; the user.deactivated record that follows drops every replica's cache. */
  private async offboard(scope: OrgScope, person: Offboardee, context: OffboardingContext) {
    const grants = await this.repository.deleteGrantsOfUser(scope, person.userId, context.tx);
    await this.end(context.tx, scope, grants, context.actor, 'offboarding', context.reason);
    return { oauth_clients: grants.length };
  }

  private async end(
    tx: Transaction,
    scope: OrgScope,
    grants: GrantRecord[],
    actor: string,
    reason: Disconnection,
    detail?: string,
  ): Promise<void> {
    await this.repository.destroyEverythingOfGrants(
      scope,
      grants.map((g) => g.grantId),
      tx,
    );
    if (grants.length === 0) return;
    await this.outbox.record(
      tx,
      ...grants.map((grant) => ({
        topic: 'oauth.client_disconnected',
        organizationId: grant.organizationId,
        workspaceId: grant.workspaceId,
        payload: {
          workspace: grant.workspaceSlug,
          connection_id: grant.id,
          client_id: grant.clientId,
          client_name: grant.clientName,
          user_id: grant.userId,
          reason: detail ?? reason,
          actor,
        },
      })),
    );
  }
}
