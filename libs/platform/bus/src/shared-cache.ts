import type { Clock } from '@aileron/clock';
import type { MessageBus } from './message-bus';

interface Entry<V> {
  value: V;
  expiresAt: number;
}

export interface SharedCacheOptions {
  /**
   * default DEFAULT_MAX_ENTRIES; past it the least recently used entry goes,
   * so a cache keyed by tenant holds the tenants in use, however many the
   * installation has
   */
  maxEntries?: number;
  /**
   * Whether a failed load means its source is away rather than that the
   * answer changed (the database is down, not the token revoked). Then an
   * entry past its TTL is served for up to `maxStaleMs` more instead of the
   * error: an outage must not end what worked a second before it. An
   * invalidation still removes the entry at once, so nothing revoked or
   * changed before the outage is served stale (unless it says it only added:
   * `invalidate`'s `keepForOutage`).
   */
  staleIfError?: (error: unknown) => boolean;
  /** how long past its TTL an entry may serve while its source is away (default 10 minutes) */
  maxStaleMs?: number;
}

const DEFAULT_MAX_STALE_MS = 10 * 60_000;
/** per cache and replica: 10,000 workspaces' (or credentials') entries of a few kilobytes each, tens of megabytes at most */
export const DEFAULT_MAX_ENTRIES = 10_000;

/**
 * An in-memory cache every replica keeps for the hot path (compiled policy,
 * resolved catalog, gateway credentials), invalidated across replicas through
 * the bus. Keys are `:`-separated paths (`<org>:<workspace>:…`) so one message
 * can drop everything under a prefix. The TTL bounds staleness should a bus
 * message be lost; when the bus comes back after an outage (messages of the
 * gap may be lost) everything is dropped.
 */
export class SharedCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly loading = new Map<string, Promise<V>>();
  /** bumped on every invalidation, so a load that started before one is not stored */
  private generation = 0;
  private readonly unsubscribe: () => void;
  private readonly stopWatching: () => void;
  private readonly evicted = new Set<(prefix: string, keptForOutage: boolean) => void>();

  constructor(
    private readonly bus: MessageBus,
    private readonly channel: string,
    private readonly ttlMs: number,
    /** the TTL runs on the process's Clock, so a test that moves it past an expiry moves the cache's too */
    private readonly clock: Clock,
    private readonly options: SharedCacheOptions = {},
  ) {
    this.unsubscribe = bus.subscribe(`cache.${channel}`, (message) => {
      const { prefix, keepForOutage } = (message ?? {}) as { prefix?: unknown; keepForOutage?: unknown };
      if (typeof prefix === 'string') this.evict(prefix, keepForOutage === true);
    });
    this.stopWatching = bus.onConnectionChange((connected) => {
      if (connected) this.evict('');
    });
  }

  /** The value while it is fresh (and then the last entry to go when the cache is full). */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const now = this.clock.now();
    if (entry.expiresAt > now) {
      // a Map keeps insertion order: moved to the end, the front is always the least recently used
      this.entries.delete(key);
      this.entries.set(key, entry);
      return entry.value;
    }
    // kept past its TTL only while it may still stand in for a load that fails for want of its source
    if (!this.options.staleIfError || entry.expiresAt + this.maxStaleMs <= now) this.entries.delete(key);
    return undefined;
  }

  set(key: string, value: V): void {
    this.entries.delete(key);
    if (this.entries.size >= (this.options.maxEntries ?? DEFAULT_MAX_ENTRIES)) {
      const leastRecent = this.entries.keys().next().value;
      if (leastRecent !== undefined) this.entries.delete(leastRecent);
    }
    this.entries.set(key, { value, expiresAt: this.clock.now() + this.ttlMs });
  }

  /** Entries held now, fresh or kept for an outage. */
  get size(): number {
    return this.entries.size;
  }

  /** One load per key at a time; concurrent callers share it. */
  async getOrLoad(key: string, load: () => Promise<V>): Promise<V> {
    const cached = this.get(key);
    if (cached !== undefined) return cached;
    const pending = this.loading.get(key);
    if (pending) return pending;
    const generation = this.generation;
    const promise = load()
      .then(
        (value) => {
          if (generation === this.generation) this.set(key, value);
          return value;
        },
        (error: unknown) => {
          // read again: an invalidation during the load removed what may not be served any more
          const stale = this.entries.get(key);
          if (stale && this.options.staleIfError?.(error) && stale.expiresAt + this.maxStaleMs > this.clock.now())
            return stale.value;
          throw error;
        },
      )
      .finally(() => this.loading.delete(key));
    this.loading.set(key, promise);
    return promise;
  }

  private get maxStaleMs(): number {
    return this.options.maxStaleMs ?? DEFAULT_MAX_STALE_MS;
  }

  /**
   * Drops `prefix` and everything under it here at once, and on every other
   * replica soon after. With `keepForOutage`, for a change that only added to
   * what the entries say (a new workspace, a new user: nothing anyone had is
   * taken away), they are reloaded at their next use like expired ones, and
   * like those may still stand in while their source is away: what they grant
   * was true a moment ago and still is, so far as it goes. Without it (a
   * revocation, a removal, a role changed) they are gone.
   */
  async invalidate(prefix: string, options: { keepForOutage?: boolean } = {}): Promise<void> {
    const keepForOutage = options.keepForOutage === true;
    this.evict(prefix, keepForOutage);
    await this.bus.publish(`cache.${this.channel}`, { prefix, keepForOutage }).catch(() => undefined);
  }

  /**
   * Called on every replica when a prefix is invalidated, here or elsewhere:
   * for state derived from the cached values that lives outside the cache
   * (running pool instances of a catalog assignment). The prefix `''` means
   * everything (the bus was interrupted); `keptForOutage` says the
   * invalidation only added (see `invalidate`).
   */
  onEvict(listener: (prefix: string, keptForOutage: boolean) => void): () => void {
    this.evicted.add(listener);
    return () => this.evicted.delete(listener);
  }

  private evict(prefix: string, keepForOutage = false): void {
    this.generation++;
    const under = (key: string): boolean => prefix === '' || key === prefix || key.startsWith(`${prefix}:`);
    const now = this.clock.now();
    for (const [key, entry] of this.entries)
      if (!under(key)) continue;
      else if (keepForOutage && this.options.staleIfError) entry.expiresAt = Math.min(entry.expiresAt, now);
      else this.entries.delete(key);
    for (const key of this.loading.keys()) if (under(key)) this.loading.delete(key);
    for (const listener of this.evicted) listener(prefix, keepForOutage);
  }

  close(): void {
    this.unsubscribe();
    this.stopWatching();
    this.entries.clear();
  }
}
