import { describe, expect, it } from 'vitest';
import { generateEd25519, privateKeyFromPem, publicKeyFromX, signEd25519, verifyEd25519 } from '@aileron/crypto';
import {
  ChainedRecord,
  ChainVerifier,
  checkpointSigningInput,
  CheckpointRecord,
  chainRecords,
  GENESIS_HASH,
  recordHash,
  UnchainedRecord,
  VerifyResult,
} from './chain';

const ORG = '3f0c2a1e-9b8d-4c7e-a6f5-0e1d2c3b4a01';
const CHAIN = '8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c02';
const OTHER_CHAIN = 'd1c2b3a4-f5e6-4d7c-8b9a-0f1e2d3c4b03';
const T0 = Date.UTC(2026, 10, 23, 9, 0, 0);

// one key the verifier publishes, one it has never heard of
const PUBLISHED = { kid: 'audit-1', ...generateEd25519() };
const STRANGER = generateEd25519();

function entry(i: number, chainId = CHAIN): UnchainedRecord {
  return {
    chainId,
    organizationId: ORG,
    workspaceId: chainId,
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    type: i % 2 ? 'secret.written' : 'execution.succeeded',
    recordedAt: new Date(T0 + i * 1000),
    occurredAt: new Date(T0 + i * 1000 - 250),
    source: i % 2 ? 'api' : 'gateway',
    actor: i % 2 ? 'user:alice' : 'gateway:laptop',
    principal: i % 2 ? null : 'user:bob',
    executionMode: i % 2 ? null : 'local',
    server: i % 2 ? null : 'github',
    tool: i % 2 ? null : 'get_issue',
    decision: i % 2 ? null : 'allow',
    sessionId: i % 2 ? null : 'sess-1',
    data: { path: `github/token-${i}`, version: i, nested: { b: 2, a: [1, 'x'] } },
  };
}

function aChain(n: number): ChainedRecord[] {
  return chainRecords(
    { seq: 0, hash: GENESIS_HASH },
    Array.from({ length: n }, (_, i) => entry(i + 1)),
  );
}

function headOf(records: ChainedRecord[]): { seq: number; hash: string } {
  const last = records[records.length - 1]!;
  return { seq: last.seq, hash: last.hash };
}

function signed(
  at: ChainedRecord | { seq: number; hash: string },
  kind: CheckpointRecord['kind'] = 'periodic',
  key = PUBLISHED.privateKeyPem,
): CheckpointRecord {
  const message = checkpointSigningInput({ chainId: CHAIN, seq: at.seq, hash: at.hash, kind });
  return {
    seq: at.seq,
    hash: at.hash,
    kind,
    keyId: PUBLISHED.kid,
    signature: signEd25519(privateKeyFromPem(key), message),
  };
}

/** What AuditService.verify does with what it reads from the database. */
function verify(
  records: ChainedRecord[],
  head: { seq: number; hash: string } | null,
  checkpoints: CheckpointRecord[] = [],
  later?: { newestSeq: number; headSeq: number },
): VerifyResult {
  const verifier = new ChainVerifier(
    CHAIN,
    checkpoints,
    (kid, message, signature) =>
      kid === PUBLISHED.kid && verifyEd25519(publicKeyFromX(PUBLISHED.publicKeyX), message, signature),
  );
  for (const record of records) if (!verifier.next(record)) break;
  return verifier.finish(head, later);
}

/** A forger who knows the algorithm: re-hashes every record from `from` on so each links to the one before. */
function relink(records: ChainedRecord[], from: number): ChainedRecord[] {
  const out = records.slice(0, from - 1);
  let prev = from === 1 ? GENESIS_HASH : out[out.length - 1]!.hash;
  for (const record of records.slice(from - 1)) {
    const { hash: _old, ...rest } = { ...record, prevHash: prev };
    const hash = recordHash(rest);
    out.push({ ...rest, hash });
    prev = hash;
  }
  return out;
}

