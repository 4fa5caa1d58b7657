import type { MessageBus } from './message-bus';

/**
 * Long-polls that answer on every replica: a request sleeps until a bus
 * message names what it waits for (an approval decided, a message written),
 * or until its time is up. The caller re-reads the database after each
 * wake-up, so a lost message costs at most one sleep, never an answer.
 */
export class Wakeups {
  private readonly sleepers = new Map<string, Set<() => void>>();
  private readonly unsubscribe: () => void;
  private isClosed = false;

  /** `keyOf` picks the key out of a message on `channel` (anything but a string is ignored). */
  constructor(bus: MessageBus, channel: string, keyOf: (message: unknown) => unknown) {
    this.unsubscribe = bus.subscribe(channel, (message) => {
      const key = keyOf(message);
      if (typeof key === 'string') this.wake(key);
    });
  }

  /** Resolves at the first message about `key`, or after `ms`; at once once closed. */
  sleep(key: string, ms: number): Promise<void> {
    if (this.isClosed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const set = this.sleepers.get(key) ?? new Set();
      this.sleepers.set(key, set);
      const wake = (): void => {
        clearTimeout(timer);
        set.delete(wake);
        if (set.size === 0) this.sleepers.delete(key);
        resolve();
      };
      const timer = setTimeout(wake, Math.max(0, ms));
      set.add(wake);
    });
  }

  /** Wakes whoever sleeps on `key` in this process. */
  wake(key: string): void {
    for (const wake of this.sleepers.get(key) ?? []) wake();
  }

  /** How many requests sleep on `key` now: a long-poll has begun. */
  sleeping(key: string): number {
    return this.sleepers.get(key)?.size ?? 0;
  }

  /**
   * The process is stopping: a long-poll answers with what it has instead of
   * waiting on, since the HTTP server's close waits for every answer under way.
   */
  get closed(): boolean {
    return this.isClosed;
  }

  /** At shutdown: everyone answers with what they have; no further message is heard. */
  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.unsubscribe();
    for (const set of this.sleepers.values()) for (const wake of set) wake();
  }
}
