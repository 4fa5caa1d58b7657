import { describe, expect, it } from 'vitest';
import { newKey, SealOpenError } from '@aileron/crypto';
import {
  decryptSecret,
  encryptSecret,
  MAX_PATH_LENGTH,
  parseVaultRef,
  pathProblem,
  rewrapDataKey,
  SecretContext,
} from './envelope';

const ORG = '0b6f3c1e-1d4e-4c38-9d0a-6a0f3e1b2c01';
const OTHER_ORG = '7d2a9e40-5b1c-4f6e-8a3d-2c9b0e4f5a02';
const WS = 'c4e1a2b3-7f6d-4e5c-9b8a-1d2e3f4a5b03';
const OTHER_WS = 'e9f8d7c6-b5a4-4392-8170-6f5e4d3c2b04';
const CTX: SecretContext = { organizationId: ORG, workspaceId: WS, path: 'github/token', version: 1 };
const VALUE = 'ghp_0123456789abcdefghijklmnopqrstuvwxyz — naïve ✓';

describe('encryptSecret / decryptSecret', () => {
  it('round-trips a value, and the sealed form does not contain it', () => {
    const key = newKey();
    const sealed = encryptSecret(key, VALUE, CTX);
    expect(decryptSecret(key, sealed, CTX)).toBe(VALUE);
    expect(sealed.ciphertext).not.toContain('ghp_');
    expect(Buffer.from(sealed.ciphertext, 'base64url').toString('utf8')).not.toContain('ghp_');
  });

  it('seals the same value differently each time (a fresh data key and IV per version)', () => {
    const key = newKey();
    const a = encryptSecret(key, VALUE, CTX);
    const b = encryptSecret(key, VALUE, CTX);
    expect(a.ciphertext).not.toBe(b.ciphertext);
    expect(a.wrappedDataKey).not.toBe(b.wrappedDataKey);
  });

  it.each([
    ['another organisation', { organizationId: OTHER_ORG }],
    ['another workspace', { workspaceId: OTHER_WS }],
    ['another path', { path: 'github/other' }],
    ['another version', { version: 2 }],
  ])('a ciphertext moved to %s does not open, even with the right workspace key', (_label, moved) => {
    const key = newKey();
    const sealed = encryptSecret(key, VALUE, CTX);
    expect(() => decryptSecret(key, sealed, { ...CTX, ...moved })).toThrow(SealOpenError);
  });

  it('does not open with another workspace key', () => {
    const sealed = encryptSecret(newKey(), VALUE, CTX);
    expect(() => decryptSecret(newKey(), sealed, CTX)).toThrow(SealOpenError);
  });

  it('does not open when a byte of the ciphertext was changed', () => {
    const key = newKey();
    const sealed = encryptSecret(key, VALUE, CTX);
    const raw = Buffer.from(sealed.ciphertext, 'base64url');
    raw[20] ^= 1;
    expect(() => decryptSecret(key, { ...sealed, ciphertext: raw.toString('base64url') }, CTX)).toThrow(SealOpenError);
  });

  it("does not open a value with another version's data key (swapping wrapped keys between versions)", () => {
    const key = newKey();
    const v1 = encryptSecret(key, 'one', CTX);
    const v2 = encryptSecret(key, 'two', { ...CTX, version: 2 });
    expect(() => decryptSecret(key, { ciphertext: v1.ciphertext, wrappedDataKey: v2.wrappedDataKey }, CTX)).toThrow(
      SealOpenError,
    );
  });
});

describe('rewrapDataKey', () => {
  it('moves the data key to a new workspace key: the ciphertext is unchanged and opens with the new key only', () => {
    const oldKey = newKey();
    const newer = newKey();
    const sealed = encryptSecret(oldKey, VALUE, CTX);
    const wrappedDataKey = rewrapDataKey(oldKey, newer, sealed.wrappedDataKey, CTX);
    expect(wrappedDataKey).not.toBe(sealed.wrappedDataKey);

    const rotated = { ciphertext: sealed.ciphertext, wrappedDataKey };
    expect(decryptSecret(newer, rotated, CTX)).toBe(VALUE);
    expect(() => decryptSecret(oldKey, rotated, CTX)).toThrow(SealOpenError);
  });

  it('refuses a data key from another context, and one the given key did not wrap', () => {
    const key = newKey();
    const sealed = encryptSecret(key, VALUE, CTX);
    expect(() => rewrapDataKey(key, newKey(), sealed.wrappedDataKey, { ...CTX, workspaceId: OTHER_WS })).toThrow(
      SealOpenError,
    );
    expect(() => rewrapDataKey(newKey(), newKey(), sealed.wrappedDataKey, CTX)).toThrow(SealOpenError);
  });
});

describe('pathProblem', () => {
  it.each(['github/token', 'a', 'prod/db.password', 'team-a/svc_1/API-KEY', 'x'.repeat(MAX_PATH_LENGTH)])(
    'accepts %s',
    (path) => {
      expect(pathProblem(path)).toBeNull();
    },
  );

  it.each([
    ['a parent segment', '../x'],
    ['a parent segment inside', 'a/../b'],
    ['a dot segment', 'a/./b'],
    ['an empty segment', 'a//b'],
    ['a trailing slash', 'a/'],
    ['a leading slash', '/github/token'],
    ['nothing', ''],
    ['one character too many', 'x'.repeat(MAX_PATH_LENGTH + 1)],
    ['a space', 'github/my token'],
    ['a backslash', 'a\\b'],
    ['a URL-encoded slash', 'a%2Fb'],
    ['a NUL byte', 'a\u0000b'],
    ['a newline', 'a\nb'],
  ])('rejects %s (%j)', (_label, path) => {
    expect(pathProblem(path)).toEqual(expect.any(String));
  });

  it('names the length limit when the path is too long', () => {
    expect(pathProblem('x'.repeat(MAX_PATH_LENGTH + 1))).toContain(String(MAX_PATH_LENGTH));
  });
});

describe('parseVaultRef', () => {
  it('reads the path, with the newest version unless #version pins one', () => {
    expect(parseVaultRef('vault://github/token')).toEqual({ path: 'github/token', version: null });
    expect(parseVaultRef('vault://github/token#3')).toEqual({ path: 'github/token', version: 3 });
  });

  it.each([
    'github/token',
    'vault://',
    'vault:///github/token',
    'vault://../etc/passwd',
    'vault://a//b',
    'vault://github/token#',
    'vault://github/token#latest',
    'vault://github/token#-1',
    'vault://github/token#1#2',
    'vault://github/token#1234567890',
    'VAULT://github/token',
  ])('refuses %j', (ref) => {
    expect(parseVaultRef(ref)).toBeNull();
  });
});
