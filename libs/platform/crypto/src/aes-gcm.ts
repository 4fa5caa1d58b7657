import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** Decryption failed: wrong key, wrong context (AAD) or altered ciphertext. GCM cannot tell which. */
export class SealOpenError extends Error {
  constructor() {
    super('ciphertext does not open with this key and context');
    this.name = 'SealOpenError';
  }
}

/**
 * AES-256-GCM with a fresh 96-bit IV per message. `aad` binds the ciphertext
 * to where it belongs (tenant, path, version): moved anywhere else it does not
 * open. Output: base64url(iv | ciphertext | tag).
 */
export function seal(key: Buffer, plaintext: Buffer, aad: string): string {
  if (key.length !== KEY_BYTES) throw new RangeError('AES-256-GCM needs a 32-byte key');
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
}

export function open(key: Buffer, sealed: string, aad: string): Buffer {
  const raw = Buffer.from(sealed, 'base64url');
  if (key.length !== KEY_BYTES || raw.length < IV_BYTES + TAG_BYTES) throw new SealOpenError();
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new SealOpenError();
  }
}

export function newKey(): Buffer {
  return randomBytes(KEY_BYTES);
}
