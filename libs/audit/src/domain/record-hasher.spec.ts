import { describe, expect, it } from 'vitest';
import { chainRecords, GENESIS_HASH, recordHash, recordHasher, UnchainedRecord } from './chain';

/** mulberry32: reproducible runs */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRINGS = [
  '',
  'a',
  'Zürich',
  'line\nbreak',
  'quote"back\\slash',
  '\u2028\u2029',
  '😀',
  '\u0001\u001f',
  'é',
  'e\u0301',
  '\ud800',
  'a\udc00b',
  '<script>',
];
const KEYS = ['a', 'b', 'B', '_', 'é', '😀', '\u20ac', '10', '2', '', 'aa', 'a\u0000'.slice(0, 1), 'Ω', 'z'];

function value(rnd: () => number, depth: number): unknown {
  const roll = rnd();
  if (depth > 3 || roll < 0.35) {
    const kind = Math.floor(rnd() * 6);
    if (kind === 0) return null;
    if (kind === 1) return rnd() < 0.5;
    if (kind === 2) return STRINGS[Math.floor(rnd() * STRINGS.length)];
    if (kind === 3) return Math.floor(rnd() * 2e6) - 1e6;
    if (kind === 4)
      return [0, -0, 1e21, 1e-7, 0.1 + 0.2, 123.456, Number.MAX_SAFE_INTEGER, 5e-324, -1.5e300][Math.floor(rnd() * 9)];
    return (rnd() - 0.5) * 10 ** Math.floor(rnd() * 30 - 15);
  }
  if (roll < 0.6)
    return Array.from({ length: Math.floor(rnd() * 4) }, () => (rnd() < 0.05 ? undefined : value(rnd, depth + 1)));
  const object: Record<string, unknown> = {};
  for (let i = Math.floor(rnd() * 5); i > 0; i--)
    object[KEYS[Math.floor(rnd() * KEYS.length)]!] = rnd() < 0.05 ? undefined : value(rnd, depth + 1);
  return object;
}

function record(rnd: () => number, i: number): UnchainedRecord {
  const pick = <T>(list: T[]): T => list[Math.floor(rnd() * list.length)]!;
  const maybe = (s: string): string | null => (rnd() < 0.3 ? null : s);
  return {
    chainId: '3f1c2d9e-0b7a-4c55-9a1e-2d3c4b5a6f70',
    organizationId: '0c6f5e4d-3b2a-4190-8e7d-6c5b4a392817',
    workspaceId: rnd() < 0.2 ? null : '3f1c2d9e-0b7a-4c55-9a1e-2d3c4b5a6f70',
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    type: pick(['execution.succeeded', 'secret.read', 'policy.updated']),
    recordedAt: new Date(1_790_000_000_000 + Math.floor(rnd() * 1e9)),
    occurredAt: new Date(1_700_000_000_000 + Math.floor(rnd() * 1e11)),
    source: pick(['api', 'gateway', 'pool', 'system'] as const),
    actor: maybe(pick(STRINGS)),
    principal: maybe('user:alice'),
    executionMode: maybe(pick(['local', 'remote'])),
    server: maybe(pick(STRINGS)),
    tool: maybe('get_issue'),
    decision: maybe(pick(['allow', 'deny', 'approval'])),
    sessionId: maybe('s-1'),
    data: rnd() < 0.1 ? {} : { v: value(rnd, 0), w: value(rnd, 1), [KEYS[i % KEYS.length]!]: value(rnd, 2) },
  };
}

describe('recordHasher', () => {
  it('hashes exactly as the general canonical form does, on 20,000 random records', () => {
    const rnd = random(0x5eed);
    for (let i = 0; i < 20_000; i++) {
      const r = record(rnd, i);
      const seq = 1 + Math.floor(rnd() * 1e9);
      const prevHash = i % 7 === 0 ? GENESIS_HASH : `${i}`.padStart(64, 'f');
      expect(recordHasher(r)(seq, prevHash), `record ${i}`).toBe(recordHash({ ...r, seq, prevHash }));
    }
  });

  it('chains with prepared hashers exactly as without them', () => {
    const rnd = random(42);
    const records = Array.from({ length: 50 }, (_, i) => record(rnd, i));
    const head = { seq: 10, hash: 'a'.repeat(64) };
    expect(chainRecords(head, records, records.map(recordHasher))).toEqual(chainRecords(head, records));
    const chained = chainRecords(head, records);
    for (const r of chained) expect(recordHash(r)).toBe(r.hash);
  });
});
