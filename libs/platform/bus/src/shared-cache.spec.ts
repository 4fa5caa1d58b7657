import { describe, expect, it } from 'vitest';
import { Clock } from '@aileron/clock';
import { InProcessBus } from './message-bus';
import { SharedCache } from './shared-cache';

class SetClock extends Clock {
  at = 1_000_000;
  override now(): number {
    return this.at;
  }
}

class SourceAway extends Error {}

const TTL = 30_000;

function aCache(options: ConstructorParameters<typeof SharedCache>[4] = {}) {
  const clock = new SetClock();
  const cache = new SharedCache<string>(new InProcessBus(), 'test', TTL, clock, {
    staleIfError: (error) => error instanceof SourceAway,
    maxStaleMs: 60_000,
    ...options,
  });
  return { clock, cache };
}

const away = () => Promise.reject(new SourceAway('the database is away'));

describe('SharedCache while its source is away', () => {
  it('serves an entry past its TTL when the reload fails for want of its source, within the stale bound', async () => {
    const { clock, cache } = aCache();
    expect(await cache.getOrLoad('all:token', async () => 'alice')).toBe('alice');
    clock.at += TTL + 1;
    expect(cache.get('all:token')).toBeUndefined();
    expect(await cache.getOrLoad('all:token', away)).toBe('alice');
    // the source back: the next load is taken, fresh
    expect(await cache.getOrLoad('all:token', async () => 'alice (reloaded)')).toBe('alice (reloaded)');
  });

  it('fails once the entry is older than the stale bound', async () => {
    const { clock, cache } = aCache();
    await cache.getOrLoad('all:token', async () => 'alice');
    clock.at += TTL + 60_000;
    await expect(cache.getOrLoad('all:token', away)).rejects.toThrow('the database is away');
  });

  it('never serves an invalidated entry, however the load fails', async () => {
    const { clock, cache } = aCache();
    await cache.getOrLoad('all:token', async () => 'alice');
    // the token revoked before the outage: its entry is gone on every replica
    await cache.invalidate('all');
    clock.at += TTL + 1;
    await expect(cache.getOrLoad('all:token', away)).rejects.toThrow('the database is away');
  });

  it('passes on an error that is an answer (not an outage) even when a stale entry is there', async () => {
    const { clock, cache } = aCache();
    await cache.getOrLoad('all:token', async () => 'alice');
    clock.at += TTL + 1;
    await expect(
      cache.getOrLoad('all:token', () => Promise.reject(new Error('the token was revoked'))),
    ).rejects.toThrow('the token was revoked');
  });

  it('without staleIfError an expired entry is simply gone', async () => {
    const { clock, cache } = aCache({ staleIfError: undefined });
    await cache.getOrLoad('all:token', async () => 'alice');
    clock.at += TTL + 1;
    await expect(cache.getOrLoad('all:token', away)).rejects.toThrow('the database is away');
  });
});
