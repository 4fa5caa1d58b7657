import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError } from '@aileron/errors';

export class RateLimitedError extends DomainError {
  constructor(retryAfterSeconds: number, what: string) {
    super('RATE_LIMITED', 429, 'Too many requests', `${what} made too many MCP requests; retry in ${retryAfterSeconds} s`, {
      extensions: { retry_after_seconds: retryAfterSeconds },
      retryAfterSeconds,
    });
  }
}

/**
 * Requests per minute through /mcp, per workspace and per caller. Counted in
 * Redis in server mode, so every replica shares one budget; in memory in the
 * embedded mode, where there is one process.
 */
@Injectable()
export class PoolRateLimits implements OnApplicationShutdown {
  private readonly redis: Redis | undefined;
  private readonly workspace: RateLimiterAbstract;
  private readonly principal: RateLimiterAbstract;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    const limits = config.rateLimits;
    if (config.redisUrl) {
      this.redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false });
      this.redis.on('error', () => undefined);
      // Redis away must not take the MCP endpoints down: fall back to this replica's own count
      this.workspace = new RateLimiterRedis({ storeClient: this.redis, keyPrefix: 'aileron:rl:ws', points: limits.workspacePerMinute, duration: 60, insuranceLimiter: new RateLimiterMemory({ points: limits.workspacePerMinute, duration: 60 }) });
      this.principal = new RateLimiterRedis({ storeClient: this.redis, keyPrefix: 'aileron:rl:pr', points: limits.principalPerMinute, duration: 60, insuranceLimiter: new RateLimiterMemory({ points: limits.principalPerMinute, duration: 60 }) });
    } else {
      this.workspace = new RateLimiterMemory({ points: limits.workspacePerMinute, duration: 60 });
      this.principal = new RateLimiterMemory({ points: limits.principalPerMinute, duration: 60 });
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.redis?.quit().catch(() => undefined);
  }

  /**
   * Counts one request against both budgets at once (one round trip to Redis
   * in server mode, not two in a row); throws RateLimitedError (429 with
   * Retry-After) when either is spent, naming the workspace's first. A
   * refused request still counts against both: it was made.
   */
  async take(workspaceId: string, principal: string, workspaceSlug: string): Promise<void> {
    const [workspace, caller] = await Promise.allSettled([this.workspace.consume(workspaceId), this.principal.consume(principal)]);
    if (workspace.status === 'rejected') throw limited(workspace.reason, `Workspace "${workspaceSlug}"`);
    if (caller.status === 'rejected') throw limited(caller.reason, `This caller (${principal})`);
  }
}

function limited(error: unknown, what: string): Error {
  if (error instanceof RateLimiterRes) return new RateLimitedError(Math.max(1, Math.ceil(error.msBeforeNext / 1000)), what);
  return error instanceof Error ? error : new Error(String(error));
}
