import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { CredentialResolvers, hashToken, Principal, StreamAccess, WorkspaceScope } from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { isDatabaseUnavailable } from '@aileron/database';
import { Clock } from '@aileron/clock';
import { UnauthenticatedError } from '@aileron/errors';
import { GATEWAY_TOKEN_PREFIX, looksLikeGatewayToken } from './domain/credentials';
import { GatewayRecord, GatewayRepository } from './gateway.repository';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { KeyedThrottle } from '@aileron/schedule';

const TOUCH_EVERY_MS = 60_000;
/** how long a replica trusts a gateway it looked up, should a revocation message be lost */
const CACHE_TTL_MS = 10_000;
/** gateways whose token hash a replica keeps at hand; past it the memo starts over */
const HASH_MEMO_LIMIT = 4_096;

export function principalFromGateway(gateway: GatewayRecord): Principal {
  return {
    kind: 'gateway',
    id: gateway.id,
    name: gateway.name,
    organizationId: gateway.organizationId,
    organizationSlug: gateway.organizationSlug,
    // no roles: a gateway reaches the gateway API of its workspace and nothing else
    orgRole: null,
    workspaceRoles: new Map(),
    restrictedToWorkspaceId: gateway.workspaceId,
    platformOperator: false,
    gateway: { workspaceId: gateway.workspaceId, workspaceSlug: gateway.workspaceSlug, groups: gateway.groups },
  };
}

/** What a replica keeps of a token it checked: the gateway, and until when the token works (the Clock's ms). */
interface Checked {
  gateway: GatewayRecord;
  principal: Principal;
  /** null: until it is rotated or the gateway revoked, which evict it on every replica */
  validUntil: number | null;
  /** why it stops: its own expiry, or the end of the grace a rotation gave it */
  endsAs: 'TOKEN_EXPIRED' | 'GATEWAY_TOKEN_ROTATED';
}

const ENDED = {
  TOKEN_EXPIRED: 'The gateway token has expired',
  GATEWAY_TOKEN_ROTATED: 'The gateway token was replaced by a rotation and its grace period has ended',
} as const;

/**
 * When a token stops working: the current one at its expiry; one a rotation
 * replaced at the end of its grace period (which never outlasts its own expiry).
 */
function validity(gateway: GatewayRecord, matched: 'current' | 'previous'): Pick<Checked, 'validUntil' | 'endsAs'> {
  if (matched === 'previous')
    return { validUntil: gateway.previousTokenValidUntil?.getTime() ?? 0, endsAs: 'GATEWAY_TOKEN_ROTATED' };
  return { validUntil: gateway.tokenExpiresAt?.getTime() ?? null, endsAs: 'TOKEN_EXPIRED' };
}

/** Authenticates gateway tokens for the global guard, from memory on the hot path. */
@Injectable()
export class GatewayCredentials implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('GatewayCredentials');
  private readonly cache: SharedCache<Checked>;
  /** which gateways' last-seen write is due: only those seen within the last TOUCH_EVERY_MS are remembered */
  private readonly touched: KeyedThrottle;
  /**
   * Token → its hash, for tokens the cache vouched for: a poll then costs a
   * map lookup, not a SHA-256. Only the hashing is skipped; every request
   * still asks the cache, so a revocation (which evicts the hash there)
   * refuses the very next poll as before.
   */
  private readonly hashes = new Map<string, string>();

  constructor(
    private readonly repository: GatewayRepository,
    private readonly resolvers: CredentialResolvers,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    streams: StreamAccess,
    private readonly clock: Clock,
  ) {
    this.touched = new KeyedThrottle(clock, TOUCH_EVERY_MS);
    this.cache = new SharedCache(bus, 'gateway-credentials', CACHE_TTL_MS, clock, {
      staleIfError: isDatabaseUnavailable,
    });
    // a revoked gateway's open streams (MCP, events) end on every replica, not at their next request
    this.cache.onEvict(() => streams.recheck());
  }

  onModuleInit(): void {
    this.resolvers.register({ prefix: GATEWAY_TOKEN_PREFIX, resolve: (token) => this.resolve(token) });
  }

  onModuleDestroy(): void {
    this.cache.close();
    this.hashes.clear();
  }

  async resolve(token: string): Promise<Principal> {
    if (!looksLikeGatewayToken(token)) throw new UnauthenticatedError('The token is malformed', 'TOKEN_INVALID');
    const hash = hashToken(token);
    const found = await this.cache.getOrLoad(hash, async () => {
      const gateway = await this.repository.findGatewayByTokenHash(SystemScopes.system('gateway authentication'), hash);
      if (!gateway) throw new UnauthenticatedError('The token is not valid', 'TOKEN_INVALID');
      if (gateway.revokedAt) throw new UnauthenticatedError('The gateway has been revoked', 'GATEWAY_REVOKED');
      return { gateway, principal: principalFromGateway(gateway), ...validity(gateway, gateway.matched) };
    });
    // checked at every use, not only at load: an expiry or a grace period ends on every replica by itself
    if (!this.stillValid(found)) throw new UnauthenticatedError(ENDED[found.endsAs], found.endsAs);
    this.touch(found.gateway);
    return found.principal;
  }

  /** The principal for a token this replica has checked recently, without awaiting anything. */
  peek(token: string): Principal | undefined {
    const known = this.hashes.get(token);
    if (known === undefined && !looksLikeGatewayToken(token)) return undefined;
    const hash = known ?? hashToken(token);
    const found = this.cache.get(hash);
    if (!found || !this.stillValid(found)) {
      // expired or revoked: nothing of it stays here
      if (known !== undefined) this.hashes.delete(token);
      return undefined;
    }
    // only a token the cache vouched for gets in, so guessing cannot fill the memo
    if (known === undefined) {
      if (this.hashes.size >= HASH_MEMO_LIMIT) this.hashes.clear();
      this.hashes.set(token, hash);
    }
    this.touch(found.gateway);
    return found.principal;
  }

  /** The principal of a gateway as it is now, for what acts on its behalf (the agent sessions it started). */
  async principalById(scope: WorkspaceScope, id: string): Promise<Principal> {
    const gateway = await this.repository.findGateway(scope, id);
    if (!gateway) throw new UnauthenticatedError('The gateway no longer exists', 'TOKEN_INVALID');
    if (gateway.revokedAt) throw new UnauthenticatedError('The gateway has been revoked', 'GATEWAY_REVOKED');
    return principalFromGateway(gateway);
  }

  /** Forget a gateway's tokens everywhere at once (revocation, new groups, a rotation). */
  async forget(gateway: { tokenHash: string; previousTokenHash: string | null }): Promise<void> {
    await Promise.all(
      [gateway.tokenHash, gateway.previousTokenHash].flatMap((hash) => (hash ? [this.cache.invalidate(hash)] : [])),
    );
  }

  private stillValid(checked: Checked): boolean {
    return checked.validUntil === null || this.clock.now() < checked.validUntil;
  }

  private touch({ id, organizationId }: { id: string; organizationId: string }): void {
    // last seen is informational; a write per request would cost more than it tells
    if (!this.touched.due(id)) return;
    this.repository
      .touchGateway(SystemScopes.organization(organizationId), id, this.clock.date())
      .catch((error: unknown) => this.logger.warn({ err: error }, 'could not record gateway use'));
  }
}
