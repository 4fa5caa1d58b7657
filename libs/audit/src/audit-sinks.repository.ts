import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope } from '@aileron/auth';
import { DatabaseService, Keyset, keysetAfter, keysetOrder, Prisma, Repository, Transaction } from '@aileron/database';
import { Clock } from '@aileron/clock';

export interface AuditSinkRecord {
  id: string;
  organizationId: string;
  name: string;
  url: string;
  /** sealed by the root key */
  secret: string;
  enabled: boolean;
  createdBy: string | null;
  createdAt: Date;
  lastDeliveredAt: Date | null;
  lastError: string | null;
  lastErrorAt: Date | null;
}

@Injectable()
export class AuditSinksRepository extends Repository {
  constructor(
    db: DatabaseService,
    private readonly clock: Clock,
  ) {
    super(db);
  }

  create(
    scope: OrgScope,
    data: { id: string; name: string; url: string; secret: string; createdBy: string },
    tx: Transaction,
  ): Promise<AuditSinkRecord> {
    return tx.auditSink.create({ data: { organizationId: scope.organizationId, ...data } });
  }

  /** Oldest first, the id breaking ties. */
  list(scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<AuditSinkRecord[]> {
    return this.client.auditSink.findMany({
      where: {
        organizationId: scope.organizationId,
        ...keysetAfter<Prisma.AuditSinkWhereInput>(
          ['createdAt', 'id'],
          'asc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      orderBy: keysetOrder<Prisma.AuditSinkOrderByWithRelationInput>(['createdAt', 'id'], 'asc'),
      take: page.take,
    });
  }

  get(scope: OrgScope, id: string, tx?: Transaction): Promise<AuditSinkRecord | null> {
    return (tx ?? this.client).auditSink.findFirst({ where: { organizationId: scope.organizationId, id } });
  }

  /** Pauses (false) or resumes (true) a sink; false when it was already so, or is not the organisation's. */
  async setEnabled(scope: OrgScope, id: string, enabled: boolean, tx: Transaction): Promise<boolean> {
    const { count } = await tx.auditSink.updateMany({
      where: { organizationId: scope.organizationId, id, enabled: !enabled },
      data: { enabled },
    });
    return count > 0;
  }

  async delete(scope: OrgScope, id: string, tx: Transaction): Promise<boolean> {
    return (await tx.auditSink.deleteMany({ where: { organizationId: scope.organizationId, id } })).count > 0;
  }

  enabledIds(scope: OrgScope): Promise<{ id: string }[]> {
    return this.client.auditSink.findMany({
      where: { organizationId: scope.organizationId, enabled: true },
      select: { id: true },
    });
  }

  /** Every enabled sink of every organisation (system work: the periodic catch-up). */
  allEnabled(_system: SystemScope): Promise<{ id: string; organizationId: string }[]> {
    return this.client.auditSink.findMany({ where: { enabled: true }, select: { id: true, organizationId: true } });
  }

  /** Takes the sink's delivery lease if nobody holds it; false when another process is sending. */
  async claim(scope: OrgScope, id: string, leaseMs: number): Promise<boolean> {
    const count = await this.client.$executeRaw`
      UPDATE audit_sinks SET lease_until = now() + make_interval(secs => ${leaseMs / 1000})
      WHERE id = ${id}::uuid AND organization_id = ${scope.organizationId}::uuid AND enabled
        AND (lease_until IS NULL OR lease_until < now())`;
    return count === 1;
  }

  async release(scope: OrgScope, id: string, outcome: { delivered: boolean; error?: string }): Promise<void> {
    const now = this.clock.date();
    await this.client.auditSink.updateMany({
      where: { organizationId: scope.organizationId, id },
      data: {
        leaseUntil: null,
        ...(outcome.delivered ? { lastDeliveredAt: now } : {}),
        ...(outcome.error ? { lastError: outcome.error, lastErrorAt: now } : {}),
      },
    });
  }

  async cursors(scope: OrgScope, id: string): Promise<Map<string, number>> {
    const rows = await this.client.auditSinkCursor.findMany({
      where: { sinkId: id, sink: { organizationId: scope.organizationId } },
    });
    return new Map(rows.map((r) => [r.chainId, Number(r.seq)]));
  }

  async advance(scope: OrgScope, id: string, chainId: string, seq: number): Promise<void> {
    // the cursor table has no organisation of its own: the sink's row vouches for it
    await this.client.$executeRaw`
      INSERT INTO audit_sink_cursors (sink_id, chain_id, seq, updated_at)
      SELECT id, ${chainId}::uuid, ${BigInt(seq)}, now() FROM audit_sinks WHERE id = ${id}::uuid AND organization_id = ${scope.organizationId}::uuid
      ON CONFLICT (sink_id, chain_id) DO UPDATE SET seq = EXCLUDED.seq, updated_at = EXCLUDED.updated_at`;
  }
}
