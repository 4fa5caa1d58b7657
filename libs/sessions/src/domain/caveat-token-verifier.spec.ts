import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CAVEAT_TOKEN_PREFIX,
  CaveatTokenError,
  isWellFormedIdentity,
  mintCaveatToken,
  TOKEN_INVALID_DETAIL,
  TokenIdentity,
} from './caveat-token';
import { deriveKey, encode, mint } from './macaroon';
import { CaveatTokenVerifier } from './caveat-token-verifier';

const key = deriveKey(randomBytes(32));
const identity: TokenIdentity = {
  organizationId: '6f1c0d9e-7a53-4c8e-9a61-2b7f4c1d0e11',
  keyId: 'sk-0123456789ab',
  sessionId: '0b3e9f5a-1c2d-4e6f-8a9b-0c1d2e3f4a5b',
};
const now = 1_800_000_000;
const caveats = [
  { kind: 'workspace' as const, id: '1a2b3c4d-0000-4000-8000-000000000001' },
  { kind: 'expires' as const, at: now + 3600 },
];

/** A verifier whose key store records every identity it is asked about, and knows only `identity`'s key. */
function recordingVerifier(known: Buffer | null = key): { verifier: CaveatTokenVerifier; asked: TokenIdentity[] } {
  const asked: TokenIdentity[] = [];
  const verifier = new CaveatTokenVerifier(async (id) => {
    asked.push(id);
    return id.organizationId === identity.organizationId && id.keyId === identity.keyId ? known : null;
  });
  return { verifier, asked };
}

async function refusal(run: Promise<unknown>): Promise<{ code: string; message: string } | 'accepted'> {
  try {
    await run;
  } catch (error) {
    if (error instanceof CaveatTokenError) return { code: error.code, message: error.message };
    throw error;
  }
  return 'accepted';
}

const one = { code: 'TOKEN_INVALID', message: TOKEN_INVALID_DETAIL };

describe('CaveatTokenVerifier', () => {
  it('asks for no key when the identifier has the wrong shape, even under a chain that holds', async () => {
    const { verifier, asked } = recordingVerifier();
    const forged =
      CAVEAT_TOKEN_PREFIX +
      encode(
        mint(key, Buffer.from(`ail1 acme ${identity.keyId} ${identity.sessionId} n`), [
          Buffer.from(`session = ${identity.sessionId}`),
        ]),
      ).toString('base64url');
    expect(await refusal(verifier.verify(forged, now))).toEqual(one);
    expect(asked).toEqual([]);
  });

  it('refuses a key it does not have (never made, or removed) exactly as it refuses a broken chain', async () => {
    const token = mintCaveatToken(key, identity, caveats);
    const unknownKey = mintCaveatToken(key, { ...identity, keyId: 'sk-000000000000' }, caveats);
    const removed = recordingVerifier(null);
    const otherKey = recordingVerifier(deriveKey(randomBytes(32)));
    expect(await refusal(recordingVerifier().verifier.verify(unknownKey, now))).toEqual(one);
    expect(await refusal(removed.verifier.verify(token, now))).toEqual(one);
    expect(await refusal(otherKey.verifier.verify(token, now))).toEqual(one);
    expect(await recordingVerifier().verifier.verify(token, now)).toMatchObject(identity);
  });

  it('property: whatever identifier a caller makes up, only well-formed identities reach the key store, and every refusal is the one', async () => {
    const part = fc.oneof(
      fc.uuid(),
      fc.uuid().map((u) => u.toUpperCase()),
      fc.hexaString({ minLength: 10, maxLength: 14 }).map((hex) => `sk-${hex}`),
      fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,40}$/),
      fc.string({ maxLength: 40 }),
      fc.constantFrom(identity.organizationId, identity.keyId, identity.sessionId),
    );
    const identifier = fc.oneof(
      fc
        .tuple(fc.constantFrom('ail1', 'ail2', ''), part, part, part, fc.base64String({ maxLength: 24 }))
        .map((p) => p.join(' ')),
      fc.string({ maxLength: 200 }),
    );
    const { verifier, asked } = recordingVerifier();
    await fc.assert(
      fc.asyncProperty(identifier, async (text) => {
        fc.pre(text.length > 0);
        // chained under the real key: the identifier alone decides
        const token =
          CAVEAT_TOKEN_PREFIX +
          encode(mint(key, Buffer.from(text, 'utf8'), [Buffer.from(`session = ${identity.sessionId}`)])).toString(
            'base64url',
          );
        expect(await refusal(verifier.verify(token, now))).toEqual(one);
      }),
      { numRuns: 5_000 },
    );
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.filter((id) => !isWellFormedIdentity(id))).toEqual([]);
  });
});
