import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { JwksCache, JwksKey, JwksUnavailableError, parseJwks, UnknownSigningKeyError } from './jwks-cache';

const jwk = (kid: string) => ({
  ...generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' }),
  kid,
  use: 'sig',
  alg: 'RS256',
});
const [KEY_A, KEY_B] = [jwk('a'), jwk('b')];
const URL_1 = 'https://idp.example.com/jwks';

/** A cache over a fake IdP whose key set the test changes, on a clock the test moves. */
function setUp(document: () => unknown) {
  let now = 1_000_000;
  const fetches: string[] = [];
  const cache = new JwksCache(
    async (url) => {
      fetches.push(url);
      return parseJwks(document());
    },
    { maxAgeMs: 600_000, refetchAfterMs: 30_000, maxUrls: 2 },
    () => now,
  );
  return { cache, fetches, advance: (ms: number) => (now += ms) };
}

describe('JwksCache', () => {
  it('fetches a key set once for a flood of unknown key ids, and again only after the refetch interval', async () => {
    const { cache, fetches, advance } = setUp(() => ({ keys: [KEY_A] }));
    expect((await cache.key(URL_1, 'a')).kid).toBe('a');
    const flood = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => cache.key(URL_1, `unknown-${i}`)));
    expect(flood.every((r) => r.status === 'rejected' && r.reason instanceof UnknownSigningKeyError)).toBe(true);
    expect(fetches).toHaveLength(1);

    advance(30_000);
    await expect(cache.key(URL_1, 'unknown')).rejects.toBeInstanceOf(UnknownSigningKeyError);
    expect(fetches).toHaveLength(2);
  });

  it('shares one fetch between concurrent asks, and finds a key the IdP added once the interval has passed', async () => {
    let keys = [KEY_A];
    const { cache, fetches, advance } = setUp(() => ({ keys }));
    const first = await Promise.all([cache.key(URL_1, 'a'), cache.key(URL_1, 'a'), cache.key(URL_1, undefined)]);
    expect(first.map((k: JwksKey) => k.kid)).toEqual(['a', 'a', 'a']);
    expect(fetches).toHaveLength(1);

    keys = [KEY_A, KEY_B];
    advance(31_000);
    expect((await cache.key(URL_1, 'b')).kid).toBe('b');
    expect(fetches).toHaveLength(2);
    // two keys: a token that names none matches none
    await expect(cache.key(URL_1, undefined)).rejects.toBeInstanceOf(UnknownSigningKeyError);
  });

  it('remembers a failed fetch for the refetch interval, and drops keys older than their maximum age', async () => {
    let up = true;
    const { cache, fetches, advance } = setUp(() => {
      if (!up) throw new JwksUnavailableError('down');
      return { keys: [KEY_A] };
    });
    await cache.key(URL_1, 'a');
    up = false;
    advance(600_000);
    await expect(cache.key(URL_1, 'a')).rejects.toThrow('down');
    await expect(cache.key(URL_1, 'a')).rejects.toBeInstanceOf(JwksUnavailableError);
    expect(fetches).toHaveLength(2);
    up = true;
    advance(30_000);
    expect((await cache.key(URL_1, 'a')).kid).toBe('a');
    expect(fetches).toHaveLength(3);
  });

  it('keeps at most maxUrls key sets', async () => {
    const { cache, fetches } = setUp(() => ({ keys: [KEY_A] }));
    for (const url of [
      'https://a.example/jwks',
      'https://b.example/jwks',
      'https://c.example/jwks',
      'https://a.example/jwks',
    ])
      await cache.key(url, 'a');
    expect(fetches).toEqual([
      'https://a.example/jwks',
      'https://b.example/jwks',
      'https://c.example/jwks',
      'https://a.example/jwks',
    ]);
  });
});

describe('parseJwks', () => {
  it('keeps signature keys that parse, and refuses a document with none', () => {
    const keys = parseJwks({
      keys: [
        KEY_A,
        { ...KEY_B, use: 'enc' },
        { kty: 'RSA', kid: 'broken', n: 'x' },
        { kty: 'oct', k: 'c2VjcmV0', kid: 'hmac' },
        null,
      ],
    });
    expect(keys.map((k) => k.kid)).toEqual(['a']);
    expect(keys[0]!.pem).toContain('BEGIN PUBLIC KEY');
    expect(() => parseJwks({ keys: [{ kty: 'oct', k: 'c2VjcmV0' }] })).toThrow(JwksUnavailableError);
    expect(() => parseJwks({ nope: [] })).toThrow(/not a JWKS/);
    expect(() => parseJwks('text')).toThrow(JwksUnavailableError);
  });
});
