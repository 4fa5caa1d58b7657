import type { Clock } from '@aileron/clock';

/** default bound of KeyedThrottle: far above the keys one replica sees in an interval, far below what would matter in memory */
const DEFAULT_MAX_KEYS = 100_000;

/**
 * Whether something done for a key (a gateway's or a sandbox's "last seen"
 * write) is due again: at most once per `everyMs` for each key. It remembers
 * only the keys it allowed within the last `everyMs`, since an older one is due
 * anyway: its memory follows the keys in use now, not every key ever seen (a
 * map of every gateway that ever polled grows with the installation's
 * tenants). Past `maxKeys` within one interval the oldest is forgotten early,
 * which costs that key one extra write, never a missed one.
 */
export class KeyedThrottle {
  /** key → when it was last allowed, oldest first (a key allowed again moves to the end) */
  private readonly allowed = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly everyMs: number,
    private readonly maxKeys = DEFAULT_MAX_KEYS,
  ) {}

  /** True (and remembered) when `key` was not allowed within the last `everyMs`. */
  due(key: string): boolean {
    const now = this.clock.now();
    this.forgetBefore(now - this.everyMs);
    const last = this.allowed.get(key);
    if (last !== undefined && now - last < this.everyMs) return false;
    this.allowed.delete(key);
    if (this.allowed.size >= this.maxKeys) this.allowed.delete(this.allowed.keys().next().value!);
    this.allowed.set(key, now);
    return true;
  }

  /** Keys remembered now. */
  get size(): number {
    return this.allowed.size;
  }

  private forgetBefore(cutoff: number): void {
    for (const [key, at] of this.allowed) {
      if (at > cutoff) return;
      this.allowed.delete(key);
    }
  }
}
