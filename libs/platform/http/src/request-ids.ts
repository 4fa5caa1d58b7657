import { randomUUID } from 'node:crypto';

const GIVEN = /^[A-Za-z0-9._:-]{1,128}$/;
/**
 * Shaped like a UUID (clients and logs may expect that shape), but a random
 * per-process prefix and a counter make ids unique without drawing random
 * bytes for every request.
 */
const PREFIX = randomUUID().slice(0, 24);
const SPACE = 2 ** 48;
let sequence = 0;

/** The caller's own request id when it is well formed (logs correlate across services), else a new one. */
export function requestIdFor(given: string | string[] | undefined): string {
  if (typeof given === 'string' && GIVEN.test(given)) return given;
  sequence = (sequence + 1) % SPACE;
  return PREFIX + sequence.toString(16).padStart(12, '0');
}
