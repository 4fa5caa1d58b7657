import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisUnavailableError } from './redis-unavailable.error';
import { RedisService } from './redis.service';

describe('RedisService', () => {
  const prefix = `spec-${randomBytes(4).toString('hex')}`;
  let redis: RedisService;
  let raw: Redis;

  beforeAll(async () => {
    redis = new RedisService({ url: inject('redisUrl'), prefix });
    await redis.onModuleInit();
    raw = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await redis.onApplicationShutdown();
    raw.disconnect();
  });

  it('puts every key written through it, and every channel it names, under the prefix', async () => {
    await redis.run('a spec', (commands) => commands.set('some:key', 'v', 'EX', 60));
    expect(await raw.get(`${prefix}:some:key`)).toBe('v');
    expect(await raw.exists('some:key')).toBe(0);
    expect(redis.channel('bus:x')).toBe(`${prefix}:bus:x`);
  });

  it("passes Redis' own error answers through: they are not an outage", async () => {
    await redis.run('a spec', (commands) => commands.set('not-a-number', 'x', 'EX', 60));
    const error = await redis.run('a spec', (commands) => commands.incr('not-a-number')).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(RedisUnavailableError);
    expect(String(error)).toMatch(/not an integer/);
    expect(redis.available).toBe(true);
  });

  it('takes an answer that came while the process was busy past the time-out: a stalled event loop is not an outage', async () => {
    const gone: boolean[] = [];
    const stop = redis.onChange((available) => gone.push(!available));
    try {
      const answer = redis.run('a spec', (commands) => commands.set('busy', 'v', 'EX', 60));
      // the thread held past the command time-out, as a long synchronous task or a GC pause holds it; Redis has
      // answered meanwhile, and its answer waits in the socket
      const until = performance.now() + 1_500;
      while (performance.now() < until);
      await expect(answer).resolves.toBe('OK');
      expect(redis.available).toBe(true);
      expect(gone).toEqual([]);
    } finally {
      stop();
    }
  });

  it('refuses at once, with a 503 a client may retry, while Redis is away', async () => {
    const away = new RedisService({ url: 'redis://127.0.0.1:1', prefix });
    await away.onModuleInit();
    try {
      expect(away.available).toBe(false);
      expect(await away.ping()).toBe(false);
      const refusal = await away.run('The feature', (commands) => commands.get('k')).catch((e: unknown) => e);
      expect(refusal).toBeInstanceOf(RedisUnavailableError);
      expect(refusal).toMatchObject({ status: 503, code: 'REDIS_UNAVAILABLE', extensions: { retry_after_seconds: 5 } });
      expect((refusal as Error).message).toMatch(/^The feature needs Redis/);
    } finally {
      await away.onApplicationShutdown();
    }
  });
});
