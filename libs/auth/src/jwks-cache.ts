import { createPublicKey } from 'node:crypto';

/** One verification key of an identity provider's JWKS, as PEM. */
export interface JwksKey {
  kid: string | undefined;
  /** the `alg` the JWK pins, if any */
  alg: string | undefined;
  pem: string;
}

export class UnknownSigningKeyError extends Error {
  constructor() {
    super('no key of the JWKS matches the token');
    this.name = 'UnknownSigningKeyError';
  }
}

export class JwksUnavailableError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'JwksUnavailableError';
  }
}

export interface JwksCacheOptions {
  /** how long a fetched key set is used */
  maxAgeMs: number;
  /** the least time between two fetches of one URL, whatever the tokens ask for */
  refetchAfterMs: number;
  /** URLs remembered at most (one per identity provider in use) */
  maxUrls: number;
}

export const JWKS_CACHE_DEFAULTS: JwksCacheOptions = { maxAgeMs: 10 * 60_000, refetchAfterMs: 30_000, maxUrls: 1_000 };

interface Entry {
  keys: JwksKey[] | null;
  fetchedAt: number;
  attemptedAt: number;
  failure: string | null;
  pending: Promise<void> | null;
}

/**
 * The key sets of identity providers, by JWKS URL. Anyone can send a token
 * that names an organisation's issuer and a made-up key id, before anything
 * about them is verified: so an unknown key id refetches the set at most once
 * every `refetchAfterMs` per URL (and concurrent asks share one fetch), and a
 * failed fetch is remembered just as long.
 */
export class JwksCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    /** the set's signature keys (parseJwks); rejects when there are none */
    private readonly fetchKeys: (url: string) => Promise<JwksKey[]>,
    private readonly options: JwksCacheOptions,
    /** the Clock's now(): the refetch interval and the set's age run on it */
    private readonly now: () => number,
  ) {}

  /** The key a token with this `kid` verifies against; without a `kid`, the set's only key. */
  async key(url: string, kid: string | undefined): Promise<JwksKey> {
    let entry = this.entries.get(url);
    if (!entry) {
      entry = { keys: null, fetchedAt: 0, attemptedAt: -Infinity, failure: null, pending: null };
      this.remember(url, entry);
    }
    const current = this.usable(entry);
    const found = current && pick(current, kid);
    if (found) return found;
    if (entry.pending) await entry.pending;
    else if (this.now() - entry.attemptedAt >= this.options.refetchAfterMs) await this.refresh(url, entry);
    const keys = this.usable(entry);
    if (!keys) throw new JwksUnavailableError(entry.failure ?? 'the key set is out of date');
    const key = pick(keys, kid);
    if (!key) throw new UnknownSigningKeyError();
    return key;
  }

  forget(url: string): void {
    this.entries.delete(url);
  }

  private usable(entry: Entry): JwksKey[] | null {
    return entry.keys && this.now() - entry.fetchedAt < this.options.maxAgeMs ? entry.keys : null;
  }

  private refresh(url: string, entry: Entry): Promise<void> {
    entry.attemptedAt = this.now();
    entry.pending = this.fetchKeys(url)
      .then(
        (keys) => {
          entry.keys = keys;
          entry.fetchedAt = this.now();
          entry.failure = null;
        },
        (error: unknown) => {
          entry.failure = error instanceof Error ? error.message : 'the key set could not be read';
        },
      )
      .finally(() => {
        entry.pending = null;
      });
    return entry.pending;
  }

  private remember(url: string, entry: Entry): void {
    if (this.entries.size >= this.options.maxUrls) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(url, entry);
  }
}

function pick(keys: JwksKey[], kid: string | undefined): JwksKey | undefined {
  if (kid === undefined) return keys.length === 1 ? keys[0] : undefined;
  return keys.find((key) => key.kid === kid);
}

/** The signature keys of a JWKS document; keys for encryption, or that do not parse, are left out. */
export function parseJwks(document: unknown): JwksKey[] {
  const keys = (document as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new JwksUnavailableError('the answer is not a JWKS (no "keys" list)');
  const parsed: JwksKey[] = [];
  for (const jwk of keys as Record<string, unknown>[]) {
    if (
      jwk === null ||
      typeof jwk !== 'object' ||
      (jwk.use !== undefined && jwk.use !== 'sig') ||
      (jwk.kty !== 'RSA' && jwk.kty !== 'EC')
    )
      continue;
    try {
      const pem = createPublicKey({ key: jwk as never, format: 'jwk' })
        .export({ type: 'spki', format: 'pem' })
        .toString();
      parsed.push({
        kid: typeof jwk.kid === 'string' ? jwk.kid : undefined,
        alg: typeof jwk.alg === 'string' ? jwk.alg : undefined,
        pem,
      });
    } catch {
      continue;
    }
  }
  if (parsed.length === 0) throw new JwksUnavailableError('the JWKS holds no signature key');
  return parsed;
}
