import { canonicalJson, sha256Hex } from '@aileron/crypto';

/** The hash a chain's first record points back to. */
export const GENESIS_HASH = '0'.repeat(64);

export type AuditSource = 'api' | 'gateway' | 'pool' | 'system';

/** One audit record as stored: every field here is covered by its hash. */
export interface ChainedRecord {
  chainId: string;
  organizationId: string;
  workspaceId: string | null;
  seq: number;
  id: string;
  type: string;
  recordedAt: Date;
  occurredAt: Date;
  source: AuditSource;
  actor: string | null;
  principal: string | null;
  executionMode: string | null;
  server: string | null;
  tool: string | null;
  decision: string | null;
  sessionId: string | null;
  data: Record<string, unknown>;
  prevHash: string;
  hash: string;
}

export type UnchainedRecord = Omit<ChainedRecord, 'seq' | 'prevHash' | 'hash'>;

/**
 * The canonical form of a record (RFC 8785 JSON of every field but its own
 * hash): what is hashed, and what an auditor recomputes with any JSON
 * canonicaliser. Dates are ISO-8601 with milliseconds, as stored.
 */
export function canonicalRecord(record: Omit<ChainedRecord, 'hash'>): string {
  return canonicalJson({
    v: 1,
    chain: record.chainId,
    organization: record.organizationId,
    workspace: record.workspaceId,
    seq: record.seq,
    id: record.id,
    type: record.type,
    recorded_at: record.recordedAt.toISOString(),
    occurred_at: record.occurredAt.toISOString(),
    source: record.source,
    actor: record.actor,
    principal: record.principal,
    execution_mode: record.executionMode,
    server: record.server,
    tool: record.tool,
    decision: record.decision,
    session: record.sessionId,
    data: record.data,
    prev_hash: record.prevHash,
  });
}

export function recordHash(record: Omit<ChainedRecord, 'hash'>): string {
  return sha256Hex(canonicalRecord(record));
}

/** Hashes a record once its position is known; see `recordHasher`. */
export type RecordHasher = (seq: number, prevHash: string) => string;

/**
 * The canonical form of a record split around its two position fields, so
 * everything else is serialised before the chain's head is known (outside the
 * lock, while the head is being fetched) and hashing at append time is a
 * concatenation and a SHA-256. Byte for byte the same as `canonicalRecord`
 * (a spec holds them to it); keys are in RFC 8785 order.
 */
export function recordHasher(record: UnchainedRecord): RecordHasher {
  const s = JSON.stringify;
  const before =
    `{"actor":${s(record.actor)},"chain":${s(record.chainId)},"data":${canonicalValue(record.data)},"decision":${s(record.decision)},"execution_mode":${s(record.executionMode)}` +
    `,"id":${s(record.id)},"occurred_at":${s(record.occurredAt.toISOString())},"organization":${s(record.organizationId)},"prev_hash":`;
  const middle = `,"principal":${s(record.principal)},"recorded_at":${s(record.recordedAt.toISOString())},"seq":`;
  const after =
    `,"server":${s(record.server)},"session":${s(record.sessionId)},"source":${s(record.source)},"tool":${s(record.tool)}` +
    `,"type":${s(record.type)},"v":1,"workspace":${s(record.workspaceId)}}`;
  return (seq, prevHash) => sha256Hex(`${before}${s(prevHash)}${middle}${seq}${after}`);
}

/**
 * RFC 8785 for plain JSON values (what `data` holds: parsed JSON, no Dates or
 * toJSON): keys sorted by UTF-16 code units, primitives as JSON.stringify
 * writes them, which is what the RFC prescribes. Anything else goes to the
 * general canonicaliser.
 */
function canonicalValue(value: unknown): string {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') return Number.isFinite(value) ? JSON.stringify(value) : canonicalJson(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++)
      out += (i === 0 ? '' : ',') + (value[i] === undefined ? 'null' : canonicalValue(value[i]));
    return `${out}]`;
  }
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const object = value as Record<string, unknown>;
    let out = '{';
    let first = true;
    for (const key of Object.keys(object).sort()) {
      const item = object[key];
      if (item === undefined) continue;
      out += `${first ? '' : ','}${JSON.stringify(key)}:${canonicalValue(item)}`;
      first = false;
    }
    return `${out}}`;
  }
  return canonicalJson(value);
}

/** Links records onto a chain whose newest record is `head`; `hashers` may be prepared beforehand. */
export function chainRecords(
  head: { seq: number; hash: string },
  records: UnchainedRecord[],
  hashers?: RecordHasher[],
): ChainedRecord[] {
  let { seq, hash } = head;
  return records.map((record, i) => {
    const hasher = hashers?.[i] ?? recordHasher(record);
    const prevHash = hash;
    hash = hasher(++seq, prevHash);
    return { ...record, seq, prevHash, hash };
  });
}

/** What a checkpoint signs: this chain's record `seq` has hash `hash`. */
export function checkpointSigningInput(checkpoint: {
  chainId: string;
  seq: number;
  hash: string;
  kind: string;
}): string {
  return `aileron-audit-checkpoint/v1\n${canonicalJson({ chain: checkpoint.chainId, seq: checkpoint.seq, hash: checkpoint.hash, kind: checkpoint.kind })}`;
}

export interface CheckpointRecord {
  seq: number;
  hash: string;
  kind: 'periodic' | 'retention';
  keyId: string;
  signature: string;
}

export interface FirstBad {
  seq: number;
  /** the id of the record found at that position, if any */
  id: string | null;
  reason: string;
}

export interface VerifyResult {
  ok: boolean;
  events: number;
  checkpoints: number;
  first_bad?: FirstBad;
}

