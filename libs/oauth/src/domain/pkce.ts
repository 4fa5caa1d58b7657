import { hash, randomBytes } from 'node:crypto';

/**
 * PKCE (RFC 7636) with S256, the one method the MCP authorization spec allows:
 * the authorization server here checks it through oidc-provider, and a client
 * of upstream servers makes its pairs with these.
 */
export const PKCE_METHOD = 'S256';
/** 43-128 characters of the unreserved set (RFC 7636 § 4.1) */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/** A new code verifier: 32 random bytes, 43 characters. */
export function newCodeVerifier(): string {
  return randomBytes(32).toString('base64url');
}

/** The S256 challenge of a verifier. */
export function codeChallengeOf(verifier: string): string {
  if (!VERIFIER.test(verifier)) throw new RangeError('not a PKCE code verifier');
  return hash('sha256', verifier, 'base64url');
}

/** A verifier and its challenge, for one authorization request. */
export function newPkcePair(): { verifier: string; challenge: string; method: typeof PKCE_METHOD } {
  const verifier = newCodeVerifier();
  return { verifier, challenge: codeChallengeOf(verifier), method: PKCE_METHOD };
}

/** Whether an authorization server's metadata says it does S256: without it a client must not go on (MCP authorization). */
export function supportsS256(metadata: { code_challenge_methods_supported?: unknown }): boolean {
  const methods = metadata.code_challenge_methods_supported;
  return Array.isArray(methods) && methods.includes(PKCE_METHOD);
}
