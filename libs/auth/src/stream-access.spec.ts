import { describe, expect, it } from 'vitest';
import { Clock } from '@aileron/clock';
import type { BearerCredentials } from './bearer-credentials';
import type { Principal } from './domain/principal';
import type { PrincipalCache } from './principal-cache.service';
import type { PrincipalResolver } from './principal.resolver';
import { StreamAccess } from './stream-access.service';

const TOKEN = 'ail_test_token';
const unreachable = Object.assign(new Error("Can't reach database server at 127.0.0.1:5432"), { code: 'P1001' });

/** A StreamAccess whose API token resolves as `resolve` says, and whose cache changes when the test says. */
function aStreamAccess(resolve: () => Promise<Principal>) {
  let changed: (() => void) | undefined;
  const bearer = { resolve: () => resolve() } as unknown as BearerCredentials;
  const cache = {
    onChange: (listener: () => void) => ((changed = listener), () => undefined),
  } as unknown as PrincipalCache;
  const streams = new StreamAccess(bearer, {} as PrincipalResolver, cache, new Clock());
  return { streams, change: () => changed!() };
}

/** Resolves once `probe` holds, polling on the event loop (no clock involved). */
async function until(probe: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !probe(); i++) await new Promise((resolve) => setImmediate(resolve));
  expect(probe()).toBe(true);
}

describe('StreamAccess', () => {
  it('a recheck that meets a database outage ends no stream; the next one, with the database back, judges it', async () => {
    let answer: () => Promise<Principal> = () => Promise.reject(unreachable);
    let asked = 0;
    const { streams, change } = aStreamAccess(() => {
      asked++;
      return answer();
    });
    const ended: string[] = [];
    streams.hold(
      TOKEN,
      async () => undefined,
      (reason) => ended.push(reason),
    );
    change();
    await until(() => asked === 1);
    // a second recheck asks again only about a stream still held
    change();
    await until(() => asked === 2 || ended.length > 0);
    expect(ended).toEqual([]);

    // the database is back, and the token was revoked meanwhile
    answer = () => Promise.reject(new Error('the token was revoked'));
    change();
    await until(() => ended.length === 1);
    expect(ended).toEqual(['the token was revoked']);
    await streams.onModuleDestroy();
  });
});
