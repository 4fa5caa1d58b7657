import { Injectable } from '@nestjs/common';
import type { OrgScope } from '@aileron/auth';
import { DatabaseService, Prisma, Transaction } from '@aileron/database';
import type { AuditSource, ChainedRecord, CheckpointRecord } from './domain/chain';

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
  decision?: string;
  session?: string;
  types?: string[];
  execution_mode?: string;
}

type Row = Prisma.AuditEventGetPayload<object>;

/**
 * The audit chains. Appends lock the chain's head row, so records of one
 * chain are numbered and hashed one writer at a time, in commit order (which
 * is also what lets a sink's cursor never skip a record).
 */
@Injectable()
export class AuditRepository {
  constructor(private readonly db: DatabaseService) {}

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
    if (!row || row.organization_id !== scope.organizationId) throw new Error('audit chain belongs to another organisation');
    return { chainId, organizationId: scope.organizationId, workspaceId, seq: Number(row.seq), hash: row.hash, checkpointSeq: Number(row.checkpoint_seq) };
  }

  /** Which of these ids the chain already holds (a retried gateway batch). */
  async existingIds(tx: Transaction, chainId: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    // the ids as one JSON parameter: findMany's `in` compiles a plan per call that grows with the list
    const rows = await tx.$queryRaw<{ id: string }[]>`
      SELECT id FROM audit_events
      WHERE chain_id = ${chainId}::uuid AND id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb)::uuid)`;
    return new Set(rows.map((r) => r.id));
  }

  async append(tx: Transaction, records: ChainedRecord[]): Promise<void> {
    if (records.length === 0) return;
    // One JSON parameter, not createMany: Prisma compiles a createMany plan per call at ~0.4 ms a row
    // (a 500-event gateway batch spent ten times the INSERT's own cost there). The rows are the same:
    // Prisma also sends dates as ISO-8601 and `data` as JSON text.
    const last = records[records.length - 1]!;
    // the head moves in the same statement: one round trip per batch
    await tx.$executeRaw`
      WITH inserted AS (
      INSERT INTO audit_events (organization_id, chain_id, workspace_id, seq, id, type, recorded_at, occurred_at, source, actor,
                                principal, execution_mode, server, tool, decision, session_id, data, prev_hash, hash)
      SELECT organization_id, chain_id, workspace_id, seq, id, type, recorded_at, occurred_at, source, actor,
             principal, execution_mode, server, tool, decision, session_id, data, prev_hash, hash
      FROM jsonb_to_recordset(${JSON.stringify(records.map(toRow))}::jsonb) AS r(
        organization_id uuid, chain_id uuid, workspace_id uuid, seq bigint, id uuid, type text, recorded_at timestamptz, occurred_at timestamptz,
        source text, actor text, principal text, execution_mode text, server text, tool text, decision text, session_id text, data jsonb,
        prev_hash text, hash text)
      RETURNING 1)
      UPDATE audit_heads SET seq = ${last.seq}::bigint, hash = ${last.hash}, updated_at = now()
      WHERE chain_id = ${last.chainId}::uuid AND (SELECT count(*) FROM inserted) = ${records.length}`;
  }

  async writeCheckpoint(tx: Transaction, scope: OrgScope, chainId: string, checkpoint: CheckpointRecord): Promise<void> {
    await tx.auditCheckpoint.upsert({
      where: { chainId_seq: { chainId, seq: BigInt(checkpoint.seq) } },
      create: { chainId, organizationId: scope.organizationId, seq: BigInt(checkpoint.seq), hash: checkpoint.hash, kind: checkpoint.kind, keyId: checkpoint.keyId, signature: checkpoint.signature },
      // retention often cuts at a record a periodic checkpoint already signed: that one becomes the anchor
      // (same seq and hash, signed again with kind 'retention'), or the removed records would have none
      update: checkpoint.kind === 'retention' ? { hash: checkpoint.hash, kind: checkpoint.kind, keyId: checkpoint.keyId, signature: checkpoint.signature } : {},
    });
    await tx.auditHead.update({ where: { chainId }, data: { checkpointSeq: BigInt(checkpoint.seq) } });
  }

  async head(scope: OrgScope, chainId: string): Promise<ChainHead | null> {
    const row = await this.db.client.auditHead.findFirst({ where: { chainId, organizationId: scope.organizationId } });
    return row ? toHead(row) : null;
  }

  /**
   * Chains whose newest records wait for a checkpoint: `every` records since
   * the last one, or any record once `seconds` have passed (system work, every tenant).
   */
  async chainsNeedingCheckpoint(every: number, seconds: number, limit: number): Promise<ChainHead[]> {
    const rows = await this.db.client.$queryRaw<{ chain_id: string; organization_id: string; workspace_id: string | null; seq: bigint; hash: string; checkpoint_seq: bigint }[]>`
      SELECT h.chain_id, h.organization_id, h.workspace_id, h.seq, h.hash, h.checkpoint_seq FROM audit_heads h
      WHERE h.seq > h.checkpoint_seq
        AND (h.seq - h.checkpoint_seq >= ${every}
             OR COALESCE((SELECT max(c.created_at) FROM audit_checkpoints c WHERE c.chain_id = h.chain_id), 'epoch'::timestamptz)
                <= now() - make_interval(secs => ${seconds}))
      ORDER BY h.updated_at LIMIT ${limit}`;
    return rows.map((r) => ({ chainId: r.chain_id, organizationId: r.organization_id, workspaceId: r.workspace_id, seq: Number(r.seq), hash: r.hash, checkpointSeq: Number(r.checkpoint_seq) }));
  }

  async heads(scope: OrgScope): Promise<ChainHead[]> {
    const rows = await this.db.client.auditHead.findMany({ where: { organizationId: scope.organizationId }, orderBy: { chainId: 'asc' } });
    return rows.map(toHead);
  }

  async checkpoints(scope: OrgScope, chainId: string): Promise<CheckpointRecord[]> {
    const rows = await this.db.client.auditCheckpoint.findMany({ where: { chainId, organizationId: scope.organizationId }, orderBy: { seq: 'asc' } });
    return rows.map((r) => ({ seq: Number(r.seq), hash: r.hash, kind: r.kind as CheckpointRecord['kind'], keyId: r.keyId, signature: r.signature }));
  }

  /** One page of a chain in seq order, for verification and export. */
  async pageBySeq(scope: OrgScope, chainId: string, afterSeq: number, limit: number): Promise<ChainedRecord[]> {
    const rows = await this.db.client.auditEvent.findMany({
      where: { chainId, organizationId: scope.organizationId, seq: { gt: BigInt(afterSeq) } },
      orderBy: { seq: 'asc' },
      take: limit,
    });
    return rows.map(toRecord);
  }

  /** Newest first; `beforeSeq` continues a previous page. */
  async search(scope: OrgScope, chainId: string, filters: AuditFilters, page: { beforeSeq?: number; afterSeq?: number; limit: number; order: 'asc' | 'desc' }): Promise<ChainedRecord[]> {
    const seq: Prisma.BigIntFilter = {};
    if (page.beforeSeq !== undefined) seq.lt = BigInt(page.beforeSeq);
    if (page.afterSeq !== undefined) seq.gt = BigInt(page.afterSeq);
    const occurredAt: Prisma.DateTimeFilter = {};
    if (filters.from) occurredAt.gte = filters.from;
    if (filters.to) occurredAt.lt = filters.to;
    const rows = await this.db.client.auditEvent.findMany({
      where: {
        chainId,
        organizationId: scope.organizationId,
        ...(page.beforeSeq !== undefined || page.afterSeq !== undefined ? { seq } : {}),
        ...(filters.from || filters.to ? { occurredAt } : {}),
        ...(filters.actor ? { actor: filters.actor } : {}),
        ...(filters.principal ? { principal: filters.principal } : {}),
        ...(filters.server ? { server: filters.server } : {}),
        ...(filters.tool ? { tool: filters.tool } : {}),
        ...(filters.decision ? { decision: filters.decision } : {}),
        ...(filters.session ? { sessionId: filters.session } : {}),
        ...(filters.execution_mode ? { executionMode: filters.execution_mode } : {}),
        ...(filters.types?.length ? { type: { in: filters.types } } : {}),
      },
      orderBy: { seq: page.order },
      take: page.limit,
    });
    return rows.map(toRecord);
  }

  /** Records of a chain after a cursor, for a sink (system work: the sink's organisation is checked by the caller). */
  async afterCursor(organizationId: string, chainId: string, afterSeq: number, limit: number): Promise<ChainedRecord[]> {
    const rows = await this.db.client.auditEvent.findMany({
      where: { chainId, organizationId, seq: { gt: BigInt(afterSeq) } },
      orderBy: { seq: 'asc' },
      take: limit,
    });
    return rows.map(toRecord);
  }

  /** The newest record at or before `cutoff` (by recorded time), the edge of what retention removes. */
  async retentionEdge(chainId: string, cutoff: Date): Promise<ChainedRecord | null> {
    const row = await this.db.client.auditEvent.findFirst({ where: { chainId, recordedAt: { lt: cutoff } }, orderBy: { seq: 'desc' } });
    return row ? toRecord(row) : null;
  }

  /**
   * Removes records 1..seq of a chain. The trigger refuses deletes unless the
   * transaction says it is the retention job; nothing else ever says so.
   */
  async removeThrough(tx: Transaction, chainId: string, seq: number): Promise<number> {
    await tx.$executeRaw`SELECT set_config('aileron.audit_retention', 'on', true)`;
    const removed = await tx.auditEvent.deleteMany({ where: { chainId, seq: { lte: BigInt(seq) } } });
    await tx.$executeRaw`SELECT set_config('aileron.audit_retention', 'off', true)`;
    return removed.count;
  }

  async organizationsWithRetention(): Promise<{ id: string; days: number }[]> {
    const rows = await this.db.client.organization.findMany({ where: { auditRetentionDays: { not: null } }, select: { id: true, auditRetentionDays: true } });
    return rows.map((r) => ({ id: r.id, days: r.auditRetentionDays! }));
  }

  async retentionDays(scope: OrgScope): Promise<number | null> {
    const row = await this.db.client.organization.findUniqueOrThrow({ where: { id: scope.organizationId }, select: { auditRetentionDays: true } });
    return row.auditRetentionDays;
  }

  async setRetentionDays(scope: OrgScope, days: number | null, tx: Transaction): Promise<void> {
    await tx.organization.update({ where: { id: scope.organizationId }, data: { auditRetentionDays: days } });
  }
}

function toHead(row: { chainId: string; organizationId: string; workspaceId: string | null; seq: bigint; hash: string; checkpointSeq: bigint }): ChainHead {
  return { chainId: row.chainId, organizationId: row.organizationId, workspaceId: row.workspaceId, seq: Number(row.seq), hash: row.hash, checkpointSeq: Number(row.checkpointSeq) };
}

/** A record as one element of the JSON that `append` hands to jsonb_to_recordset. */
function toRow(record: ChainedRecord): Record<string, unknown> {
  return {
    organization_id: record.organizationId,
    chain_id: record.chainId,
    workspace_id: record.workspaceId,
    seq: record.seq,
    id: record.id,
    type: asText(record.type),
    recorded_at: record.recordedAt.toISOString(),
    occurred_at: record.occurredAt.toISOString(),
    source: asText(record.source),
    actor: asText(record.actor),
    principal: asText(record.principal),
    execution_mode: asText(record.executionMode),
    server: asText(record.server),
    tool: asText(record.tool),
    decision: asText(record.decision),
    session_id: asText(record.sessionId),
    // as createMany sent it: JSON text, where PostgreSQL refuses a lone surrogate
    data: record.data,
    prev_hash: record.prevHash,
    hash: record.hash,
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
