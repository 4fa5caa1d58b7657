import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { RedisService, RedisUnavailableError } from '@aileron/redis';

export type BusHandler = (message: unknown) => void;

/**
 * Fire-and-forget notifications between the processes of one installation
 * (cache invalidation, "this approval was decided"). Never the only copy of a
 * fact: whoever misses a message re-reads the database, so losing one costs
 * freshness, not correctness. Publishing never waits for Redis, nor fails
 * for want of it.
 */
export interface MessageBus {
  publish(channel: string, message: unknown): Promise<void>;
  /** returns the function that unsubscribes */
  subscribe(channel: string, handler: BusHandler): () => void;
  /**
   * Whether a message published on `channel` now may reach a subscriber: so a
   * publisher can skip building it. True wherever another process may listen.
   */
  audible(channel: string): boolean;
  /** false while messages cannot travel between replicas: what is published meanwhile reaches this replica only */
  readonly connected: boolean;
  /** told each time `connected` changes; after a `true`, messages of the gap may have been missed */
  onConnectionChange(listener: (connected: boolean) => void): () => void;
  close(): Promise<void>;
}

export const MESSAGE_BUS = Symbol('MESSAGE_BUS');

/** Embedded mode: one process, so an emitter is the whole bus. */
export class InProcessBus implements MessageBus {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  async publish(channel: string, message: unknown): Promise<void> {
    // one process: nobody subscribed now, nobody hears it (every pool call's events, with no live stream open)
    if (!this.audible(channel)) return;
    // asynchronous like Redis, so publishers never depend on handlers running inline
    const copy = JSON.parse(JSON.stringify(message ?? null)) as unknown;
    setImmediate(() => this.emitter.emit(channel, copy));
  }

  audible(channel: string): boolean {
    return this.emitter.listenerCount(channel) > 0;
  }

  subscribe(channel: string, handler: BusHandler): () => void {
    this.emitter.on(channel, handler);
    return () => this.emitter.off(channel, handler);
  }

  readonly connected = true;

  onConnectionChange(): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

/**
 * Server mode: Redis pub/sub reaches every replica, this one included. While
 * Redis is away, publishing reaches this replica's own subscribers only (an
 * approval decided here still wakes the waits here) and `connected` says so.
 */
export class RedisBus implements MessageBus {
  private readonly subscriber: Redis;
  private readonly handlers = new Map<string, Set<BusHandler>>();
  private readonly listeners = new Set<(connected: boolean) => void>();
  private readonly stopWatching: () => void;

  constructor(private readonly redis: RedisService) {
    this.subscriber = redis.connection('subscriber');
    const prefix = redis.channel('bus:');
    this.subscriber.on('message', (channel: string, raw: string) => this.deliver(channel.slice(prefix.length), raw));
    this.stopWatching = redis.onChange((available) => {
      for (const listener of [...this.listeners]) listener(available);
    });
  }

  get connected(): boolean {
    return this.redis.available;
  }

  onConnectionChange(listener: (connected: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private key(channel: string): string {
    return this.redis.channel(`bus:${channel}`);
  }

  private deliver(channel: string, raw: string): void {
    const handlers = this.handlers.get(channel);
    if (!handlers) return;
    let message: unknown;
    try {
      message = JSON.parse(raw);
    } catch {
      return;
    }
    for (const handler of handlers) handler(message);
  }

  async publish(channel: string, message: unknown): Promise<void> {
    const raw = JSON.stringify(message ?? null);
    try {
      await this.redis.run('the message bus', (commands) => commands.publish(this.key(channel), raw));
    } catch (error) {
      if (!(error instanceof RedisUnavailableError)) throw error;
      // asynchronous like Redis, so publishers never depend on handlers running inline
      setImmediate(() => this.deliver(channel, raw));
    }
  }

  /** other replicas subscribe through Redis, unseen from here */
  audible(): boolean {
    return true;
  }

  subscribe(channel: string, handler: BusHandler): () => void {
    let handlers = this.handlers.get(channel);
    if (!handlers) {
      handlers = new Set();
      this.handlers.set(channel, handlers);
      void this.subscriber.subscribe(this.key(channel)).catch(() => undefined);
    }
    handlers.add(handler);
    return () => {
      handlers.delete(handler);
      if (handlers.size === 0) {
        this.handlers.delete(channel);
        void this.subscriber.unsubscribe(this.key(channel)).catch(() => undefined);
      }
    };
  }

  async close(): Promise<void> {
    this.handlers.clear();
    this.listeners.clear();
    this.stopWatching();
    await this.subscriber.quit().catch(() => undefined);
  }
}
