import { Injectable } from '@nestjs/common';
import { Repository, storableJson, Transaction } from '@aileron/database';
import { OutboxMessage, OutboxRecord, storedMessage, withFields } from './outbox-message';

/** A message just written: leased to its writer, who hands it over from memory. */
export type RecordedMessage = ClaimedMessage & OutboxMessage;

export interface ClaimedMessage {
  id: string;
  topic: string;
  /** how many times it has been claimed, this claim included */
  dispatches: number;
  delivered: string[];
  /** written completed: its one durable consumer handled it in the writing transaction */
  completed?: boolean;
}

@Injectable()
export class OutboxRepository extends Repository {
  /**
   * Writes the messages, leased to the writer (their first dispatch) when it
   * hands them over itself once the transaction commits: no claim to pay per
   * message. A writer that dies first leaves them to whoever sweeps after the
   * lease runs out.
   */
  async record(
    tx: Transaction,
    records: OutboxRecord[],
    { leased, completed = false }: { leased: boolean; completed?: boolean },
  ): Promise<RecordedMessage[]> {
    if (records.length === 0) return [];
    // One statement, the rows as one array per column: createMany compiles a
    // plan per call that grows with the rows, and a busy pool writes hundreds at once.
    // An event that announces an audit record stores only what the record does not hold.
    const rows = await tx.$queryRaw<{ id: bigint; created_at: Date }[]>`
      INSERT INTO outbox_messages (topic, organization_id, workspace_id, payload, audit_record_id, dispatched_at, dispatch_count, completed_at)
      SELECT t.topic, t.organization_id, t.workspace_id, t.payload, t.audit_record_id, CASE WHEN ${leased}::boolean THEN now() END, ${leased ? 1 : 0}::int,
        CASE WHEN ${completed}::boolean THEN now() END FROM unnest(
        ${records.map((r) => r.topic)}::text[],
        ${records.map((r) => r.organizationId ?? null)}::uuid[],
        ${records.map((r) => r.workspaceId ?? null)}::uuid[],
        ${records.map((r) => JSON.stringify(storableJson(r.fromAuditRecord?.rest ?? r.payload)))}::jsonb[],
        ${records.map((r) => r.fromAuditRecord?.id ?? null)}::uuid[]
      ) WITH ORDINALITY AS t(topic, organization_id, workspace_id, payload, audit_record_id, n)
      ORDER BY t.n
      RETURNING id, created_at`;
    // RETURNING promises no order, but ids come from the sequence in the order the rows are
    // inserted, which ORDER BY fixes: the n-th smallest id is the n-th record
    rows.sort(byId);
    return rows.map((r, i) =>
      withFields(records[i]!, {
        id: r.id.toString(),
        createdAt: r.created_at,
        dispatches: 1,
        delivered: [] as string[],
        ...(completed ? { completed } : {}),
      }),
    );
  }

  /** Ids from the messages' sequence, ascending, for events stored elsewhere (their audit records). */
  async reserveIds(tx: Transaction, count: number): Promise<string[]> {
    const rows = await tx.$queryRaw<{ id: bigint }[]>`
      SELECT nextval('outbox_messages_id_seq') AS id FROM generate_series(1, ${count}::int)`;
    return rows.sort(byId).map((r) => r.id.toString());
  }

  /** Writes the messages completed, handled by `consumer` as they were written. */
  async recordCompleted(tx: Transaction, records: OutboxRecord[], consumer: string): Promise<RecordedMessage[]> {
    const written = await this.record(tx, records, { leased: true, completed: true });
    for (const message of written) message.delivered.push(consumer);
    return written;
  }

  /**
   * Writes the messages completed and runs `effect` on them (their one
   * durable consumer's), in a savepoint of the writer's transaction: both or
   * neither. When the effect fails, the savepoint is rolled back and the
   * transaction goes on as if nothing had been written here.
   */
  async recordHandled(
    tx: Transaction,
    records: OutboxRecord[],
    consumer: string,
    effect: (messages: OutboxMessage[], tx: Transaction) => Promise<void>,
  ): Promise<{ written: RecordedMessage[] } | { failed: unknown }> {
    await tx.$executeRaw`SAVEPOINT outbox_inline`;
    try {
      const written = await this.recordCompleted(tx, records, consumer);
      await effect(written, tx);
      await tx.$executeRaw`RELEASE SAVEPOINT outbox_inline`;
      return { written };
    } catch (failed) {
      await tx.$executeRaw`ROLLBACK TO SAVEPOINT outbox_inline`;
      return { failed };
    }
  }

