import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signatureHeaders, signPayload, verifySignedPayload } from './signed-payload';

const SECRET = 'whsec_current_0123456789';
const OLD_SECRET = 'whsec_previous_9876543210';
const BODY = JSON.stringify({ type: 'approval.approved', data: { id: 'apr_1', note: 'naïve ✓' } });
const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const NOW_SECONDS = NOW / 1000;

/** What a receiver would read off the delivery. */
function received(headers: Record<string, string>) {
  return { timestamp: headers['x-aileron-timestamp'], signature: headers['x-aileron-signature'] };
}

describe('signPayload', () => {
  it('is v1= and the hex HMAC-SHA256 of "<timestamp>.<body>", as a receiver in any language would compute it', () => {
    const expected = createHmac('sha256', SECRET).update(`${NOW_SECONDS}.${BODY}`).digest('hex');
    expect(signPayload(SECRET, BODY, NOW_SECONDS)).toBe(`v1=${expected}`);
  });

  it('binds the timestamp: the same body at another second signs differently', () => {
    expect(signPayload(SECRET, BODY, NOW_SECONDS)).not.toBe(signPayload(SECRET, BODY, NOW_SECONDS + 1));
  });

  it('refuses an empty secret and a timestamp that is not whole seconds', () => {
    expect(() => signPayload('', BODY, NOW_SECONDS)).toThrow('must not be empty');
    expect(() => signPayload(SECRET, BODY, NOW)).not.toThrow();
    expect(() => signPayload(SECRET, BODY, 1.5)).toThrow('whole number of seconds');
  });
});

describe('signatureHeaders', () => {
  it('sends the timestamp in seconds and the v1 signature', () => {
    expect(signatureHeaders(SECRET, BODY, NOW + 999)).toEqual({
      'x-aileron-timestamp': String(NOW_SECONDS),
      'x-aileron-signature': signPayload(SECRET, BODY, NOW_SECONDS),
    });
  });

  it('signs with every secret during a rotation', () => {
    const headers = signatureHeaders([SECRET, OLD_SECRET], BODY, NOW);
    expect(headers['x-aileron-signature']).toBe(
      `${signPayload(SECRET, BODY, NOW_SECONDS)},${signPayload(OLD_SECRET, BODY, NOW_SECONDS)}`,
    );
    expect(() => signatureHeaders([], BODY, NOW)).toThrow('at least one');
  });
});

describe('verifySignedPayload', () => {
  const headers = received(signatureHeaders(SECRET, BODY, NOW));

  it('accepts its own signature (round trip)', () => {
    expect(verifySignedPayload(SECRET, BODY, headers, { now: NOW })).toEqual({ ok: true });
  });

  it('refuses a tampered body', () => {
    expect(verifySignedPayload(SECRET, BODY.replace('apr_1', 'apr_2'), headers, { now: NOW })).toEqual({
      ok: false,
      reason: 'mismatch',
    });
    expect(verifySignedPayload(SECRET, `${BODY} `, headers, { now: NOW })).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('refuses a signature made with another secret', () => {
    expect(verifySignedPayload('whsec_someone_else', BODY, headers, { now: NOW })).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });

  it('refuses a timestamp moved to fit the window: the signature covers it', () => {
    const moved = { ...headers, timestamp: String(NOW_SECONDS + 60) };
    expect(verifySignedPayload(SECRET, BODY, moved, { now: NOW })).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('accepts up to the tolerance either side and calls anything beyond it stale', () => {
    const at = (offsetSeconds: number) => NOW + offsetSeconds * 1000;
    expect(verifySignedPayload(SECRET, BODY, headers, { now: at(300) })).toEqual({ ok: true });
    expect(verifySignedPayload(SECRET, BODY, headers, { now: at(-300) })).toEqual({ ok: true });
    // a replay, after the default 5 minutes
    expect(verifySignedPayload(SECRET, BODY, headers, { now: at(301) })).toEqual({ ok: false, reason: 'stale' });
    // a timestamp from the future
    expect(verifySignedPayload(SECRET, BODY, headers, { now: at(-301) })).toEqual({ ok: false, reason: 'stale' });
    expect(verifySignedPayload(SECRET, BODY, headers, { now: at(31), toleranceSeconds: 30 })).toEqual({
      ok: false,
      reason: 'stale',
    });
    expect(verifySignedPayload(SECRET, BODY, headers, { now: at(3000), toleranceSeconds: 3600 })).toEqual({ ok: true });
  });

  it('calls a timestamp that is not whole seconds stale', () => {
    for (const timestamp of ['soon', '1767268800.5', '-1767268800', '1e9', '99999999999999999999']) {
      expect(verifySignedPayload(SECRET, BODY, { ...headers, timestamp }, { now: NOW })).toEqual({
        ok: false,
        reason: 'stale',
      });
    }
  });

  it('accepts any one of several v1 values, so a secret can rotate', () => {
    const both = received(signatureHeaders([SECRET, OLD_SECRET], BODY, NOW));
    expect(verifySignedPayload(SECRET, BODY, both, { now: NOW })).toEqual({ ok: true });
    expect(verifySignedPayload(OLD_SECRET, BODY, both, { now: NOW })).toEqual({ ok: true });
    expect(verifySignedPayload('whsec_neither', BODY, both, { now: NOW })).toEqual({ ok: false, reason: 'mismatch' });

    const spaced = {
      ...both,
      signature: `${signPayload(OLD_SECRET, BODY, NOW_SECONDS)}  ${signPayload(SECRET, BODY, NOW_SECONDS)}`,
    };
    expect(verifySignedPayload(SECRET, BODY, spaced, { now: NOW })).toEqual({ ok: true });
    const mixed = { ...both, signature: `v0=abc, v1=zz, ${signPayload(SECRET, BODY, NOW_SECONDS)}` };
    expect(verifySignedPayload(SECRET, BODY, mixed, { now: NOW })).toEqual({ ok: true });
  });

  it('refuses values that are not a full v1 signature', () => {
    const hex = signPayload(SECRET, BODY, NOW_SECONDS).slice(3);
    for (const signature of [hex, `v2=${hex}`, `v1=${hex.slice(0, 32)}`, 'v1=', 'v1']) {
      expect(verifySignedPayload(SECRET, BODY, { ...headers, signature }, { now: NOW })).toEqual({
        ok: false,
        reason: 'mismatch',
      });
    }
  });

  it('says missing when either header is absent or blank', () => {
    expect(verifySignedPayload(SECRET, BODY, {}, { now: NOW })).toEqual({ ok: false, reason: 'missing' });
    expect(verifySignedPayload(SECRET, BODY, { signature: headers.signature }, { now: NOW })).toEqual({
      ok: false,
      reason: 'missing',
    });
    expect(verifySignedPayload(SECRET, BODY, { timestamp: headers.timestamp }, { now: NOW })).toEqual({
      ok: false,
      reason: 'missing',
    });
    expect(verifySignedPayload(SECRET, BODY, { timestamp: ' ', signature: headers.signature }, { now: NOW })).toEqual({
      ok: false,
      reason: 'missing',
    });
  });

  it('uses the system time when no time is given', () => {
    expect(verifySignedPayload(SECRET, BODY, received(signatureHeaders(SECRET, BODY, Date.now())))).toEqual({
      ok: true,
    });
    expect(verifySignedPayload(SECRET, BODY, headers)).toEqual({ ok: false, reason: 'stale' });
  });
});
