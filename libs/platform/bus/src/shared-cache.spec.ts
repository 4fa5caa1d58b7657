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

  it('reloads after an invalidation that only added, and serves the old entry meanwhile if the source is away', async () => {
    const { clock, cache } = aCache();
    await cache.getOrLoad('all:token', async () => 'alice');
    // a new workspace: nothing alice had is taken away
    await cache.invalidate('all', { keepForOutage: true });
    expect(cache.get('all:token')).toBeUndefined();
    // right then the database goes away: alice keeps what she had
    expect(await cache.getOrLoad('all:token', away)).toBe('alice');
    clock.at += 59_000;
    expect(await cache.getOrLoad('all:token', away)).toBe('alice');
    // the source back: the change is read
    expect(await cache.getOrLoad('all:token', async () => 'alice, with the new workspace')).toBe(
      'alice, with the new workspace',
    );
    // and a revocation after it still ends the entry, outage or not
    await cache.invalidate('all');
    await expect(cache.getOrLoad('all:token', away)).rejects.toThrow('the database is away');
  });

  it('reaches the other replicas as it was sent: an invalidation that only added, or one that ends', async () => {
    const bus = new InProcessBus();
    const clock = new SetClock();
    const options = { staleIfError: (error: unknown) => error instanceof SourceAway };
    const [here, there] = [0, 1].map(() => new SharedCache<string>(bus, 'test', TTL, clock, options));
    const seen: [string, boolean][] = [];
    there!.onEvict((prefix, kept) => seen.push([prefix, kept]));
    await there!.getOrLoad('all:a', async () => 'a');
    await there!.getOrLoad('all:b', async () => 'b');
    await here!.invalidate('all:a', { keepForOutage: true });
    await here!.invalidate('all:b');
    await expect
      .poll(() => seen)
      .toEqual([
        ['all:a', true],
        ['all:b', false],
      ]);
    expect(await there!.getOrLoad('all:a', away)).toBe('a');
    await expect(there!.getOrLoad('all:b', away)).rejects.toThrow('the database is away');
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

describe('SharedCache past its bound', () => {
  it('drops the least recently used entry, and loads it afresh when it is asked for again', async () => {
    const { cache } = aCache({ maxEntries: 3 });
    const loads: string[] = [];
    const load = (key: string) => () => {
      loads.push(key);
      return Promise.resolve(`${key}'s principal`);
    };
    for (const key of ['ws-1', 'ws-2', 'ws-3']) await cache.getOrLoad(key, load(key));
    // ws-1, the oldest, is in use; ws-2 is not
    expect(await cache.getOrLoad('ws-1', load('ws-1'))).toBe("ws-1's principal");
    await cache.getOrLoad('ws-4', load('ws-4'));

    expect(cache.size).toBe(3);
    expect(cache.get('ws-2')).toBeUndefined();
    for (const key of ['ws-1', 'ws-3', 'ws-4']) expect(cache.get(key)).toBe(`${key}'s principal`);
    expect(await cache.getOrLoad('ws-2', load('ws-2'))).toBe("ws-2's principal");
    expect(loads).toEqual(['ws-1', 'ws-2', 'ws-3', 'ws-4', 'ws-2']);
    expect(cache.size).toBe(3);
  });

  it('holds at most its bound however many tenants pass through it', async () => {
    const { cache } = aCache({ maxEntries: 100 });
    for (let n = 0; n < 1_000; n++) await cache.getOrLoad(`org-${n}:ws`, () => Promise.resolve(`value ${n}`));
    expect(cache.size).toBe(100);
    expect(cache.get('org-999:ws')).toBe('value 999');
    expect(cache.get('org-899:ws')).toBeUndefined();
  });
});