  /**
   * Takes a lease on messages that are new or whose lease ran out (their
   * dispatcher died), and any leased before `leasedBefore` (their jobs may
   * be gone with a restarted Redis), skipping rows another replica is
   * claiming right now.
   */
  async claimDue(leaseMs: number, limit: number, leasedBefore?: Date): Promise<ClaimedMessage[]> {
    const rows = await this.client.$queryRaw<
      { id: bigint; topic: string; dispatch_count: number; delivered: string[] | null }[]
    >`
      WITH due AS (
        SELECT id FROM outbox_messages
        WHERE completed_at IS NULL
          AND (dispatched_at IS NULL OR dispatched_at < now() - make_interval(secs => ${leaseMs / 1000}) OR dispatched_at < ${leasedBefore ?? null}::timestamptz)
        ORDER BY id
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE outbox_messages m
      SET dispatched_at = now(), dispatch_count = m.dispatch_count + 1
      FROM due WHERE m.id = due.id
      RETURNING m.id, m.topic, m.dispatch_count,
        (SELECT array_agg(d.consumer) FROM outbox_deliveries d WHERE d.message_id = m.id) AS delivered`;
    return rows
      .map((r) => ({
        id: r.id.toString(),
        topic: r.topic,
        dispatches: Number(r.dispatch_count),
        delivered: r.delivered ?? [],
      }))
      .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
  }

  /** Gives up this process's lease on messages it could not hand over, for the next sweep to claim at once. */
  async release(messageIds: readonly string[]): Promise<void> {
    if (messageIds.length === 0) return;
    await this.client.$executeRaw`
      UPDATE outbox_messages SET dispatched_at = NULL
      WHERE id = ANY(${messageIds.map(BigInt)}::bigint[]) AND completed_at IS NULL`;
  }

  /**
   * Records that `consumer` handled these messages and runs its effect on
   * the ones it had not handled yet, in id order, all in one transaction:
   * the effect's rows and the "handled" marks commit together or not at all.
   * Returns how many messages were new to the consumer.
   */
  async deliverOnce(
    messageIds: readonly string[],
    consumer: string,
    effect: (messages: OutboxMessage[], tx: Transaction) => Promise<void>,
  ): Promise<number> {
    return this.db.transaction(async (tx) => {
      // the marks and the messages they mark, in one statement
      const rows = await tx.$queryRaw<MessageRow[]>`
        WITH fresh AS (
          INSERT INTO outbox_deliveries (message_id, consumer)
          SELECT id, ${consumer} FROM unnest(${messageIds.map(BigInt)}::bigint[]) AS id
          ON CONFLICT DO NOTHING
          RETURNING message_id)
        SELECT m.id, m.topic, m.organization_id, m.workspace_id, m.payload, m.audit_record_id, m.created_at
        FROM outbox_messages m
        -- by the primary key: the planner cannot size the CTE, and as a join it may scan the whole table
        WHERE m.id = ANY(ARRAY(SELECT message_id FROM fresh))
        ORDER BY m.id`;
      if (rows.length > 0) await effect(rows.map(toMessage), tx);
      return rows.length;
    });
  }

  /**
   * For messages whose topic has this one durable consumer: handling them is
   * completing them. The completion mark is the "handled" mark, set in the
   * effect's transaction, so no delivery rows and no later completion check
   * (which a busy pool pays per message). A message completed already (a
   * re-dispatch after a lost lease) is skipped.
   */
  async deliverAndComplete(
    messageIds: readonly string[],
    effect: (messages: OutboxMessage[], tx: Transaction) => Promise<void>,
  ): Promise<number> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.$queryRaw<MessageRow[]>`
        UPDATE outbox_messages m SET completed_at = now()
        WHERE m.id = ANY(${messageIds.map(BigInt)}::bigint[]) AND m.completed_at IS NULL
        RETURNING m.id, m.topic, m.organization_id, m.workspace_id, m.payload, m.audit_record_id, m.created_at`;
      rows.sort(byId);
      if (rows.length > 0) await effect(rows.map(toMessage), tx);
      return rows.length;
    });
  }

  /** The messages, in id order, for a live consumer: read, nothing marked. */
  async read(messageIds: readonly string[]): Promise<OutboxMessage[]> {
    const rows = await this.client.$queryRaw<MessageRow[]>`
      SELECT m.id, m.topic, m.organization_id, m.workspace_id, m.payload, m.audit_record_id, m.created_at
      FROM outbox_messages m WHERE m.id = ANY(${messageIds.map(BigInt)}::bigint[]) ORDER BY m.id`;
    return rows.map(toMessage);
  }

  /** Marks the messages done whose every listed consumer has handled them. */
  async completeIfDelivered(messageIds: readonly string[], consumers: readonly string[]): Promise<void> {
    if (messageIds.length === 0) return;
    await this.client.$executeRaw`
      UPDATE outbox_messages m SET completed_at = now()
      WHERE m.id = ANY(${messageIds.map(BigInt)}::bigint[]) AND m.completed_at IS NULL
        AND (SELECT count(*) FROM outbox_deliveries d WHERE d.message_id = m.id AND d.consumer = ANY(${consumers}::text[])) >= ${consumers.length}`;
  }
}

type MessageRow = {
  id: bigint;
  topic: string;
  organization_id: string | null;
  workspace_id: string | null;
  payload: unknown;
  audit_record_id: string | null;
  created_at: Date;
};

function toMessage(row: MessageRow): OutboxMessage {
  return storedMessage({
    id: row.id,
    topic: row.topic,
    organizationId: row.organization_id,
    workspaceId: row.workspace_id,
    payload: row.payload,
    auditRecordId: row.audit_record_id,
    createdAt: row.created_at,
  });
}

/** bigint ids in ascending order (Array.sort's default compares them as strings) */
function byId(a: { id: bigint }, b: { id: bigint }): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