describe('chainRecords', () => {
  it('numbers records from the head and links each to the hash of the one before, starting at GENESIS_HASH', () => {
    const records = aChain(4);
    expect(GENESIS_HASH).toBe('0'.repeat(64));
    expect(records.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    expect(records[0]!.prevHash).toBe(GENESIS_HASH);
    for (let i = 1; i < records.length; i++) expect(records[i]!.prevHash).toBe(records[i - 1]!.hash);
    for (const record of records) {
      const { hash, ...rest } = record;
      expect(hash).toMatch(/^[0-9a-f]{64}$/);
      expect(recordHash(rest)).toBe(hash);
    }
    expect(new Set(records.map((r) => r.hash)).size).toBe(4);
  });

  it('continues an existing chain from its head', () => {
    const first = aChain(3);
    const more = chainRecords(headOf(first), [entry(4), entry(5)]);
    expect(more.map((r) => r.seq)).toEqual([4, 5]);
    expect(more[0]!.prevHash).toBe(first[2]!.hash);
    // appending in two batches gives the same chain as appending at once
    expect([...first, ...more]).toEqual(aChain(5));
  });

  it('gives the same hash whatever order the data keys come back in (JSONB reorders them)', () => {
    const [record] = aChain(1);
    const { hash, ...rest } = record!;
    const reordered = { ...rest, data: { nested: { a: [1, 'x'], b: 2 }, version: 1, path: 'github/token-1' } };
    expect(recordHash(reordered)).toBe(hash);
  });

  it.each([
    ['type', { type: 'secret.deleted' }],
    ['actor', { actor: 'user:mallory' }],
    ['principal', { principal: 'user:mallory' }],
    ['occurred_at', { occurredAt: new Date(T0 - 1) }],
    ['recorded_at', { recordedAt: new Date(T0 - 1) }],
    ['decision', { decision: 'deny' }],
    ['workspace', { workspaceId: OTHER_CHAIN }],
    ['organization', { organizationId: OTHER_CHAIN }],
    ['data', { data: { path: 'github/token-2', version: 2, nested: { b: 2, a: [1, 'y'] } } }],
    ['seq', { seq: 3 }],
    ['prev_hash', { prevHash: 'f'.repeat(64) }],
  ])('covers %s with the hash', (_field, change) => {
    const { hash, ...rest } = aChain(2)[1]!;
    expect(recordHash({ ...rest, ...change })).not.toBe(hash);
  });
});

describe('ChainVerifier', () => {
  const N = 10;

  it('accepts an intact chain with valid checkpoints', () => {
    const records = aChain(N);
    expect(verify(records, headOf(records), [signed(records[4]!), signed(records[9]!)])).toEqual({
      ok: true,
      events: N,
      checkpoints: 2,
    });
  });

  it('accepts an empty chain', () => {
    expect(verify([], null)).toEqual({ ok: true, events: 0, checkpoints: 0 });
    expect(verify([], { seq: 0, hash: GENESIS_HASH })).toEqual({ ok: true, events: 0, checkpoints: 0 });
  });

  it.each([
    ['data', (r: ChainedRecord) => ({ ...r, data: { ...r.data, path: 'github/other' } })],
    ['actor', (r: ChainedRecord) => ({ ...r, actor: 'user:mallory' })],
    ['decision', (r: ChainedRecord) => ({ ...r, decision: 'deny' })],
    ['occurred_at', (r: ChainedRecord) => ({ ...r, occurredAt: new Date(r.occurredAt.getTime() + 1) })],
  ])('names an edited record (%s changed)', (_field, edit) => {
    const records = aChain(N);
    records[3] = edit(records[3]!);
    expect(verify(records, headOf(records)).first_bad).toEqual({
      seq: 4,
      id: records[3]!.id,
      reason: expect.stringMatching(/edited/),
    });
  });

  it('names the record after an edit that was re-hashed but not re-linked', () => {
    const records = aChain(N);
    const { hash: _h, ...rest } = { ...records[3]!, actor: 'user:mallory' };
    records[3] = { ...rest, hash: recordHash(rest) };
    expect(verify(records, headOf(records)).first_bad).toEqual({
      seq: 5,
      id: records[4]!.id,
      reason: expect.stringMatching(/prev_hash/),
    });
  });

  it('names a missing record (a gap)', () => {
    const records = aChain(N);
    const result = verify([...records.slice(0, 3), ...records.slice(4)], headOf(records));
    expect(result.ok).toBe(false);
    expect(result.first_bad).toMatchObject({ seq: 4, reason: expect.stringMatching(/record 4 is missing/) });
  });

  it('names the record after an inserted one, when the forger chained the insert properly', () => {
    const records = aChain(N);
    // a forged record at 4 that links to 3 and hashes correctly; the rest move up one
    const [forged] = chainRecords(headOf(records.slice(0, 3)), [
      { ...entry(99), type: 'secret.read', actor: 'user:alice' },
    ]);
    const tampered = [...records.slice(0, 3), forged!, ...records.slice(3).map((r) => ({ ...r, seq: r.seq + 1 }))];
    const result = verify(tampered, { seq: N + 1, hash: tampered[N]!.hash });
    expect(result.first_bad).toEqual({ seq: 5, id: records[3]!.id, reason: expect.stringMatching(/inserted/) });
  });

  it('names an inserted record that reuses a position', () => {
    const records = aChain(N);
    const [forged] = chainRecords(headOf(records.slice(0, 3)), [entry(99)]);
    const result = verify([...records.slice(0, 3), forged!, ...records.slice(3)], headOf(records));
    expect(result.first_bad).toMatchObject({ seq: 4, reason: expect.stringMatching(/appears twice/) });
  });

  it('names the first of two records whose contents were swapped', () => {
    const records = aChain(N);
    const swapped = records.map((r) => ({ ...r }));
    swapped[3] = { ...records[6]!, seq: 4 };
    swapped[6] = { ...records[3]!, seq: 7 };
    expect(verify(swapped, headOf(records)).first_bad).toEqual({
      seq: 4,
      id: records[6]!.id,
      reason: expect.stringMatching(/prev_hash/),
    });
  });

  it('names the first of two records read out of order', () => {
    const records = aChain(N);
    const reordered = [...records];
    [reordered[3], reordered[4]] = [reordered[4]!, reordered[3]!];
    expect(verify(reordered, headOf(records)).first_bad).toMatchObject({ seq: 4 });
  });

  it('names the first missing record of a truncated tail when the head says there were more', () => {
    const records = aChain(N);
    const result = verify(records.slice(0, 7), headOf(records));
    expect(result).toMatchObject({ ok: false, events: 7 });
    expect(result.first_bad).toEqual({
      seq: 8,
      id: null,
      reason: expect.stringMatching(/8\.\.10 are missing from the end/),
    });
  });

  it('names a record added past the head', () => {
    const records = aChain(N);
    const [extra] = chainRecords(headOf(records), [entry(11)]);
    expect(verify([...records, extra!], headOf(records)).first_bad).toEqual({
      seq: 11,
      id: null,
      reason: expect.stringMatching(/added outside the log/),
    });
  });

  it('notices a newest record that does not match the head', () => {
    const records = aChain(N);
    const relinked = relink(
      records.map((r) => (r.seq === N ? { ...r, actor: 'user:mallory' } : r)),
      N,
    );
    expect(verify(relinked, headOf(records)).first_bad).toMatchObject({
      seq: N,
      reason: expect.stringMatching(/chain head/),
    });
  });

  it.each([
    [
      'signed by a key nobody published',
      (c: CheckpointRecord) => ({
        ...c,
        signature: signed({ seq: c.seq, hash: c.hash }, 'periodic', STRANGER.privateKeyPem).signature,
      }),
    ],
    ['whose signature is not base64 of a signature', (c: CheckpointRecord) => ({ ...c, signature: 'not-a-signature' })],
    ['naming an unknown key id', (c: CheckpointRecord) => ({ ...c, keyId: 'audit-9' })],
    ['whose hash was changed after signing', (c: CheckpointRecord) => ({ ...c, hash: 'a'.repeat(64) })],
    ['moved to another position', (c: CheckpointRecord) => ({ ...c, seq: 6 })],
    ['whose kind was changed', (c: CheckpointRecord) => ({ ...c, kind: 'retention' as const })],
  ])('names a checkpoint %s', (_label, spoil) => {
    const records = aChain(N);
    const bad = spoil(signed(records[4]!));
    const result = verify(records, headOf(records), [bad]);
    expect(result.ok).toBe(false);
    expect(result.first_bad).toEqual({ seq: bad.seq, id: null, reason: expect.stringMatching(/bad signature/) });
  });

  it('does not take a checkpoint signed for another chain', () => {
    const records = aChain(N);
    const other = signEd25519(
      privateKeyFromPem(PUBLISHED.privateKeyPem),
      checkpointSigningInput({ chainId: OTHER_CHAIN, seq: 5, hash: records[4]!.hash, kind: 'periodic' }),
    );
    const result = verify(records, headOf(records), [{ ...signed(records[4]!), signature: other }]);
    expect(result.first_bad).toMatchObject({ seq: 5, reason: expect.stringMatching(/bad signature/) });
  });

  it('names a record that contradicts a signed checkpoint, even when the forger re-linked the whole chain and its head', () => {
    const records = aChain(N);
    const checkpoint = signed(records[5]!);
    // record 3 rewritten, and everything after re-hashed: only the signature knows
    const forged = relink(
      records.map((r) => (r.seq === 3 ? { ...r, data: { path: 'nothing/to/see' } } : r)),
      3,
    );
    expect(verify(forged, headOf(forged)).ok).toBe(true);
    const result = verify(forged, headOf(forged), [checkpoint]);
    expect(result.first_bad).toEqual({
      seq: 6,
      id: records[5]!.id,
      reason: expect.stringMatching(/contradicts the signed checkpoint at 6/),
    });
  });

  it('names a signed record missing from a tail that was cut together with the head', () => {
    const records = aChain(N);
    const result = verify(records.slice(0, 8), headOf(records.slice(0, 8)), [signed(records[9]!)]);
    expect(result.first_bad).toEqual({
      seq: 10,
      id: null,
      reason: expect.stringMatching(/covers record 10, which is missing/),
    });
  });

  describe('while the chain grows (read as far as the head at the start)', () => {
    it('takes records and checkpoints appended meanwhile, within the head read afterwards', () => {
      const records = aChain(N);
      const [more] = chainRecords(headOf(records), [entry(11), entry(12)]);
      const checkpoints = [signed(records[4]!), signed(more!)];
      expect(verify(records, headOf(records), checkpoints, { newestSeq: 12, headSeq: 12 })).toEqual({
        ok: true,
        events: N,
        checkpoints: 2,
      });
    });

    it('names a record past the head read afterwards', () => {
      const records = aChain(N);
      expect(verify(records, headOf(records), [], { newestSeq: 12, headSeq: 11 }).first_bad).toEqual({
        seq: 12,
        id: null,
        reason: expect.stringMatching(/added outside the log/),
      });
    });

    it('names a checkpoint past the head read afterwards (the tail cut together with the head)', () => {
      const records = aChain(N);
      const cut = records.slice(0, 8);
      const result = verify(cut, headOf(cut), [signed(records[9]!)], { newestSeq: 8, headSeq: 8 });
      expect(result.first_bad).toEqual({
        seq: 10,
        id: null,
        reason: expect.stringMatching(/covers record 10, which is missing/),
      });
    });
  });

  describe('after retention', () => {
    it('verifies a chain that starts after its retention anchor', () => {
      const records = aChain(N);
      const kept = records.slice(4);
      expect(verify(kept, headOf(records), [signed(records[3]!, 'retention'), signed(records[9]!)])).toEqual({
        ok: true,
        events: 6,
        checkpoints: 2,
      });
    });

    it('verifies when retention removed everything and nothing new came', () => {
      const records = aChain(N);
      expect(verify([], headOf(records), [signed(records[9]!, 'retention')])).toEqual({
        ok: true,
        events: 0,
        checkpoints: 1,
      });
    });

    it('resumes from the newest anchor of several', () => {
      const records = aChain(N);
      expect(
        verify(records.slice(7), headOf(records), [signed(records[2]!, 'retention'), signed(records[6]!, 'retention')])
          .ok,
      ).toBe(true);
    });

    it('names the first record missing after the anchor', () => {
      const records = aChain(N);
      const result = verify(records.slice(5), headOf(records), [signed(records[3]!, 'retention')]);
      expect(result.first_bad).toMatchObject({ seq: 5, reason: expect.stringMatching(/record 5 is missing/) });
    });

    it('does not let records vanish from the start without a signed anchor', () => {
      const records = aChain(N);
      expect(verify(records.slice(4), headOf(records)).first_bad).toMatchObject({
        seq: 1,
        reason: expect.stringMatching(/record 1 is missing/),
      });
      const forgedAnchor = { ...signed(records[3]!, 'retention', STRANGER.privateKeyPem) };
      expect(verify(records.slice(4), headOf(records), [forgedAnchor]).first_bad).toMatchObject({
        seq: 4,
        reason: expect.stringMatching(/bad signature/),
      });
    });

    it('names a kept record that does not follow the anchor', () => {
      const records = aChain(N);
      const kept = records.slice(4);
      kept[0] = { ...kept[0]!, prevHash: 'b'.repeat(64) };
      expect(verify(kept, headOf(records), [signed(records[3]!, 'retention')]).first_bad).toMatchObject({
        seq: 5,
        reason: expect.stringMatching(/prev_hash/),
      });
    });
  });

  it('names the earliest of several problems', () => {
    const records = aChain(N);
    const tampered = records.map((r) => (r.seq === 8 ? { ...r, actor: 'user:mallory' } : r)).filter((r) => r.seq !== 3);
    expect(verify(tampered, headOf(records)).first_bad).toMatchObject({ seq: 3 });
    // a bad checkpoint early in the chain wins over an edit later on, and the reverse
    const early = { ...signed(records[1]!), signature: 'x' };
    expect(
      verify(
        records.map((r) => (r.seq === 6 ? { ...r, actor: 'user:mallory' } : r)),
        headOf(records),
        [early],
      ).first_bad,
    ).toMatchObject({ seq: 2 });
    const late = { ...signed(records[8]!), signature: 'x' };
    expect(
      verify(
        records.map((r) => (r.seq === 6 ? { ...r, actor: 'user:mallory' } : r)),
        headOf(records),
        [late],
      ).first_bad,
    ).toMatchObject({ seq: 6 });
  });

  it('refuses a record of another chain', () => {
    const records = aChain(N);
    const [stray] = chainRecords(headOf(records.slice(0, 3)), [entry(4, OTHER_CHAIN)]);
    records[3] = stray!;
    expect(verify(records, headOf(records)).first_bad).toMatchObject({
      seq: 4,
      reason: expect.stringMatching(/another chain/),
    });
  });
});
