import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { Redis, RedisOptions, ReplyError } from 'ioredis';
import { PeriodicTask } from '@aileron/schedule';
import { RedisUnavailableError } from './redis-unavailable.error';

export const REDIS_SETTINGS = Symbol('REDIS_SETTINGS');

export interface RedisSettings {
  /** unset: embedded mode, or a process that must not touch Redis (the CLI) */
  url: string | undefined;
  /** AILERON_QUEUE_PREFIX: every key and channel of this installation starts with it */
  prefix: string;
}

/** The longest a command may take before Redis counts as away: a stopped or swamped Redis accepts and never answers. */
const COMMAND_TIMEOUT_MS = 1_000;
const PING_TIMEOUT_MS = 500;
const PROBE_EVERY_MS = 1_000;
/** Reconnect attempts back off to this at most, so a restarted Redis is found within a second. */
const RECONNECT_MAX_MS = 1_000;
const CONNECT_TIMEOUT_MS = 2_000;
/** How long start-up waits for Redis before carrying on without it. */
const START_WAIT_MS = 2_000;

/**
 * What a dedicated connection is for:
 * - `subscriber`: SUBSCRIBE; waits through outages (ioredis subscribes again after a reconnect);
 * - `queue`: BullMQ's producer side; fails at once while Redis is away, like the shared commands;
 * - `worker`: BullMQ's blocking commands; waits through outages, BullMQ requires it.
 * None has ioredis' keyPrefix (BullMQ refuses it, and it never applies to
 * channels): their users put `prefix` in front themselves.
 */
export type ConnectionKind = 'subscriber' | 'queue' | 'worker';

/**
 * The installation's one way to Redis. Every key and pub/sub channel lives
 * under AILERON_QUEUE_PREFIX, so installations can share a Redis:
 * - the shared command connection (`run`) has ioredis' `keyPrefix`, so no
 *   key written through it can escape the prefix (SCAN and KEYS patterns are
 *   not prefixed by ioredis: nothing here uses them; prefix any that do);
 * - channels are named by `channel()`; BullMQ takes `prefix` as its option.
 *
 * Redis being away never makes a request wait: the shared connection has no
 * offline queue and a command time-out, `run` refuses at once (503
 * REDIS_UNAVAILABLE) once an outage is known, and a probe notices the return
 * within a second. The outage is logged once, when it starts, and once when
 * it ends.
 */
