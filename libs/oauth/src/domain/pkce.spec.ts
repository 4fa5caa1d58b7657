import { describe, expect, it } from 'vitest';
import { codeChallengeOf, newPkcePair, supportsS256 } from './pkce';

describe('PKCE', () => {
  it('makes the S256 challenge of RFC 7636’s example', () => {
    expect(codeChallengeOf('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe(
      'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    );
    const pair = newPkcePair();
    expect(pair.challenge).toBe(codeChallengeOf(pair.verifier));
    expect(() => codeChallengeOf('short')).toThrow(RangeError);
  });

  it('goes on only with an authorization server that says it does S256', () => {
    expect(supportsS256({ code_challenge_methods_supported: ['S256'] })).toBe(true);
    expect(supportsS256({ code_challenge_methods_supported: ['plain'] })).toBe(false);
    expect(supportsS256({})).toBe(false);
  });
});
