import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';

export type BusHandler = (message: unknown) => void;

/**
 * Fire-and-forget notifications between the processes of one installation
 * (cache invalidation, "this approval was decided"). Never the only copy of a
 * fact: whoever misses a message re-reads the database, so losing one costs
 * freshness, not correctness.
 */
export interface MessageBus {
  publish(channel: string, message: unknown): Promise<void>;
  /** returns the function that unsubscribes */
  subscribe(channel: string, handler: BusHandler): () => void;
  close(): Promise<void>;
}

export const MESSAGE_BUS = Symbol('MESSAGE_BUS');

/** Embedded mode: one process, so an emitter is the whole bus. */
export class InProcessBus implements MessageBus {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  async publish(channel: string, message: unknown): Promise<void> {
    // asynchronous like Redis, so publishers never depend on handlers running inline
    const copy = JSON.parse(JSON.stringify(message ?? null)) as unknown;
    setImmediate(() => this.emitter.emit(channel, copy));
  }

  subscribe(channel: string, handler: BusHandler): () => void {
    this.emitter.on(channel, handler);
    return () => this.emitter.off(channel, handler);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

/** Server and cluster modes: Redis pub/sub reaches every replica, this one included. */
export class RedisBus implements MessageBus {
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly handlers = new Map<string, Set<BusHandler>>();

  constructor(url: string, private readonly prefix: string) {
    const options = { lazyConnect: false, maxRetriesPerRequest: null, enableOfflineQueue: true };
    this.publisher = new Redis(url, options);
    this.subscriber = new Redis(url, options);
    this.subscriber.on('message', (channel: string, raw: string) => {
      const handlers = this.handlers.get(channel.slice(this.prefix.length + 5));
      if (!handlers) return;
      let message: unknown;
      try {
        message = JSON.parse(raw);
      } catch {
        return;
      }
      for (const handler of handlers) handler(message);
    });
    // connection errors surface through failed publishes; an unhandled 'error' event would kill the process
    this.publisher.on('error', () => undefined);
    this.subscriber.on('error', () => undefined);
  }

  private key(channel: string): string {
    return `${this.prefix}:bus:${channel}`;
  }

  async publish(channel: string, message: unknown): Promise<void> {
    await this.publisher.publish(this.key(channel), JSON.stringify(message ?? null));
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
    await Promise.allSettled([this.publisher.quit(), this.subscriber.quit()]);
  }
}
