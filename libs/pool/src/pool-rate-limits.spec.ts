import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '@aileron/config';
import { RedisService, RedisUnavailableError } from '@aileron/redis';
import { PoolRateLimits, RateLimitedError } from './pool-rate-limits.service';

/** Nothing listens on port 1: a Redis that is away from the start, refusing at once. */
const AWAY = 'redis://127.0.0.1:1';

describe('MCP rate limits while Redis is away', () => {
  let redis: RedisService | undefined;
  afterEach(async () => redis?.onApplicationShutdown());

  async function limits(withoutRedis: 'open' | 'closed'): Promise<PoolRateLimits> {
    redis = new RedisService({ url: AWAY, prefix: 'spec' });
    await redis.onModuleInit();
    expect(redis.available).toBe(false);
    const config = loadConfig({
      AILERON_RATE_LIMIT_WITHOUT_REDIS: withoutRedis,
      AILERON_RATE_LIMIT_WORKSPACE_PER_MINUTE: '2',
    });
    return new PoolRateLimits(config, redis);
  }

  it('fail open by default: each replica counts alone, and still refuses past the limit', async () => {
    expect(loadConfig({}).rateLimits.withoutRedis).toBe('open');
    const rateLimits = await limits('open');
    await rateLimits.take('ws-1', 'token:a', 'one');
    await rateLimits.take('ws-1', 'token:b', 'one');
    await expect(rateLimits.take('ws-1', 'token:c', 'one')).rejects.toBeInstanceOf(RateLimitedError);
  });

  it('fail closed: 503 REDIS_UNAVAILABLE with a Retry-After', async () => {
    const rateLimits = await limits('closed');
    const refusal = await rateLimits.take('ws-1', 'token:a', 'one').catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(RedisUnavailableError);
    expect(refusal).toMatchObject({
      code: 'REDIS_UNAVAILABLE',
      status: 503,
      extensions: { retry_after_seconds: expect.any(Number) },
    });
  });

  it('refuses a bad setting with a message naming it', () => {
    expect(() => loadConfig({ AILERON_RATE_LIMIT_WITHOUT_REDIS: 'maybe' })).toThrow(
      /AILERON_RATE_LIMIT_WITHOUT_REDIS must be open or closed/,
    );
  });
});
