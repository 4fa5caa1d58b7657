import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { createHash } from 'node:crypto';
import { KEY_BYTES, newKey, open, seal, SealOpenError } from '@aileron/crypto';

/**
 * What wraps every other key the control plane keeps at rest (workspace vault
 * keys, signing keys, sink secrets). A cloud KMS fits behind the same three
 * calls; the local provider below holds the keys in memory.
 */
export interface KeyProvider {
  /** id of the key new seals use */
  readonly currentKeyId: string;
  /** `<key id>.<sealed>`: the id says which key opens it, so old seals open after a rotation */
  wrap(plaintext: Buffer, aad: string): string;
  unwrap(wrapped: string, aad: string): Buffer;
  /** the key id a wrapped value was sealed with */
  keyIdOf(wrapped: string): string;
}

export class RootKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RootKeyError';
  }
}

/** The stable id of a root key: a digest prefix, never the key itself. */
export function rootKeyId(key: Buffer): string {
  return `rk-${createHash('sha256').update('aileron-root-key-id\0').update(key).digest('hex').slice(0, 16)}`;
}

/** An in-memory keyring: the first key seals, every key opens what it sealed. */
export class LocalKeyProvider implements KeyProvider {
  private readonly keys: Map<string, Buffer>;
  readonly currentKeyId: string;

  constructor(keys: Buffer[]) {
    if (keys.length === 0) throw new RootKeyError('no root key');
    for (const key of keys)
      if (key.length !== KEY_BYTES)
        throw new RootKeyError(`a root key must be ${KEY_BYTES} bytes (base64), got ${key.length}`);
    this.keys = new Map(keys.map((k) => [rootKeyId(k), k]));
    this.currentKeyId = rootKeyId(keys[0]!);
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  wrap(plaintext: Buffer, aad: string): string {
    return `${this.currentKeyId}.${seal(this.keys.get(this.currentKeyId)!, plaintext, aad)}`;
  }

  unwrap(wrapped: string, aad: string): Buffer {
    const key = this.keys.get(this.keyIdOf(wrapped));
    if (!key)
      throw new RootKeyError(
        `root key ${this.keyIdOf(wrapped)} is not configured; add it to AILERON_ROOT_KEY as a previous key`,
      );
    return open(key, wrapped.slice(wrapped.indexOf('.') + 1), aad);
  }

  keyIdOf(wrapped: string): string {
    const dot = wrapped.indexOf('.');
    if (dot <= 0) throw new SealOpenError();
    return wrapped.slice(0, dot);
  }
}

/** `base64,base64,…`: the first key is current, the rest still open what they sealed. */
export function parseRootKeys(text: string, source: string): Buffer[] {
  const parts = text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new RootKeyError(`${source} holds no key`);
  return parts.map((part, i) => {
    const key = Buffer.from(part, /^[A-Za-z0-9_-]+$/.test(part) && !/[+/=]/.test(part) ? 'base64url' : 'base64');
    if (key.length !== KEY_BYTES)
      throw new RootKeyError(
        `${source}: key ${i + 1} is ${key.length} bytes; a root key is ${KEY_BYTES} random bytes in base64 (openssl rand -base64 32)`,
      );
    return key;
  });
}

/**
 * Reads the keyring file, or makes one (mode 0600) with a fresh key: the
 * embedded mode needs no set-up, and the key never leaves the data folder.
 */
export function loadOrCreateKeyFile(path: string): { keys: Buffer[]; created: boolean } {
  if (existsSync(path)) return { keys: parseRootKeys(readFileSync(path, 'utf8'), path), created: false };
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${newKey().toString('base64')}\n`, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
  return { keys: parseRootKeys(readFileSync(path, 'utf8'), path), created: true };
}

/** Puts a new current key in front of the file's keys (rotation); the old ones stay to open old seals. */
export function prependKeyToFile(path: string): string {
  const keys = existsSync(path) ? parseRootKeys(readFileSync(path, 'utf8'), path) : [];
  const fresh = newKey();
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, [fresh, ...keys].map((k) => k.toString('base64')).join('\n') + '\n', { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
  return rootKeyId(fresh);
}
