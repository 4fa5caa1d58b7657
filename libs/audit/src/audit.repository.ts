import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope } from '@aileron/auth';
import { Keyset, Repository, Prisma, Transaction } from '@aileron/database';
import type { AuditSource, ChainedRecord, CheckpointRecord } from './domain/chain';
import type { CallCounts, CallRecordRow } from './domain/recorded-call';

export interface ChainHead {
  chainId: string;
  organizationId: string;
  workspaceId: string | null;
  seq: number;
  hash: string;
  checkpointSeq: number;
}

export interface AuditFilters {
  from?: Date;
  to?: Date;
  actor?: string;
  principal?: string;
  server?: string;
  tool?: string;
  /** any of these */
  decisions?: string[];
  session?: string;
  types?: string[];
  execution_mode?: string;
}

// where a record was announced (`event_id`) is not part of the record
type Row = Omit<Prisma.AuditEventGetPayload<object>, 'eventId'>;

/**
 * The records that are tool calls, one per call (domain/recorded-call.ts says
 * which and why). Every condition is on the row itself: the chain and time
 * range come first, from the (chain_id, occurred_at) index.
 */
const CALL_RECORD = Prisma.sql`(
  (source = 'pool' AND ((type = 'execution.started' AND decision = 'allow') OR (type = 'execution.failed' AND decision = 'deny')))
  OR (source = 'gateway' AND decision IN ('allow', 'deny') AND type <> 'execution.started')
  OR (type = 'approval.requested' AND COALESCE(data->'rules'->>0, '') NOT LIKE 'shell:%'))`;

/**
 * The audit chains. Appends lock the chain's head row, so records of one
 * chain are numbered and hashed one writer at a time, in commit order (which
 * is also what lets a sink's cursor never skip a record).
 */
@Injectable()
export class AuditRepository extends Repository {
  /** The chain's head, locked until the transaction ends; created empty on first use. */
  async lockHead(tx: Transaction, scope: OrgScope, chainId: string, workspaceId: string | null): Promise<ChainHead> {
    const select = () => tx.$queryRaw<{ seq: bigint; hash: string; checkpoint_seq: bigint; organization_id: string }[]>`
      SELECT seq, hash, checkpoint_seq, organization_id FROM audit_heads WHERE chain_id = ${chainId}::uuid FOR UPDATE`;
    // one round trip on every append but a chain's first
    let rows = await select();
    if (rows.length === 0) {
      await tx.$executeRaw`
        INSERT INTO audit_heads (chain_id, organization_id, workspace_id, seq, hash)
        VALUES (${chainId}::uuid, ${scope.organizationId}::uuid, ${workspaceId}::uuid, 0, ${'0'.repeat(64)})
        ON CONFLICT (chain_id) DO NOTHING`;
      rows = await select();
    }
    const row = rows[0];
    if (!row || row.organization_id !== scope.organizationId)
      throw new Error('audit chain belongs to another organisation');
    return {
      chainId,
      organizationId: scope.organizationId,
      workspaceId,
      seq: Number(row.seq),
      hash: row.hash,
      checkpointSeq: Number(row.checkpoint_seq),
    };
  }

