import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import {
  describePrincipal,
  hashToken,
  Offboardee,
  Offboarding,
  OffboardingContext,
  OrgScope,
  Principal,
  WorkspaceScope,
} from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { DatabaseService, isDatabaseUnavailable, Keyset } from '@aileron/database';
import { ConflictError, DomainError, NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { looksLikeEnrollmentCode, mintEnrollmentCode, mintGatewayToken } from './domain/credentials';
import { GatewayCredentials } from './gateway-credentials.service';
import { GatewayRecord, GatewayRepository, GatewaySettingsRecord, GatewayWithTokens } from './gateway.repository';
import { SystemScopes } from '@aileron/auth/scope-issuer';

export const ENROLLMENT_DEFAULT_TTL_SECONDS = 3600;

// the enrolment code is the credential, and it names the tenant
const ENROLMENT = SystemScopes.system('gateway enrolment');

@Injectable()
export class GatewaysService implements OnModuleInit, OnModuleDestroy {
  private readonly settingsCache: SharedCache<GatewaySettingsRecord & { organizationSlug: string }>;

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: GatewayRepository,
    private readonly credentials: GatewayCredentials,
    private readonly outbox: OutboxService,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    private readonly clock: Clock,
    private readonly offboarding: Offboarding,
  ) {
    this.settingsCache = new SharedCache(bus, 'gateway-settings', 30_000, clock, {
      staleIfError: isDatabaseUnavailable,
    });
  }

  onModuleInit(): void {
    // first: the sessions and approvals these gateways started end with them
    this.offboarding.register({
      name: 'gateways',
      order: 10,
      end: (scope, person, context) => this.offboard(scope, person, context),
    });
  }

  onModuleDestroy(): void {
    this.settingsCache.close();
  }

  async createEnrollmentCode(
    principal: Principal,
    scope: WorkspaceScope,
    options: { expiresInSeconds: number; groups: string[]; tokenExpiresInSeconds: number | null },
  ): Promise<{ code: string; expiresAt: Date; groups: string[] }> {
    const code = mintEnrollmentCode();
    const expiresAt = new Date(this.clock.now() + options.expiresInSeconds * 1000);
    await this.db.transaction(async (tx) => {
      const { id } = await this.repository.createEnrollmentCode(
        scope,
        {
          codeHash: hashToken(code),
          groups: options.groups,
          expiresAt,
          createdBy: describePrincipal(principal),
          tokenExpiresInSeconds: options.tokenExpiresInSeconds,
        },
        tx,
      );
      await this.outbox.record(tx, {
        topic: 'gateway.enrollment_code_created',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          code_id: id,
          expires_at: expiresAt.toISOString(),
          groups: options.groups,
          token_expires_in_seconds: options.tokenExpiresInSeconds,
          actor: describePrincipal(principal),
        },
      });
    });
    return { code, expiresAt, groups: options.groups };
  }

  /** The one unauthenticated write: the code is the credential, good once. */
  async enroll(code: string, name: string): Promise<{ gateway: GatewayRecord; token: string }> {
    const codeHash = looksLikeEnrollmentCode(code) ? hashToken(code) : null;
    const now = this.clock.date();
    const token = mintGatewayToken();
    const gateway = codeHash
      ? await this.db.transaction(async (tx) => {
          const used = await this.repository.consumeEnrollmentCode(ENROLMENT, codeHash, now, tx);
          if (!used) return null;
          const created = await this.repository.createGateway(
            ENROLMENT,
            used,
            {
              name,
              groups: used.groups,
              tokenHash: hashToken(token),
              prefix: token.slice(0, 11),
              enrollmentCodeId: used.id,
              enrolledBy: used.createdBy,
              tokenExpiresAt:
                used.tokenExpiresInSeconds === null
                  ? null
                  : new Date(now.getTime() + used.tokenExpiresInSeconds * 1000),
            },
            tx,
          );
          await this.outbox.record(tx, {
            topic: 'gateway.enrolled',
            organizationId: used.organizationId,
            workspaceId: used.workspaceId,
            payload: {
              workspace: created.workspaceSlug,
              gateway_id: created.id,
              name,
              groups: used.groups,
              enrolled_by: used.createdBy,
              token_expires_at: created.tokenExpiresAt?.toISOString() ?? null,
              actor: `gateway:${created.id}`,
            },
          });
          return created;
        })
      : null;
    if (!gateway) {
      const state = codeHash ? await this.repository.enrollmentCodeState(ENROLMENT, codeHash, now) : 'unknown';
      const refusal = {
        unknown: ['ENROLLMENT_CODE_INVALID', 'The enrolment code is not valid'],
        used: ['ENROLLMENT_CODE_USED', 'The enrolment code has already been used'],
        expired: ['ENROLLMENT_CODE_EXPIRED', 'The enrolment code has expired'],
      } as const;
      const [code, detail] = refusal[state];
      throw new DomainError(code, detail);
    }
    return { gateway, token };
  }

  /** `enrolledBy`, a user's id: the gateways enrolled with codes they made, or a token acting for them made. */
  async list(
    scope: WorkspaceScope,
    filter: { enrolledBy?: string },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<GatewayRecord[]> {
    const enrolledBy = filter.enrolledBy ? await this.offboarding.refsOf(scope, filter.enrolledBy) : undefined;
    return this.repository.listGateways(scope, enrolledBy ? { enrolledBy } : {}, page);
  }

  /** For the overview: the gateways not revoked, how many were seen since `since`, and the most recently seen. */
  activity(
    scope: WorkspaceScope,
    since: Date,
    limit: number,
  ): Promise<{ enrolled: number; seen: number; recent: GatewayRecord[] }> {
    return this.repository.gatewayActivity(scope, since, limit);
  }

  async setGroups(principal: Principal, scope: WorkspaceScope, id: string, groups: string[]): Promise<GatewayRecord> {
    return this.change(principal, scope, id, 'gateway.updated', { groups }, { groups });
  }

  async revoke(principal: Principal, scope: WorkspaceScope, id: string): Promise<GatewayRecord> {
    return this.change(principal, scope, id, 'gateway.revoked', { revokedAt: this.clock.date() }, {});
  }

  /**
   * A new token for the gateway, shown once. The one it replaces keeps working
   * for `graceSeconds` (never past its own expiry) so the gateway can be
   * switched over; 0 ends it at once. A token a rotation had already replaced
   * ends now: a gateway has one token in its grace at most. Every replica
   * forgets the old tokens, and reloads them with their end, at once.
   */
  async rotateToken(
    principal: Principal,
    scope: WorkspaceScope,
    id: string,
    options: { graceSeconds: number; expiresInSeconds: number | null },
  ): Promise<{ gateway: GatewayRecord; token: string }> {
    const token = mintGatewayToken();
    const now = this.clock.now();
    const old = await this.db.transaction(async (tx) => {
      const gateway = await this.repository.lockGateway(scope, id, tx);
      if (!gateway) throw new NotFoundError('gateway', id, 'GATEWAY_NOT_FOUND');
      if (gateway.revokedAt)
        throw new ConflictError('GATEWAY_ALREADY_REVOKED', `Gateway ${id} is revoked; enrol it again instead`);
      const graceEnd = Math.min(now + options.graceSeconds * 1000, gateway.tokenExpiresAt?.getTime() ?? Infinity);
      const previousTokenValidUntil = graceEnd > now ? new Date(graceEnd) : null;
      const tokenExpiresAt = options.expiresInSeconds === null ? null : new Date(now + options.expiresInSeconds * 1000);
      await this.repository.replaceToken(
        scope,
        id,
        {
          tokenHash: hashToken(token),
          prefix: token.slice(0, 11),
          tokenExpiresAt,
          previousTokenHash: previousTokenValidUntil ? gateway.tokenHash : null,
          previousTokenValidUntil,
        },
        tx,
      );
      await this.outbox.record(tx, {
        topic: 'gateway.token_rotated',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          gateway_id: id,
          prefix: token.slice(0, 11),
          expires_at: tokenExpiresAt?.toISOString() ?? null,
          previous_prefix: gateway.prefix,
          previous_valid_until: previousTokenValidUntil?.toISOString() ?? null,
          grace_seconds: options.graceSeconds,
          // the token of an earlier rotation still in its grace, which ends now
          ended_earlier_grace: (gateway.previousTokenValidUntil?.getTime() ?? 0) > now,
          actor: describePrincipal(principal),
        },
      });
      return gateway;
    });
    await this.credentials.forget(old);
    return { gateway: (await this.repository.findGateway(scope, id))!, token };
  }

  /**
   * Revoke by person: the workspace's gateways enrolled with codes the person
   * (or a token acting for them) made, each a `gateway.revoked`, in one
   * transaction; the person and their other credentials stay. Answers the
   * gateways it revoked (those revoked already are left as they are).
   */
  async revokeEnrolledBy(principal: Principal, scope: WorkspaceScope, userId: string): Promise<GatewayRecord[]> {
    const refs = await this.offboarding.refsOf(scope, userId);
    const revoked = await this.db.transaction(async (tx) => {
      const enrolled = await this.repository.lockEnrolledByIn(scope, refs, tx);
      return this.revokeAll(scope, enrolled, {
        tx,
        actor: describePrincipal(principal),
        reason: 'revoked_by_person',
        at: this.clock.date(),
      });
    });
    return Promise.all(revoked.map(async (g) => (await this.repository.findGateway(scope, g.id))!));
  }

  /**
   * Offboarding: the gateways enrolled with codes the person (or a token
   * acting for them) made are revoked, each a `gateway.revoked`; every
   * replica drops their credentials once the offboarding commits.
   */
  private async offboard(
    scope: OrgScope,
    person: Offboardee,
    context: OffboardingContext,
  ): Promise<Record<string, number>> {
    const enrolled = await this.repository.lockEnrolledBy(scope, [...person.refs], context.tx);
    for (const gateway of enrolled) person.refs.add(`gateway:${gateway.id}`);
    return { gateways: (await this.revokeAll(scope, enrolled, context)).length };
  }

  /** Revokes those of `gateways` that are live, each a `gateway.revoked` with the reason; every replica forgets them after the commit. */
  private async revokeAll(
    scope: OrgScope,
    gateways: GatewayWithTokens[],
    { tx, actor, reason, at }: OffboardingContext,
  ): Promise<GatewayWithTokens[]> {
    const live = gateways.filter((g) => !g.revokedAt);
    for (const gateway of live) {
      const workspace = SystemScopes.workspace(scope.organizationId, {
        id: gateway.workspaceId,
        slug: gateway.workspaceSlug,
      });
      await this.repository.updateGateway(workspace, gateway.id, { revokedAt: at }, tx);
      await this.outbox.record(tx, {
        topic: 'gateway.revoked',
        organizationId: scope.organizationId,
        workspaceId: gateway.workspaceId,
        payload: { workspace: gateway.workspaceSlug, gateway_id: gateway.id, reason, actor },
      });
    }
    this.db.afterCommit(tx, async () => {
      await Promise.all(live.map((g) => this.credentials.forget(g)));
    });
    return live;
  }

  private async change(
    principal: Principal,
    scope: WorkspaceScope,
    id: string,
    topic: string,
    data: { groups?: string[]; revokedAt?: Date },
    payload: Record<string, unknown>,
  ): Promise<GatewayRecord> {
    const tokens = await this.db.transaction(async (tx) => {
      const gateway = await this.repository.findGateway(scope, id, tx);
      if (!gateway) throw new NotFoundError('gateway', id, 'GATEWAY_NOT_FOUND');
      if (data.revokedAt && gateway.revokedAt) return gateway;
      await this.repository.updateGateway(scope, id, data, tx);
      await this.outbox.record(tx, {
        topic,
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { workspace: scope.workspaceSlug, gateway_id: id, ...payload, actor: describePrincipal(principal) },
      });
      return gateway;
    });
    // every replica drops the cached credentials (a replaced token in its grace too), so a revoked gateway is refused at once
    await this.credentials.forget(tokens);
    return (await this.repository.findGateway(scope, id))!;
  }

  settings(scope: OrgScope): Promise<GatewaySettingsRecord & { organizationSlug: string }> {
    return this.settingsCache.getOrLoad(scope.organizationId, async () => ({
      ...(await this.repository.settings(scope)),
      organizationSlug: await this.repository.organizationSlug(scope),
    }));
  }

  peekSettings(scope: OrgScope): (GatewaySettingsRecord & { organizationSlug: string }) | undefined {
    return this.settingsCache.get(scope.organizationId);
  }

  async saveSettings(
    principal: Principal,
    scope: OrgScope,
    data: Omit<GatewaySettingsRecord, 'updatedAt'>,
  ): Promise<GatewaySettingsRecord> {
    await this.db.transaction(async (tx) => {
      await this.repository.saveSettings(scope, data, tx);
      await this.outbox.record(tx, {
        topic: 'gateway.settings_updated',
        organizationId: scope.organizationId,
        payload: {
          allow_local_servers: data.allowLocalServers,
          offline_mode: data.offlineMode,
          max_stale_seconds: data.maxStaleSeconds,
          actor: describePrincipal(principal),
        },
      });
    });
    await this.settingsCache.invalidate(scope.organizationId);
    return this.settings(scope);
  }
}
