import { Injectable } from '@nestjs/common';
import { DatabaseService, Prisma, Transaction } from '@aileron/database';
import type { OutboxMessage, OutboxRecord } from './outbox-message';

export interface ClaimedMessage {
  id: string;
  topic: string;
  delivered: string[];
}

@Injectable()
export class OutboxRepository {
  constructor(private readonly db: DatabaseService) {}

  async record(tx: Transaction, records: OutboxRecord[]): Promise<void> {
    if (records.length === 0) return;
    await tx.outboxMessage.createMany({
      data: records.map((r) => ({
        topic: r.topic,
        organizationId: r.organizationId ?? null,
        workspaceId: r.workspaceId ?? null,
        payload: r.payload as Prisma.InputJsonValue,
      })),
    });
  }

  /**
   * Takes a lease on messages that are new or whose lease ran out (their
   * dispatcher died), skipping rows another replica is claiming right now.
   */
  async claimDue(leaseMs: number, limit: number): Promise<ClaimedMessage[]> {
    const rows = await this.db.client.$queryRaw<{ id: bigint; topic: string; delivered: string[] | null }[]>`
      WITH due AS (
        SELECT id FROM outbox_messages
        WHERE completed_at IS NULL
          AND (dispatched_at IS NULL OR dispatched_at < now() - make_interval(secs => ${leaseMs / 1000}))
        ORDER BY id
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE outbox_messages m
      SET dispatched_at = now(), dispatch_count = m.dispatch_count + 1
      FROM due WHERE m.id = due.id
      RETURNING m.id, m.topic,
        (SELECT array_agg(d.consumer) FROM outbox_deliveries d WHERE d.message_id = m.id) AS delivered`;
    return rows
      .map((r) => ({ id: r.id.toString(), topic: r.topic, delivered: r.delivered ?? [] }))
      .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
  }

  /**
   * Records that `consumer` handled the message and runs its effect in the
   * same transaction; returns false when it had already been handled.
   */
  async deliverOnce(
    messageId: string,
    consumer: string,
    effect: (message: OutboxMessage, tx: Transaction) => Promise<void>,
  ): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const inserted = await tx.$executeRaw`
        INSERT INTO outbox_deliveries (message_id, consumer) VALUES (${BigInt(messageId)}, ${consumer})
        ON CONFLICT DO NOTHING`;
      if (inserted === 0) return false;
      const row = await tx.outboxMessage.findUnique({ where: { id: BigInt(messageId) } });
      if (!row) return false;
      await effect(
        {
          id: row.id.toString(),
          topic: row.topic,
          ...(row.organizationId ? { organizationId: row.organizationId } : {}),
          ...(row.workspaceId ? { workspaceId: row.workspaceId } : {}),
          payload: row.payload as Record<string, unknown>,
          createdAt: row.createdAt,
        },
        tx,
      );
      return true;
    });
  }

  async completeIfDelivered(messageId: string, consumers: string[]): Promise<void> {
    await this.db.client.$executeRaw`
      UPDATE outbox_messages SET completed_at = now()
      WHERE id = ${BigInt(messageId)} AND completed_at IS NULL
        AND (SELECT count(*) FROM outbox_deliveries d WHERE d.message_id = ${BigInt(messageId)} AND d.consumer = ANY(${consumers}::text[])) >= ${consumers.length}`;
  }
}