  /** Which of these ids the chain already holds (a retried gateway batch). */
  async existingIds(tx: Transaction, scope: OrgScope, chainId: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    // the ids as one JSON parameter: findMany's `in` compiles a plan per call that grows with the list
    const rows = await tx.$queryRaw<{ id: string }[]>`
      SELECT id FROM audit_events
      WHERE chain_id = ${chainId}::uuid AND organization_id = ${scope.organizationId}::uuid AND id = ANY(${ids}::uuid[])`;
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Appends the records and moves the head, in one statement. With
   * `skipRepeats` a record whose id the chain holds already is left out
   * instead of failing the statement, and the answer is false: then the
   * head has not moved and the caller must roll back and chain again
   * without the repeats (the unique index finds them while it inserts, so
   * the common case costs no separate look-up).
   */
  async append(
    tx: Transaction,
    scope: OrgScope,
    records: ChainedRecord[],
    options: { skipRepeats?: boolean; eventIds?: readonly (string | null)[] } = {},
  ): Promise<boolean> {
    const { skipRepeats = false, eventIds } = options;
    if (records.length === 0) return true;
    const last = records[records.length - 1]!;
    // One statement per batch, the rows as one JSON text (json_to_recordset): not createMany, which compiles
    // a plan per call at ~0.4 ms a row, nor an array per column, whose every element the driver escapes and
    // PostgreSQL parses again (on PGlite, on the control plane's thread: a sixth of the insert). `json`, not
    // `jsonb`: read once, never stored. The head moves in the same statement. Text goes through asText as
    // bound parameters did.
    const rows = JSON.stringify(
      records.map((r, i) => ({
        seq: r.seq,
        id: r.id,
        type: asText(r.type),
        recorded_at: r.recordedAt.toISOString(),
        occurred_at: r.occurredAt.toISOString(),
        source: asText(r.source),
        actor: asText(r.actor),
        principal: asText(r.principal),
        execution_mode: asText(r.executionMode),
        server: asText(r.server),
        tool: asText(r.tool),
        decision: asText(r.decision),
        session_id: asText(r.sessionId),
        data: r.data,
        prev_hash: r.prevHash,
        hash: r.hash,
        event_id: eventIds?.[i] ?? null,
      })),
    );
    const moved = await tx.$executeRaw`
      WITH inserted AS (
        INSERT INTO audit_events (organization_id, chain_id, workspace_id, seq, id, type, recorded_at, occurred_at, source, actor,
                                  principal, execution_mode, server, tool, decision, session_id, data, prev_hash, hash, event_id)
        SELECT ${scope.organizationId}::uuid, ${last.chainId}::uuid, ${last.workspaceId}::uuid, u.seq, u.id, u.type, u.recorded_at, u.occurred_at,
               u.source, u.actor, u.principal, u.execution_mode, u.server, u.tool, u.decision, u.session_id, u.data, u.prev_hash, u.hash,
               u.event_id
        FROM json_to_recordset(${rows}::json) AS u(seq bigint, id uuid, type text, recorded_at timestamptz, occurred_at timestamptz,
          source text, actor text, principal text, execution_mode text, server text, tool text, decision text, session_id text,
          data jsonb, prev_hash text, hash text, event_id bigint)
        ${skipRepeats ? Prisma.sql`ON CONFLICT (chain_id, id) DO NOTHING` : Prisma.empty}
        RETURNING 1)
      UPDATE audit_heads SET seq = ${last.seq}::bigint, hash = ${last.hash}, updated_at = now()
      WHERE chain_id = ${last.chainId}::uuid AND organization_id = ${scope.organizationId}::uuid AND (SELECT count(*) FROM inserted) = ${records.length}`;
    return moved === 1;
  }

  /**
   * The records these outbox events announce, by (chain, id), through `tx`
   * where given: what their payloads are rebuilt from (system work: the
   * events of every tenant; each record is looked up in its own
   * organisation). A record retention removed is not found.
   */
  async recordsById(
    _system: SystemScope,
    refs: readonly { organizationId: string; chainId: string; id: string }[],
    tx?: Transaction,
  ): Promise<ChainedRecord[]> {
    if (refs.length === 0) return [];
    const rows = await (tx ?? this.client).$queryRaw<RawRecord[]>`
      SELECT e.* FROM audit_events e
      JOIN unnest(${refs.map((r) => r.chainId)}::uuid[], ${refs.map((r) => r.id)}::uuid[], ${refs.map((r) => r.organizationId)}::uuid[])
        AS ref(chain_id, id, organization_id)
        ON e.chain_id = ref.chain_id AND e.id = ref.id AND e.organization_id = ref.organization_id`;
    return rows.map(fromRaw);
  }

  /**
   * The records of a workspace's chain announced by events stored in them
   * (`event_id`), after `afterEventId`, in event order: the part of the
   * workspace's event history that has no outbox rows.
   */
  async announcedAfter(
    scope: OrgScope,
    workspaceId: string,
    afterEventId: bigint,
    limit: number,
  ): Promise<(ChainedRecord & { eventId: bigint })[]> {
    const rows = await this.client.$queryRaw<(RawRecord & { event_id: bigint })[]>`
      SELECT e.* FROM audit_events e
      WHERE e.chain_id = ${workspaceId}::uuid AND e.organization_id = ${scope.organizationId}::uuid
        AND e.event_id > ${afterEventId}::bigint
      ORDER BY e.event_id LIMIT ${limit}`;
    return rows.map((row) => ({ ...fromRaw(row), eventId: BigInt(row.event_id) }));
  }

  async writeCheckpoint(
    tx: Transaction,
    scope: OrgScope,
    chainId: string,
    checkpoint: CheckpointRecord,
  ): Promise<void> {
    await tx.auditCheckpoint.upsert({
      where: { chainId_seq: { chainId, seq: BigInt(checkpoint.seq) } },
      create: {
        chainId,
        organizationId: scope.organizationId,
        seq: BigInt(checkpoint.seq),
        hash: checkpoint.hash,
        kind: checkpoint.kind,
        keyId: checkpoint.keyId,
        signature: checkpoint.signature,
      },
      // retention often cuts at a record a periodic checkpoint already signed: that one becomes the anchor
      // (same seq and hash, signed again with kind 'retention'), or the removed records would have none
      update:
        checkpoint.kind === 'retention'
          ? { hash: checkpoint.hash, kind: checkpoint.kind, keyId: checkpoint.keyId, signature: checkpoint.signature }
          : {},
    });
    await tx.auditHead.update({ where: { chainId }, data: { checkpointSeq: BigInt(checkpoint.seq) } });
  }

  async head(scope: OrgScope, chainId: string): Promise<ChainHead | null> {
    const row = await this.client.auditHead.findFirst({ where: { chainId, organizationId: scope.organizationId } });
    return row ? toHead(row) : null;
  }

  /**
   * Chains whose newest records wait for a checkpoint: `every` records since
   * the last one, or any record once `seconds` have passed (system work, every tenant).
   */
  async chainsNeedingCheckpoint(
    _system: SystemScope,
    every: number,
    seconds: number,
    limit: number,
  ): Promise<ChainHead[]> {
    const rows = await this.client.$queryRaw<
      {
        chain_id: string;
        organization_id: string;
        workspace_id: string | null;
        seq: bigint;
        hash: string;
        checkpoint_seq: bigint;
      }[]
    >`
      SELECT h.chain_id, h.organization_id, h.workspace_id, h.seq, h.hash, h.checkpoint_seq FROM audit_heads h
      WHERE h.seq > h.checkpoint_seq
        AND (h.seq - h.checkpoint_seq >= ${every}
             OR COALESCE((SELECT max(c.created_at) FROM audit_checkpoints c WHERE c.chain_id = h.chain_id), 'epoch'::timestamptz)
                <= now() - make_interval(secs => ${seconds}))
      ORDER BY h.updated_at LIMIT ${limit}`;
    return rows.map((r) => ({
      chainId: r.chain_id,
      organizationId: r.organization_id,
      workspaceId: r.workspace_id,
      seq: Number(r.seq),
      hash: r.hash,
      checkpointSeq: Number(r.checkpoint_seq),
    }));
  }

  async heads(scope: OrgScope): Promise<ChainHead[]> {
    const rows = await this.client.auditHead.findMany({
      where: { organizationId: scope.organizationId },
      orderBy: { chainId: 'asc' },
    });
    return rows.map(toHead);
  }

  /** Every checkpoint of a chain, in chain order; a page of them (by seq) when `page` is given. */
  async checkpoints(scope: OrgScope, chainId: string, page?: Keyset<number>): Promise<CheckpointRecord[]> {
    const rows = await this.client.auditCheckpoint.findMany({
      where: {
        chainId,
        organizationId: scope.organizationId,
        ...(page?.after !== undefined ? { seq: { gt: BigInt(page.after) } } : {}),
      },
      orderBy: { seq: 'asc' },
      ...(page ? { take: page.take } : {}),
    });
    return rows.map((r) => ({
      seq: Number(r.seq),
      hash: r.hash,
      kind: r.kind as CheckpointRecord['kind'],
      keyId: r.keyId,
      signature: r.signature,
    }));
  }

  /** One page of a chain in seq order, for verification and export; up to `throughSeq` when given. */
  async pageBySeq(
    scope: OrgScope,
    chainId: string,
    afterSeq: number,
    limit: number,
    throughSeq?: number,
  ): Promise<ChainedRecord[]> {
    const rows = await this.client.auditEvent.findMany({
      where: {
        chainId,
        organizationId: scope.organizationId,
        seq: { gt: BigInt(afterSeq), ...(throughSeq !== undefined ? { lte: BigInt(throughSeq) } : {}) },
      },
      orderBy: { seq: 'asc' },
      take: limit,
    });
    return rows.map(toRecord);
  }

  /** The position of the chain's newest record (0 when it has none). */
  async newestSeq(scope: OrgScope, chainId: string): Promise<number> {
    const row = await this.client.auditEvent.findFirst({
      where: { chainId, organizationId: scope.organizationId },
      orderBy: { seq: 'desc' },
      select: { seq: true },
    });
    return row ? Number(row.seq) : 0;
  }

  /** Newest first; `beforeSeq` continues a previous page. */
  async search(
    scope: OrgScope,
    chainId: string,
    filters: AuditFilters,
    page: { beforeSeq?: number; afterSeq?: number; limit: number; order: 'asc' | 'desc' },
  ): Promise<ChainedRecord[]> {
    const seq: Prisma.BigIntFilter = {};
    if (page.beforeSeq !== undefined) seq.lt = BigInt(page.beforeSeq);
    if (page.afterSeq !== undefined) seq.gt = BigInt(page.afterSeq);
    const occurredAt: Prisma.DateTimeFilter = {};
    if (filters.from) occurredAt.gte = filters.from;
    if (filters.to) occurredAt.lt = filters.to;
    const rows = await this.client.auditEvent.findMany({
      where: {
        chainId,
        organizationId: scope.organizationId,
        ...(page.beforeSeq !== undefined || page.afterSeq !== undefined ? { seq } : {}),
        ...(filters.from || filters.to ? { occurredAt } : {}),
        ...(filters.actor ? { actor: filters.actor } : {}),
        ...(filters.principal ? { principal: filters.principal } : {}),
        ...(filters.server ? { server: filters.server } : {}),
        ...(filters.tool ? { tool: filters.tool } : {}),
        ...(filters.decisions?.length ? { decision: { in: filters.decisions } } : {}),
        ...(filters.session ? { sessionId: filters.session } : {}),
        ...(filters.execution_mode ? { executionMode: filters.execution_mode } : {}),
        ...(filters.types?.length ? { type: { in: filters.types } } : {}),
      },
      orderBy: { seq: page.order },
      take: page.limit,
    });
    return rows.map(toRecord);
  }

  /**
   * The chain's calls from `from` to `to` (by when they happened), counted per
   * bucket of `bucketSeconds` in the database: only buckets with a call come back.
   */
  async callCounts(
    scope: OrgScope,
    chainId: string,
    range: { from: Date; to: Date; bucketSeconds: number },
  ): Promise<CallCounts[]> {
    const rows = await this.client.$queryRaw<{ bucket: bigint; calls: number; denied: number; approval: number }[]>`
      SELECT floor(extract(epoch FROM occurred_at) / ${range.bucketSeconds}::int)::bigint AS bucket,
             count(*)::int AS calls,
             (count(*) FILTER (WHERE type <> 'approval.requested' AND decision = 'deny'))::int AS denied,
             (count(*) FILTER (WHERE type = 'approval.requested'))::int AS approval
      FROM audit_events
      WHERE chain_id = ${chainId}::uuid AND organization_id = ${scope.organizationId}::uuid
        AND occurred_at >= ${range.from.toISOString()}::timestamptz AND occurred_at < ${range.to.toISOString()}::timestamptz
        AND ${CALL_RECORD}
      GROUP BY 1 ORDER BY 1`;
    return rows.map((r) => ({
      start: Number(r.bucket) * range.bucketSeconds * 1000,
      calls: r.calls,
      denied: r.denied,
      approval: r.approval,
    }));
  }

  /**
   * At most `limit` of the chain's calls from `from` to `to`, in the order they
   * happened (then chain order), after `after` when a previous page ended there.
   */
  async calls(
    scope: OrgScope,
    chainId: string,
    range: { from: Date; to: Date; after?: { occurredAt: Date; seq: number }; limit: number },
  ): Promise<CallRecordRow[]> {
    const after = range.after
      ? Prisma.sql`AND (occurred_at, seq) > (${range.after.occurredAt.toISOString()}::timestamptz, ${range.after.seq}::bigint)`
      : Prisma.empty;
    const rows = await this.client.$queryRaw<
      {
        seq: bigint;
        id: string;
        type: string;
        occurred_at: Date;
        source: string;
        actor: string | null;
        principal: string | null;
        execution_mode: string | null;
        server: string | null;
        tool: string | null;
        decision: string | null;
        session_id: string | null;
        data: unknown;
      }[]
    >`
      SELECT seq, id, type, occurred_at, source, actor, principal, execution_mode, server, tool, decision, session_id, data
      FROM audit_events
      WHERE chain_id = ${chainId}::uuid AND organization_id = ${scope.organizationId}::uuid
        AND occurred_at >= ${range.from.toISOString()}::timestamptz AND occurred_at < ${range.to.toISOString()}::timestamptz
        ${after}
        AND ${CALL_RECORD}
      ORDER BY occurred_at, seq LIMIT ${range.limit}::int`;
    return rows.map((r) => ({
      seq: Number(r.seq),
      id: r.id,
      type: r.type,
      occurredAt: new Date(r.occurred_at),
      source: r.source as AuditSource,
      actor: r.actor,
      principal: r.principal,
      executionMode: r.execution_mode,
      server: r.server,
      tool: r.tool,
      decision: r.decision,
      sessionId: r.session_id,
      data: (typeof r.data === 'string' ? JSON.parse(r.data) : (r.data ?? {})) as Record<string, unknown>,
    }));
  }

  /** Records of a chain after a cursor, for a sink. */
  async afterCursor(scope: OrgScope, chainId: string, afterSeq: number, limit: number): Promise<ChainedRecord[]> {
    const rows = await this.client.auditEvent.findMany({
      where: { chainId, organizationId: scope.organizationId, seq: { gt: BigInt(afterSeq) } },
      orderBy: { seq: 'asc' },
      take: limit,
    });
    return rows.map(toRecord);
  }

  /** The newest record at or before `cutoff` (by recorded time), the edge of what retention removes. */
  async retentionEdge(scope: OrgScope, chainId: string, cutoff: Date): Promise<ChainedRecord | null> {
    const row = await this.client.auditEvent.findFirst({
      where: { organizationId: scope.organizationId, chainId, recordedAt: { lt: cutoff } },
      orderBy: { seq: 'desc' },
    });
    return row ? toRecord(row) : null;
  }

  /**
   * Removes records 1..seq of a chain. The trigger refuses deletes unless the
   * transaction says it is the retention job; nothing else ever says so.
   */
  async removeThrough(tx: Transaction, scope: OrgScope, chainId: string, seq: number): Promise<number> {
    await tx.$executeRaw`SELECT set_config('aileron.audit_retention', 'on', true)`;
    const removed = await tx.auditEvent.deleteMany({
      where: { organizationId: scope.organizationId, chainId, seq: { lte: BigInt(seq) } },
    });
    await tx.$executeRaw`SELECT set_config('aileron.audit_retention', 'off', true)`;
    return removed.count;
  }

  async organizationsWithRetention(_system: SystemScope): Promise<{ id: string; days: number }[]> {
    const rows = await this.client.organization.findMany({
      where: { auditRetentionDays: { not: null } },
      select: { id: true, auditRetentionDays: true },
    });
    return rows.map((r) => ({ id: r.id, days: r.auditRetentionDays! }));
  }

  async retentionDays(scope: OrgScope): Promise<number | null> {
    const row = await this.client.organization.findUniqueOrThrow({
      where: { id: scope.organizationId },
      select: { auditRetentionDays: true },
    });
    return row.auditRetentionDays;
  }

  async setRetentionDays(scope: OrgScope, days: number | null, tx: Transaction): Promise<void> {
    await tx.organization.update({ where: { id: scope.organizationId }, data: { auditRetentionDays: days } });
  }
}

function toHead(row: {
  chainId: string;
  organizationId: string;
  workspaceId: string | null;
  seq: bigint;
  hash: string;
  checkpointSeq: bigint;
}): ChainHead {
  return {
    chainId: row.chainId,
    organizationId: row.organizationId,
    workspaceId: row.workspaceId,
    seq: Number(row.seq),
    hash: row.hash,
    checkpointSeq: Number(row.checkpointSeq),
  };
}

const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A text column as a bound parameter stored it: encoded as UTF-8, a lone
 * surrogate became U+FFFD. In JSON it would fail the whole INSERT instead.
 */
function asText(value: string | null): string | null {
  return value !== null && LONE_SURROGATE.test(value) ? value.replace(/\p{Cs}/gu, '\uFFFD') : value;
}

type RawRecord = {
  organization_id: string;
  chain_id: string;
  workspace_id: string | null;
  seq: bigint;
  id: string;
  type: string;
  recorded_at: Date;
  occurred_at: Date;
  source: string;
  actor: string | null;
  principal: string | null;
  execution_mode: string | null;
  server: string | null;
  tool: string | null;
  decision: string | null;
  session_id: string | null;
  data: unknown;
  prev_hash: string;
  hash: string;
};

function fromRaw(row: RawRecord): ChainedRecord {
  return toRecord({
    organizationId: row.organization_id,
    chainId: row.chain_id,
    workspaceId: row.workspace_id,
    seq: row.seq,
    id: row.id,
    type: row.type,
    recordedAt: new Date(row.recorded_at),
    occurredAt: new Date(row.occurred_at),
    source: row.source,
    actor: row.actor,
    principal: row.principal,
    executionMode: row.execution_mode,
    server: row.server,
    tool: row.tool,
    decision: row.decision,
    sessionId: row.session_id,
    data: (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Row['data'],
    prevHash: row.prev_hash,
    hash: row.hash,
  });
}

function toRecord(row: Row): ChainedRecord {
  return {
    chainId: row.chainId,
    organizationId: row.organizationId,
    workspaceId: row.workspaceId,
    seq: Number(row.seq),
    id: row.id,
    type: row.type,
    recordedAt: row.recordedAt,
    occurredAt: row.occurredAt,
    source: row.source as AuditSource,
    actor: row.actor,
    principal: row.principal,
    executionMode: row.executionMode,
    server: row.server,
    tool: row.tool,
    decision: row.decision,
    sessionId: row.sessionId,
    data: (row.data ?? {}) as Record<string, unknown>,
    prevHash: row.prevHash,
    hash: row.hash,
  };
}
