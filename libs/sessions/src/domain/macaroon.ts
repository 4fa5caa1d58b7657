import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The macaroon chain in libmacaroons' v2 binary format, on node:crypto.
 *
 * Why not the `macaroon` npm package: it computes HMAC-SHA256 in JavaScript
 * (sjcl), several times slower than node's native HMAC, and verification sits
 * on every request a sandboxed agent makes. The format is the same, so tokens
 * made here open with libmacaroons and the `macaroon` package (a test checks
 * both ways), and only first-party caveats exist here (no discharges).
 *
 *   version 0x02 · identifier · EOS · { caveat-id · EOS }* · EOS · signature
 *
 * Each field is `type varint · length varint · bytes`. The signature starts as
 * HMAC(derive(root key), identifier) and each caveat moves it on:
 * sig' = HMAC(sig, caveat). So anyone holding a macaroon can add a caveat (a
 * narrower token), and nobody can take one away without the root key.
 */
export interface Macaroon {
  identifier: Buffer;
  caveats: Buffer[];
  signature: Buffer;
}

const VERSION = 2;
const FIELD_EOS = 0;
const FIELD_LOCATION = 1;
const FIELD_IDENTIFIER = 2;
const FIELD_VID = 4;
const FIELD_SIGNATURE = 6;
const SIGNATURE_BYTES = 32;
/** Bounds what a decoder will look at: a token is a header, not a document. */
export const MAX_MACAROON_BYTES = 8 * 1024;

export class MacaroonFormatError extends Error {}

/** libmacaroons turns the root key into the first HMAC key with this fixed generator. */
const KEY_GENERATOR = Buffer.alloc(32);
KEY_GENERATOR.write('macaroons-key-generator', 'utf8');

export function deriveKey(rootKey: Buffer): Buffer {
  return createHmac('sha256', KEY_GENERATOR).update(rootKey).digest();
}

function chain(key: Buffer, data: Buffer): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

/** `derivedKey` is deriveKey(root key); callers cache it per key. */
export function mint(derivedKey: Buffer, identifier: Buffer, caveats: Buffer[]): Macaroon {
  let signature = chain(derivedKey, identifier);
  for (const caveat of caveats) signature = chain(signature, caveat);
  return { identifier, caveats: [...caveats], signature };
}

/** Adds first-party caveats without the key: the result can only do less. */
export function attenuate(macaroon: Macaroon, caveats: Buffer[]): Macaroon {
  let signature = macaroon.signature;
  for (const caveat of caveats) signature = chain(signature, caveat);
  return { ...macaroon, caveats: [...macaroon.caveats, ...caveats], signature };
}

/** Whether the chain from this key reaches the macaroon's signature (constant-time at the end). */
export function chainHolds(derivedKey: Buffer, macaroon: Macaroon): boolean {
  let signature = chain(derivedKey, macaroon.identifier);
  for (const caveat of macaroon.caveats) signature = chain(signature, caveat);
  return macaroon.signature.length === SIGNATURE_BYTES && timingSafeEqual(signature, macaroon.signature);
}

function varintLength(n: number): number {
  let length = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    length++;
  }
  return length;
}

function fieldLength(data: Buffer): number {
  return 1 + varintLength(data.length) + data.length;
}

export function encode(macaroon: Macaroon): Buffer {
  let size = 1 + fieldLength(macaroon.identifier) + 1;
  for (const caveat of macaroon.caveats) size += fieldLength(caveat) + 1;
  size += 1 + fieldLength(macaroon.signature);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  const byte = (b: number) => {
    out[at++] = b;
  };
  const field = (type: number, data: Buffer) => {
    byte(type);
    let n = data.length;
    while (n >= 0x80) {
      byte((n & 0x7f) | 0x80);
      n = Math.floor(n / 0x80);
    }
    byte(n);
    at += data.copy(out, at);
  };
  byte(VERSION);
  field(FIELD_IDENTIFIER, macaroon.identifier);
  byte(FIELD_EOS);
  for (const caveat of macaroon.caveats) {
    field(FIELD_IDENTIFIER, caveat);
    byte(FIELD_EOS);
  }
  byte(FIELD_EOS);
  field(FIELD_SIGNATURE, macaroon.signature);
  return out;
}

/** Strict: anything that is not exactly one well-formed v2 macaroon is refused. */
export function decode(bytes: Buffer): Macaroon {
  if (bytes.length > MAX_MACAROON_BYTES) throw new MacaroonFormatError('the token is too long');
  let at = 0;
  const fail = (why: string): never => {
    throw new MacaroonFormatError(why);
  };
  const readVarint = (): number => {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 4; i++) {
      if (at >= bytes.length) fail('the token ends inside a length');
      const b = bytes[at++]!;
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        // one encoding per length, so no two byte strings are the same token
        if (b === 0 && i > 0) fail('a length is not minimally encoded');
        return value;
      }
      scale *= 0x80;
    }
    return fail('a length is too long');
  };
  const readField = (): { type: number; data: Buffer } => {
    if (at >= bytes.length) fail('the token ends early');
    const type = bytes[at++]!;
    if (type === FIELD_EOS) return { type, data: Buffer.alloc(0) };
    const length = readVarint();
    if (at + length > bytes.length) fail('a field runs past the end of the token');
    const data = bytes.subarray(at, at + length);
    at += length;
    return { type, data };
  };

  if (bytes[at++] !== VERSION) fail('not a version 2 macaroon');
  // the location is outside the signature, so a token that carried one could be changed in transit: none is accepted
  let field = readField();
  if (field.type === FIELD_LOCATION) fail('a location is not accepted');
  if (field.type !== FIELD_IDENTIFIER || field.data.length === 0) fail('the identifier is missing');
  const identifier = field.data;
  if (readField().type !== FIELD_EOS) fail('unexpected field after the identifier');

  const caveats: Buffer[] = [];
  for (;;) {
    field = readField();
    if (field.type === FIELD_EOS) break;
    // a location or a verification id marks a third-party caveat, which nothing here can discharge
    if (field.type === FIELD_LOCATION || field.type === FIELD_VID) fail('third-party caveats are not accepted');
    if (field.type !== FIELD_IDENTIFIER || field.data.length === 0) fail('a caveat is not well formed');
    caveats.push(field.data);
    const end = readField();
    if (end.type === FIELD_VID || end.type === FIELD_LOCATION) fail('third-party caveats are not accepted');
    if (end.type !== FIELD_EOS) fail('a caveat is not well formed');
  }
  field = readField();
  if (field.type !== FIELD_SIGNATURE || field.data.length !== SIGNATURE_BYTES) fail('the signature is missing');
  if (at !== bytes.length) fail('bytes after the signature');
  return { identifier, caveats, signature: field.data };
}