@Injectable()
export class RedisService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Redis');
  readonly configured: boolean;
  readonly prefix: string;
  private readonly shared: Redis | undefined;
  private state: 'starting' | 'up' | 'down' = 'starting';
  private downSince = 0;
  /** while Redis is away: pings it until one is answered */
  private probe: PeriodicTask | undefined;
  private closed = false;
  private readonly listeners = new Set<(available: boolean) => void>();

  constructor(@Inject(REDIS_SETTINGS) private readonly settings: RedisSettings) {
    this.configured = settings.url !== undefined;
    this.prefix = settings.prefix;
    if (settings.url === undefined) return;
    this.shared = new Redis(settings.url, {
      ...this.common('commands'),
      keyPrefix: `${settings.prefix}:`,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      // no ioredis commandTimeout: every call is bounded by `within` (run, ping), which tells a slow Redis from a
      // busy process; ioredis' own timer would fail a command whose answer sits unread behind a stalled event loop
    });
    let lastError = 'connection closed';
    this.shared.on('ready', () => {
      lastError = 'connection closed';
      this.markUp();
    });
    this.shared.on('close', () => this.markDown(lastError));
    // every failed reconnect is an 'error' (then a 'close'): the outage is logged once, by markDown
    this.shared.on('error', (error: Error) => void (lastError = error.message));
  }

  async onModuleInit(): Promise<void> {
    if (!this.shared || this.state !== 'starting') return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.listeners.delete(done);
        resolve();
      };
      const timer = setTimeout(done, START_WAIT_MS);
      this.listeners.add(done);
    });
    if (this.state === 'starting') this.markDown(`no answer within ${START_WAIT_MS} ms of start`);
  }

  async onApplicationShutdown(): Promise<void> {
    this.closed = true;
    await this.probe?.stop();
    await this.shared?.quit().catch(() => undefined);
  }

  /** Whether Redis answers, as far as this process knows. */
  get available(): boolean {
    return this.state === 'up';
  }

  /** Told each time Redis goes away or comes back; returns the function that stops it. */
  onChange(listener: (available: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The shared command connection (keys prefixed) for a library that takes a
   * client, such as a rate limiter; its calls go through `run` all the same.
   */
  commands(): Redis {
    if (!this.shared) throw new Error('Redis commands need REDIS_URL');
    return this.shared;
  }

  /** A pub/sub channel of this installation (PUBLISH and SUBSCRIBE never see the key prefix). */
  channel(name: string): string {
    return `${this.prefix}:${name}`;
  }

  /**
   * Runs `op` on the shared command connection (keys prefixed), or on a
   * dedicated connection of the caller's, within COMMAND_TIMEOUT_MS. Throws
   * RedisUnavailableError at once while Redis is away, and when `op` fails
   * for want of Redis (a time-out, a lost connection); Redis' own answers
   * (errors it replied, a rate limiter's refusal) pass through.
   */
  async run<T>(what: string, op: (commands: Redis) => Promise<T>): Promise<T> {
    const shared = this.shared;
    if (!shared) throw new Error(`${what} needs REDIS_URL`);
    if (this.state !== 'up') throw new RedisUnavailableError(what);
    try {
      return await within(op(shared), COMMAND_TIMEOUT_MS);
    } catch (error) {
      if (!(error instanceof Error) || error instanceof ReplyError) throw error;
      this.markDown(error.message);
      throw new RedisUnavailableError(what, error);
    }
  }

  /**
   * For /readyz: whether the shared connection (or `connection`) answers,
   * known within PING_TIMEOUT_MS. True where Redis is not configured.
   */
  async ping(connection = this.shared): Promise<boolean> {
    if (!connection) return true;
    // only the shared connection speaks for Redis: another may merely be reconnecting
    const decides = connection === this.shared;
    try {
      await within(connection.ping(), PING_TIMEOUT_MS);
      if (decides) this.markUp();
      return true;
    } catch (error) {
      if (decides) this.markDown(error instanceof Error ? error.message : String(error));
      return false;
    }
  }

  /** A connection of its own (see ConnectionKind); its user quits it. */
  connection(kind: ConnectionKind): Redis {
    if (this.settings.url === undefined) throw new Error(`a Redis ${kind} connection needs REDIS_URL`);
    const bounded = kind === 'queue';
    const connection = new Redis(this.settings.url, {
      ...this.common(kind),
      enableOfflineQueue: !bounded,
      maxRetriesPerRequest: bounded ? 1 : null,
      ...(bounded ? { commandTimeout: COMMAND_TIMEOUT_MS } : {}),
    });
    connection.on('error', () => undefined);
    return connection;
  }

  private common(name: string): RedisOptions {
    return {
      connectionName: `${this.prefix}:${name}`,
      connectTimeout: CONNECT_TIMEOUT_MS,
      retryStrategy: (times: number) => Math.min(times * 100, RECONNECT_MAX_MS),
      lazyConnect: false,
    };
  }

  private markUp(): void {
    if (this.closed || this.state === 'up') return;
    const was = this.state;
    this.state = 'up';
    // from inside the probe's own run: it ends once that run returns
    void this.probe?.stop();
    this.probe = undefined;
    if (was === 'down')
      this.logger.log(`Redis answers again after ${Math.round((performance.now() - this.downSince) / 1000)} s`);
    this.tell(true);
  }

  private markDown(reason: string): void {
    if (this.closed || this.state === 'down') return;
    this.state = 'down';
    this.downSince = performance.now();
    this.logger.warn(
      `Redis cannot be reached (${reason}): what needs it answers 503 REDIS_UNAVAILABLE until it is back; the rest works without it`,
    );
    this.probe = new PeriodicTask({
      name: 'Redis probe',
      everyMs: PROBE_EVERY_MS,
      run: () => this.probeOnce(),
      logger: this.logger,
    });
    this.probe.start();
    this.tell(false);
  }

  /** A stopped Redis keeps its connections open: only a command that is answered says it is back. */
  private async probeOnce(): Promise<void> {
    if (!this.shared) return;
    try {
      await this.shared.ping();
      this.markUp();
    } catch {
      // still away: markDown said so once
    }
  }

  private tell(available: boolean): void {
    for (const listener of [...this.listeners]) listener(available);
  }
}

/**
 * `promise`, or a rejection after `ms`: whatever is stuck behind it must not hold the caller.
 *
 * A timer that comes due while this process is busy (a long synchronous task, a GC pause, the embedded database's
 * work on the thread) fires before the event loop reads its sockets, and Redis' answer may be waiting there,
 * unread: counting that as Redis away ended every live event stream of the replica at random under load. So the
 * expiry looks once more after the loop's next read of its sockets (setImmediate runs after the I/O poll).
 */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => setImmediate(() => reject(new Error(`no answer within ${ms} ms`))), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
