import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API tokens: `ail_api_` + 32 random bytes (base64url). 256 bits of entropy
 * make a salted slow hash pointless; sha256 lets us look a token up by hash.
 */
export const API_TOKEN_PREFIX = 'ail_api_';
const TOKEN_PATTERN = /^ail_api_[A-Za-z0-9_-]{43}$/;

export interface MintedToken {
  token: string;
  hash: string;
  /** shown in lists so people can tell tokens apart; reveals 4 of 43 random chars */
  displayPrefix: string;
}

export function mintApiToken(): MintedToken {
  const token = API_TOKEN_PREFIX + randomBytes(32).toString('base64url');
  return { token, hash: hashToken(token), displayPrefix: token.slice(0, API_TOKEN_PREFIX.length + 4) };
}

/** One-shot hash: several times cheaper than createHash, and it runs on every request. */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

export function looksLikeApiToken(token: string): boolean {
  return TOKEN_PATTERN.test(token);
}

export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}
