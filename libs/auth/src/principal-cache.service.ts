import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { isDatabaseUnavailable } from '@aileron/database';
import { Clock } from '@aileron/clock';
import { OutboxService } from '@aileron/outbox';
import type { Principal } from './domain/principal';

/** how long a replica trusts what it resolved, should an invalidation message be lost */
const CACHE_TTL_MS = 30_000;
/** every key sits under one root, so any write that could change access drops them all */
const ROOT = 'all';
/** the changes that can alter who a caller is or what they reach: organisations, identity providers, workspaces, users, memberships, revocations */
const CHANGES_ACCESS = /^(organization|workspace|user|member)\.|^token\.revoked$/;
/**
 * The changes that only add: a new organisation, workspace or user takes
 * nothing from anyone, so what was cached before stays true as far as it
 * goes. The entries are reloaded as usual, but may still stand in should the
 * database be away at that moment (the first write before an outage must not
 * end every caller's access during it).
 */
const ONLY_ADDS = /^(organization|workspace|user)\.created$/;

/** Whether the changes these outbox topics record only add to who may reach what (ONLY_ADDS). */
export function changesOnlyAdd(topics: readonly string[]): boolean {
  return topics.every((topic) => ONLY_ADDS.test(topic));
}

export interface CachedPrincipal {
  principal: Principal;
  /** API tokens and the JWTs minted from them: checked on every use, not only when loaded */
  expiresAt: Date | null;
  /** an API token's last recorded use, advanced in place so the write stays throttled */
  lastUsedAt?: Date | null;
}

export type WorkspaceRef = { id: string; slug: string; name: string };

/**
 * The authentication hot path from memory: principals by credential and
 * workspaces by slug. Writes that could change who someone is or what they may
 * reach are rare, so each drops everything on every replica rather than
 * working out which entries it touched. Each such write records its outbox
 * message, and the cache is dropped after any commit that recorded one.
 */
@Injectable()
export class PrincipalCache implements OnModuleDestroy {
  private readonly principals: SharedCache<CachedPrincipal>;
  private readonly workspaces: SharedCache<WorkspaceRef | null>;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, outbox: OutboxService, clock: Clock) {
    this.principals = new SharedCache(bus, 'auth-principals', CACHE_TTL_MS, clock, {
      staleIfError: isDatabaseUnavailable,
    });
    this.workspaces = new SharedCache(bus, 'auth-workspaces', CACHE_TTL_MS, clock, {
      staleIfError: isDatabaseUnavailable,
    });
    // after the commit: a replica reloading before it would cache the old rows again
    outbox.afterCommitOf(
      (topic) => CHANGES_ACCESS.test(topic),
      (topics) => this.invalidateAll({ keepForOutage: changesOnlyAdd(topics) }),
    );
  }

  onModuleDestroy(): void {
    this.principals.close();
    this.workspaces.close();
  }

  /** A failed load (unknown or revoked credential) throws and is not stored. */
  principal(key: string, load: () => Promise<CachedPrincipal>): Promise<CachedPrincipal> {
    return this.principals.getOrLoad(`${ROOT}:${key}`, load);
  }

  workspace(
    organizationId: string,
    slug: string,
    load: () => Promise<WorkspaceRef | null>,
  ): Promise<WorkspaceRef | null> {
    return this.workspaces.getOrLoad(`${ROOT}:${organizationId}:${slug}`, load);
  }

  /**
   * Called on this replica whenever cached access is dropped, here or on
   * another replica (streams judge their callers again); `onlyAdded` when the
   * change took nothing away (ONLY_ADDS).
   */
  onChange(listener: (onlyAdded: boolean) => void): () => void {
    return this.principals.onEvict((_prefix, keptForOutage) => listener(keptForOutage));
  }

  /** For changes no outbox message records (a role the IdP changed at sign-in); after their commit. */
  async invalidateAll(options: { keepForOutage?: boolean } = {}): Promise<void> {
    await Promise.all([this.principals.invalidate(ROOT, options), this.workspaces.invalidate(ROOT, options)]);
  }
}
