/** What a domain records in the outbox, in the same transaction as its change. */
export interface OutboxRecord {
  /** `domain.past-tense` for events (`workspace.created`) */
  topic: string;
  organizationId?: string;
  workspaceId?: string;
  payload: Record<string, unknown>;
  /**
   * Every message is also an audit record of its organisation (its workspace's
   * chain, or the organisation's), written in the same transaction. False
   * when the caller records a richer audit record itself.
   */
  audited?: boolean;
  /**
   * The audit record, written in the same transaction, that holds this
   * event's data (the pool's executions): the row keeps only `rest` and the
   * record's id instead of a second copy of the call, and whoever reads it
   * back gets `payload` rebuilt from the record (`RecordedPayloads`). The
   * record is in the chain of `workspaceId`, else of `organizationId`.
   */
  fromAuditRecord?: { id: string; rest: Record<string, unknown> };
}

/** Appends outbox records to the audit log inside the change's transaction (the audit domain provides it). */
export type AuditJournal = (tx: import('@aileron/database').Transaction, records: OutboxRecord[]) => Promise<void>;

/**
 * The payloads of messages stored as a reference to their audit record
 * (`fromAuditRecord`), by message id, read through `tx` where given (PGlite
 * has one connection, which a transaction holds). A message whose record is
 * gone (audit retention) is left out: it keeps what its row stored. Set once
 * by the audit domain.
 */
export type RecordedPayloads = (
  tx: import('@aileron/database').Transaction | undefined,
  messages: readonly OutboxMessage[],
) => Promise<Map<string, Record<string, unknown>>>;

/** Whose stored events a replay asks for: the workspace, and its slug now (what the records do not hold). */
export interface StoredEventsQuery {
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
}

/**
 * A workspace's events that announce audit records without rows of their own
 * (`OutboxService.idsInPlace`), read back whole from the records, after an id,
 * in id order. Set once by the audit domain.
 */
export type StoredEvents = (workspace: StoredEventsQuery, afterId: bigint, limit: number) => Promise<OutboxMessage[]>;

export interface OutboxMessage extends OutboxRecord {
  id: string;
  createdAt: Date;
}

/**
 * A message as its row holds it (for whoever reads the table): one that
 * announces an audit record carries only the rest of its payload, until
 * OutboxService fills it in from the record.
 */
export function storedMessage(row: {
  id: bigint;
  topic: string;
  organizationId: string | null;
  workspaceId: string | null;
  payload: unknown;
  auditRecordId: string | null;
  createdAt: Date;
}): OutboxMessage {
  const payload = row.payload as Record<string, unknown>;
  return {
    id: row.id.toString(),
    topic: row.topic,
    ...(row.organizationId ? { organizationId: row.organizationId } : {}),
    ...(row.workspaceId ? { workspaceId: row.workspaceId } : {}),
    payload,
    ...(row.auditRecordId ? { fromAuditRecord: { id: row.auditRecordId, rest: payload } } : {}),
    createdAt: row.createdAt,
  };
}

/**
 * `record` with `fields` added, its properties copied as they are: a payload
 * built when first read (an execution's, `announcedExecution`) stays unbuilt,
 * where a spread would build it.
 */
export function withFields<R extends { payload: unknown }, F extends object>(record: R, fields: F): R & F {
  const payload = Object.getOwnPropertyDescriptor(record, 'payload');
  if (!payload?.get) return { ...record, ...fields };
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(record)) if (key !== 'payload') copy[key] = record[key as keyof R];
  Object.defineProperty(copy, 'payload', payload);
  return Object.assign(copy, fields) as R & F;
}

/** A consumer whose handling commits with its "handled" mark: exactly once per message. */
export interface DurableConsumer {
  /** stable name; a message is handled at most once per consumer name */
  readonly name: string;
  readonly topics: readonly string[] | '*';
  readonly transient?: false;
  /**
   * Runs inside the transaction that records the delivery, so its database
   * effects commit exactly once. Effects outside the database (an HTTP call)
   * are at least once: make them idempotent with `message.id`.
   */
  handle(message: OutboxMessage, tx: import('@aileron/database').Transaction): Promise<void>;
  /**
   * Several messages in one transaction, in id order, when the consumer can
   * do better than one `handle` after another (one lookup for the lot).
   */
  handleMany?(messages: OutboxMessage[], tx: import('@aileron/database').Transaction): Promise<void>;
  /**
   * Its effect may run in the transaction that records the message, when it
   * is the topic's one durable consumer: the message is then written already
   * completed, with no hand-over, job or completion of its own (on PGlite,
   * marking a batch completed later cost more than writing it). Only for a
   * consumer whose effect suits any writer's transaction (rows, jobs queued);
   * if it fails there, the message goes the usual way instead.
   */
  readonly inline?: boolean;
  /**
   * For an inline consumer: true when handling these messages would certainly
   * do nothing, known without reading anything (no webhook endpoint in their
   * organisations). They are then written completed at once, without the
   * savepoint and the reads their handling costs. When unsure, false.
   */
  idle?(messages: readonly OutboxRecord[]): boolean;
}

/**
 * A live feed (the console's event stream): each message is handed over
 * once, on its first dispatch, and nothing is marked; completion does not
 * wait for it. A crash can lose a message for it, nothing repeats one (a
 * re-dispatch for another consumer skips it). What a process records itself
 * it hears straight from memory at commit; what the sweep finds, from a read.
 * It writes no rows.
 */
export interface LiveConsumer {
  readonly name: string;
  readonly topics: readonly string[] | '*';
  readonly transient: true;
  /** the messages in id order */
  hear(messages: readonly OutboxMessage[]): Promise<void>;
}

export type OutboxConsumer = DurableConsumer | LiveConsumer;

export function subscribes(consumer: OutboxConsumer, topic: string): boolean {
  return consumer.topics === '*' || consumer.topics.includes(topic);
}
