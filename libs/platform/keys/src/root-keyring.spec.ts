import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newKey, SealOpenError } from '@aileron/crypto';
import {
  loadOrCreateKeyFile,
  LocalKeyProvider,
  parseRootKeys,
  prependKeyToFile,
  RootKeyError,
  rootKeyId,
} from './root-keyring';

const AAD = 'aileron/workspace-key/org/ws/1';
const PLAINTEXT = Buffer.from('a workspace key, 32 bytes long..');

describe('LocalKeyProvider', () => {
  it('wraps with the first key and names it in the wrapped value', () => {
    const [current, previous] = [newKey(), newKey()];
    const provider = new LocalKeyProvider([current, previous]);
    expect(provider.currentKeyId).toBe(rootKeyId(current));
    const wrapped = provider.wrap(PLAINTEXT, AAD);
    expect(provider.keyIdOf(wrapped)).toBe(rootKeyId(current));
    expect(wrapped.startsWith(`${rootKeyId(current)}.`)).toBe(true);
    // only the current key opens it: a keyring holding just the previous key cannot
    expect(() => new LocalKeyProvider([previous]).unwrap(wrapped, AAD)).toThrow(RootKeyError);
    expect(new LocalKeyProvider([current]).unwrap(wrapped, AAD)).toEqual(PLAINTEXT);
  });

  it('unwraps with any configured key: what the previous key sealed opens after a rotation', () => {
    const [old, fresh] = [newKey(), newKey()];
    const sealedBefore = new LocalKeyProvider([old]).wrap(PLAINTEXT, AAD);
    const rotated = new LocalKeyProvider([fresh, old]);
    expect(rotated.unwrap(sealedBefore, AAD)).toEqual(PLAINTEXT);
    expect(rotated.keyIds).toEqual([rootKeyId(fresh), rootKeyId(old)]);
  });

  it('refuses an unknown key id with a message naming AILERON_ROOT_KEY and the key id, never key material', () => {
    const dropped = newKey();
    const kept = newKey();
    const wrapped = new LocalKeyProvider([dropped]).wrap(PLAINTEXT, AAD);
    let error: unknown;
    try {
      new LocalKeyProvider([kept]).unwrap(wrapped, AAD);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RootKeyError);
    const message = (error as Error).message;
    expect(message).toContain('AILERON_ROOT_KEY');
    expect(message).toContain(rootKeyId(dropped));
    for (const key of [dropped, kept]) {
      for (const encoding of ['base64', 'base64url', 'hex'] as const)
        expect(message).not.toContain(key.toString(encoding));
    }
    expect(message).not.toContain(PLAINTEXT.toString('utf8'));
  });

  it('a key id is a digest prefix that does not reveal the key', () => {
    const key = newKey();
    expect(rootKeyId(key)).toMatch(/^rk-[0-9a-f]{16}$/);
    expect(key.toString('hex')).not.toContain(rootKeyId(key).slice(3));
    expect(rootKeyId(key)).toBe(rootKeyId(Buffer.from(key)));
    expect(rootKeyId(newKey())).not.toBe(rootKeyId(key));
  });

  it('binds the wrapped value to its AAD and to its bytes', () => {
    const provider = new LocalKeyProvider([newKey()]);
    const wrapped = provider.wrap(PLAINTEXT, AAD);
    expect(() => provider.unwrap(wrapped, 'aileron/workspace-key/org/other-ws/1')).toThrow(SealOpenError);
    const [id, body] = wrapped.split('.') as [string, string];
    const raw = Buffer.from(body, 'base64url');
    raw[raw.length - 1] ^= 1;
    const tampered = `${id}.${raw.toString('base64url')}`;
    expect(() => provider.unwrap(tampered, AAD)).toThrow(SealOpenError);
    expect(() => provider.keyIdOf('no-dot-here')).toThrow(SealOpenError);
  });

  it('refuses an empty keyring and a key of the wrong length', () => {
    expect(() => new LocalKeyProvider([])).toThrow(RootKeyError);
    expect(() => new LocalKeyProvider([Buffer.alloc(16)])).toThrow(/32 bytes/);
  });
});

describe('parseRootKeys', () => {
  it('reads comma- or line-separated keys in base64 or base64url, first one first', () => {
    const [a, b, c] = [newKey(), newKey(), newKey()];
    const parsed = parseRootKeys(
      ` ${a.toString('base64')},${b.toString('base64url')}\n${c.toString('base64')}\n`,
      'AILERON_ROOT_KEY',
    );
    expect(parsed).toEqual([a, b, c]);
  });

  it('names the source and which key has the wrong length, without echoing it', () => {
    const good = newKey().toString('base64');
    const short = Buffer.alloc(16, 9).toString('base64');
    expect(() => parseRootKeys(`${good},${short}`, 'AILERON_ROOT_KEY')).toThrow(RootKeyError);
    let message = '';
    try {
      parseRootKeys(`${good},${short}`, 'AILERON_ROOT_KEY');
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/^AILERON_ROOT_KEY: key 2 is 16 bytes/);
    expect(message).toContain('32');
    expect(message).not.toContain(short);
    expect(message).not.toContain(good);
    expect(() => parseRootKeys(Buffer.alloc(33).toString('base64'), 'AILERON_ROOT_KEY')).toThrow(/key 1 is 33 bytes/);
  });

  it('refuses a value with no key in it', () => {
    expect(() => parseRootKeys(' , \n', '/etc/aileron/root-keys')).toThrow('/etc/aileron/root-keys holds no key');
  });
});

describe('the key file', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-keys-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is created with mode 0600 and one fresh key on first start, and reused after', () => {
    const path = join(dir, 'nested', 'root-keys');
    const first = loadOrCreateKeyFile(path);
    expect(first.created).toBe(true);
    expect(first.keys).toHaveLength(1);
    expect(first.keys[0]).toHaveLength(32);
    expect(statSync(path).mode & 0o777).toBe(0o600);

    const again = loadOrCreateKeyFile(path);
    expect(again.created).toBe(false);
    expect(again.keys).toEqual(first.keys);
  });

  it('is not replaced when it exists: a bad file stops the start instead of losing every secret', () => {
    const path = join(dir, 'root-keys');
    writeFileSync(path, 'not-a-key\n', { mode: 0o600 });
    expect(() => loadOrCreateKeyFile(path)).toThrow(RootKeyError);
    expect(readFileSync(path, 'utf8')).toBe('not-a-key\n');
  });

  it('rotation puts a new current key in front; what the old key sealed still opens, new seals use the new key', () => {
    const path = join(dir, 'root-keys');
    const before = new LocalKeyProvider(loadOrCreateKeyFile(path).keys);
    const sealedBefore = before.wrap(PLAINTEXT, AAD);

    const freshId = prependKeyToFile(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const after = new LocalKeyProvider(loadOrCreateKeyFile(path).keys);
    expect(after.currentKeyId).toBe(freshId);
    expect(freshId).not.toBe(before.currentKeyId);
    expect(after.keyIds).toEqual([freshId, before.currentKeyId]);
    expect(after.unwrap(sealedBefore, AAD)).toEqual(PLAINTEXT);
    expect(after.keyIdOf(after.wrap(PLAINTEXT, AAD))).toBe(freshId);

    // a second rotation keeps both older keys
    const third = prependKeyToFile(path);
    expect(new LocalKeyProvider(loadOrCreateKeyFile(path).keys).keyIds).toEqual([third, freshId, before.currentKeyId]);
  });
});
