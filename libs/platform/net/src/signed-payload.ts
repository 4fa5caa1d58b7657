import { createHmac, timingSafeEqual } from 'node:crypto';
import { Clock } from '@aileron/clock';

/**
 * HMAC-SHA256 signatures for what we deliver (webhooks, SIEM events), in the
 * Stripe / Standard Webhooks style: the timestamp is signed with the body, so
 * a captured delivery cannot be replayed outside the tolerance window.
 *
 *   x-aileron-timestamp: 1767225600
 *   x-aileron-signature: v1=<hex HMAC-SHA256 of "1767225600.<body>">
 *
 * During a secret rotation the signature header carries one v1= value per
 * secret, separated by commas or spaces; a receiver accepts any that matches.
 */

export const TIMESTAMP_HEADER = 'x-aileron-timestamp';
export const SIGNATURE_HEADER = 'x-aileron-signature';
export const DEFAULT_TOLERANCE_SECONDS = 300;

const VERSION = 'v1=';
const HEX_SHA256 = /^[0-9a-f]{64}$/i;
const TIMESTAMP = /^\d{1,15}$/;
/** a receiver is another program, with no Clock of ours to be handed: it checks against the system time */
const RECEIVER_CLOCK = new Clock();

export type SignatureVerdict = { ok: true } | { ok: false; reason: 'missing' | 'stale' | 'mismatch' };

export function signPayload(secret: string, body: string, timestampSeconds: number): string {
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0)
    throw new Error('timestampSeconds must be a whole number of seconds');
  return VERSION + hmacHex(secret, `${timestampSeconds}.${body}`);
}

/**
 * The headers for one delivery, stamped `now` (the sender's Clock). Pass
 * several secrets during a rotation: the receiver, holding either the old or
 * the new one, accepts the delivery.
 */
export function signatureHeaders(
  secret: string | readonly string[],
  body: string,
  now: number,
): Record<string, string> {
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (secrets.length === 0) throw new Error('at least one signing secret is required');
  const timestamp = Math.floor(now / 1000);
  return {
    [TIMESTAMP_HEADER]: String(timestamp),
    [SIGNATURE_HEADER]: secrets.map((s) => signPayload(s, body, timestamp)).join(','),
  };
}

/**
 * Checks a delivery against the secret, at `options.now` (else the system
 * time). A timestamp that is not a whole number of seconds counts as stale:
 * it cannot be placed inside the window.
 */
export function verifySignedPayload(
  secret: string,
  body: string,
  headers: { timestamp?: string; signature?: string },
  options: { toleranceSeconds?: number; now?: number } = {},
): SignatureVerdict {
  const timestamp = headers.timestamp?.trim();
  const signature = headers.signature?.trim();
  if (!timestamp || !signature) return { ok: false, reason: 'missing' };

  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((options.now ?? RECEIVER_CLOCK.now()) / 1000);
  if (!TIMESTAMP.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > tolerance)
    return { ok: false, reason: 'stale' };

  const expected = Buffer.from(hmacHex(secret, `${timestamp}.${body}`), 'hex');
  let matched = false;
  // no early exit: every candidate costs the same comparison
  for (const candidate of signature.split(/[\s,]+/)) {
    if (!candidate.startsWith(VERSION)) continue;
    const hex = candidate.slice(VERSION.length);
    if (!HEX_SHA256.test(hex)) continue;
    if (timingSafeEqual(Buffer.from(hex, 'hex'), expected)) matched = true;
  }
  return matched ? { ok: true } : { ok: false, reason: 'mismatch' };
}

function hmacHex(secret: string, message: string): string {
  // an empty key would make every signature forgeable by anyone
  if (!secret) throw new Error('the signing secret must not be empty');
  return createHmac('sha256', secret).update(message, 'utf8').digest('hex');
}
