import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError } from '@aileron/errors';
import { RedisService, RedisUnavailableError } from '@aileron/redis';

export class RateLimitedError extends DomainError {
  constructor(
    readonly retryAfterSeconds: number,
    what: string,
  ) {
    super('RATE_LIMITED', `${what} made too many MCP requests; retry in ${retryAfterSeconds} s`, {
      extensions: { retry_after_seconds: retryAfterSeconds },
    });
  }
}

type Budget = 'workspace' | 'principal';

/**
 * Requests per minute through /mcp, per workspace and per caller. Counted in
 * Redis in server mode, so every replica shares one budget; in memory in the
 * embedded mode, where there is one process. While Redis is away they fail
 * open (each replica counts alone) or closed (503), as
 * AILERON_RATE_LIMIT_WITHOUT_REDIS says.
 */
@Injectable()
export class PoolRateLimits implements OnApplicationShutdown {
  private readonly logger = new Logger('PoolRateLimits');
  private readonly shared: Record<Budget, RateLimiterAbstract> | undefined;
  private readonly local: Record<Budget, RateLimiterAbstract>;
  private readonly failClosed: boolean;
  /** set from the first request of an outage that met it until Redis is back: one log line per outage */
  private degraded = false;
  private readonly stopWatching: () => void;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly redis: RedisService,
  ) {
    const limits = config.rateLimits;
    this.failClosed = limits.withoutRedis === 'closed';
    this.local = {
      workspace: new RateLimiterMemory({ points: limits.workspacePerMinute, duration: 60 }),
      principal: new RateLimiterMemory({ points: limits.principalPerMinute, duration: 60 }),
    };
    if (redis.configured) {
      // keys rl:ws:<id> and rl:pr:<caller>, under the installation's prefix (the shared connection adds it)
      const storeClient = redis.commands();
      this.shared = {
        workspace: new RateLimiterRedis({
          storeClient,
          keyPrefix: 'rl:ws',
          points: limits.workspacePerMinute,
          duration: 60,
        }),
        principal: new RateLimiterRedis({
          storeClient,
          keyPrefix: 'rl:pr',
          points: limits.principalPerMinute,
          duration: 60,
        }),
      };
    }
    this.stopWatching = redis.onChange((available) => {
      if (!available || !this.degraded) return;
      this.degraded = false;
      this.logger.log('Redis is back: rate limits are shared by every replica again');
    });
  }

  onApplicationShutdown(): void {
    this.stopWatching();
  }

  /**
   * Counts one request against both budgets at once (one round trip to Redis
   * in server mode, not two in a row); throws RateLimitedError (429 with
   * Retry-After) when either is spent, naming the workspace's first. A
   * refused request still counts against both: it was made.
   */
  async take(workspaceId: string, principal: string, workspaceSlug: string): Promise<void> {
    const [workspace, caller] = await Promise.allSettled([
      this.consume('workspace', workspaceId),
      this.consume('principal', principal),
    ]);
    if (workspace.status === 'rejected') throw limited(workspace.reason, `Workspace "${workspaceSlug}"`);
    if (caller.status === 'rejected') throw limited(caller.reason, `This caller (${principal})`);
  }

  private consume(budget: Budget, key: string): Promise<RateLimiterRes> {
    const shared = this.shared?.[budget];
    // the embedded mode's budgets, on every MCP request: the memory limiter's own promise, not one more around it
    return shared ? this.consumeShared(budget, shared, key) : this.local[budget].consume(key);
  }

  private async consumeShared(budget: Budget, shared: RateLimiterAbstract, key: string): Promise<RateLimiterRes> {
    try {
      return await this.redis.run('The MCP rate limits', () => shared.consume(key));
    } catch (error) {
      if (!(error instanceof RedisUnavailableError)) throw error;
      if (!this.degraded) {
        this.degraded = true;
        this.logger.warn(
          this.failClosed
            ? 'Redis is away: MCP requests are refused (503 REDIS_UNAVAILABLE) until it is back (AILERON_RATE_LIMIT_WITHOUT_REDIS=closed)'
            : 'Redis is away: each replica counts MCP rate limits alone until it is back (AILERON_RATE_LIMIT_WITHOUT_REDIS=open)',
        );
      }
      if (this.failClosed) throw error;
      return this.local[budget].consume(key);
    }
  }
}

function limited(error: unknown, what: string): Error {
  if (error instanceof RateLimiterRes)
    return new RateLimitedError(Math.max(1, Math.ceil(error.msBeforeNext / 1000)), what);
  return error instanceof Error ? error : new Error(String(error));
}