/**
 * Walks a chain in seq order and names the first record that is not what the
 * chain says it should be: edited (its hash no longer matches), inserted or
 * reordered (it does not point at its predecessor, or sits at the wrong
 * position), deleted (a gap, or a tail shorter than the head), or contradicted
 * by a signed checkpoint. Signatures are checked with `verifySignature`, which
 * knows the published keys.
 */
export class ChainVerifier {
  private expectedSeq: number;
  private prevHash: string;
  private count = 0;
  private bad: FirstBad | undefined;
  private readonly hashAt = new Map<number, string>();
  private readonly wanted: Map<number, CheckpointRecord>;

  constructor(
    private readonly chainId: string,
    checkpoints: CheckpointRecord[],
    verifySignature: (keyId: string, message: string, signature: string) => boolean,
  ) {
    this.wanted = new Map(checkpoints.map((c) => [c.seq, c]));
    const signed = checkpoints.filter((checkpoint) => {
      const ok = verifySignature(
        checkpoint.keyId,
        checkpointSigningInput({ chainId, ...checkpoint }),
        checkpoint.signature,
      );
      if (!ok)
        this.fail({
          seq: checkpoint.seq,
          id: null,
          reason: `checkpoint at ${checkpoint.seq} has a bad signature (key ${checkpoint.keyId})`,
        });
      return ok;
    });
    // retention removed everything up to its newest anchor: the chain resumes from there
    // (only a validly signed one: a forged anchor is reported where it is, not as the records before it)
    const anchor = signed.filter((c) => c.kind === 'retention').sort((a, b) => b.seq - a.seq)[0];
    this.expectedSeq = (anchor?.seq ?? 0) + 1;
    this.prevHash = anchor?.hash ?? GENESIS_HASH;
  }

  get firstBad(): FirstBad | undefined {
    return this.bad;
  }

  /** Feed records in ascending seq order; returns false once something is bad (stop reading). */
  next(record: ChainedRecord): boolean {
    if (this.bad && this.bad.seq <= record.seq) return false;
    if (record.chainId !== this.chainId)
      return this.fail({ seq: record.seq, id: record.id, reason: 'record belongs to another chain' });
    if (record.seq > this.expectedSeq) {
      return this.fail({
        seq: this.expectedSeq,
        id: record.id,
        reason: `record ${this.expectedSeq} is missing (the next one found is ${record.seq})`,
      });
    }
    if (record.seq < this.expectedSeq)
      return this.fail({
        seq: record.seq,
        id: record.id,
        reason: `record ${record.seq} appears twice or out of order`,
      });
    if (record.prevHash !== this.prevHash) {
      return this.fail({
        seq: record.seq,
        id: record.id,
        reason:
          'does not follow the record before it (prev_hash differs): inserted, reordered or its predecessor was removed',
      });
    }
    const { hash: _stored, ...rest } = record;
    if (recordHash(rest) !== record.hash)
      return this.fail({
        seq: record.seq,
        id: record.id,
        reason: 'content does not match its hash: the record was edited',
      });
    const checkpoint = this.wanted.get(record.seq);
    if (checkpoint && checkpoint.hash !== record.hash) {
      return this.fail({
        seq: record.seq,
        id: record.id,
        reason: `contradicts the signed checkpoint at ${record.seq}`,
      });
    }
    this.hashAt.set(record.seq, record.hash);
    this.prevHash = record.hash;
    this.expectedSeq++;
    this.count++;
    // a bad checkpoint further on must not hide an earlier bad record: read on until its position
    return !this.bad || this.bad.seq > this.expectedSeq;
  }

  /**
   * After the last record: the head and every checkpoint must be accounted for.
   * `later`, when the records were read only as far as `head` while the chain
   * grew: the newest record's position and the head read after it. Records and
   * checkpoints past `head` but within that later head were appended meanwhile;
   * past it, they were not appended through the log.
   */
  finish(head: { seq: number; hash: string } | null, later?: { newestSeq: number; headSeq: number }): VerifyResult {
    const last = this.expectedSeq - 1;
    if (!this.bad && head) {
      if (head.seq > last)
        this.fail({
          seq: last + 1,
          id: null,
          reason: `records ${last + 1}..${head.seq} are missing from the end of the chain`,
        });
      else if (head.seq < last)
        this.fail({ seq: head.seq + 1, id: null, reason: `records after ${head.seq} were added outside the log` });
      else if (head.seq > 0 && head.hash !== this.prevHash)
        this.fail({ seq: head.seq, id: null, reason: 'the newest record does not match the chain head' });
    }
    if (!this.bad && later && later.newestSeq > later.headSeq) {
      this.fail({
        seq: later.headSeq + 1,
        id: null,
        reason: `records after ${later.headSeq} were added outside the log`,
      });
    }
    if (!this.bad) {
      const verifiedTo = head?.seq ?? 0;
      for (const checkpoint of this.wanted.values()) {
        if (checkpoint.kind === 'retention' && checkpoint.seq < this.expectedSeq) continue;
        if (checkpoint.seq <= last) continue;
        if (later && checkpoint.seq > verifiedTo && checkpoint.seq <= later.headSeq) continue;
        this.fail({
          seq: checkpoint.seq,
          id: null,
          reason: `a signed checkpoint covers record ${checkpoint.seq}, which is missing`,
        });
      }
    }
    return {
      ok: !this.bad,
      events: this.count,
      checkpoints: this.wanted.size,
      ...(this.bad ? { first_bad: this.bad } : {}),
    };
  }

  private fail(bad: FirstBad): false {
    if (!this.bad || bad.seq < this.bad.seq) this.bad = bad;
    return false;
  }
}
