import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * RFC 8785 (JSON Canonicalization Scheme): one byte sequence per JSON value,
 * whatever the key order, so digests and signatures survive re-serialisation
 * by other languages (gateways verify our bundles in Go and Rust too).
 */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value cannot be represented as JSON');
  return text;
}

/** One-shot hashing: several times cheaper than createHash for the short inputs hashed per request and per audit record. */
export function sha256Hex(data: string | Buffer): string {
  return hash('sha256', data, 'hex');
}

export function digestOf(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
