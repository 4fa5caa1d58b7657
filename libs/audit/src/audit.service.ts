import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { OrgScope, Principal, WorkspaceScope } from '@aileron/auth';
import { describePrincipal } from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { publicKeyFromX, signEd25519, verifyEd25519 } from '@aileron/crypto';
import { DatabaseService, Keyset, storableJson, storableText, Transaction } from '@aileron/database';
import { fieldIssues, FieldIssue, ValidationError } from '@aileron/errors';
import { SigningKeysService } from '@aileron/keys';
import { OutboxMessage, OutboxRecord, OutboxService, StoredEventsQuery } from '@aileron/outbox';
import { DeadlineSweep } from '@aileron/schedule';
import { AuditFilters, AuditRepository, ChainHead } from './audit.repository';
import {
  AuditSource,
  ChainedRecord,
  chainRecords,
  checkpointSigningInput,
  recordHasher,
  ChainVerifier,
  CheckpointRecord,
  UnchainedRecord,
  VerifyResult,
} from './domain/chain';
import { executionEventOf, executionEventPayload } from './domain/execution-record';
import { checkGatewayEvent, GatewayEvent, MAX_BATCH } from './domain/gateway-event';
import { CallCounts, RecordedCall, recordedCallOf } from './domain/recorded-call';

/** What a domain records: the chain, sequence and hashes are the log's business. */
export interface AuditEntry {
  /** the event's own id (idempotency for gateways); generated when absent */
  id?: string;
  /** `domain.past-tense`: `policy.updated`, `secret.read`, `execution.succeeded` */
  type: string;
  occurredAt?: Date;
  source?: AuditSource;
  /** who did it: `user:<id>`, `token:<id>`, `gateway:<id>`, `system` */
  actor?: string | null;
  /** on whose behalf a call ran (executions) */
  principal?: string | null;
  executionMode?: 'local' | 'remote' | null;
  server?: string | null;
  tool?: string | null;
  decision?: string | null;
  sessionId?: string | null;
  /** never a secret value: the log is read by auditors and streamed out */
  data?: Record<string, unknown>;
}

export interface IngestResult {
  accepted: number;
  duplicates: number;
  rejected: { index: number; id: string | null; code: string; reason: string; errors: FieldIssue[] }[];
}

const VERIFY_PAGE = 2_000;
const SWEEP_MS = 5_000;
/** how long a chain another replica appended to (and died before its checkpoint) may wait for one from this replica */
const SWEEP_BACKSTOP_MS = 30_000;

/** A batch held ids the chain already had: roll back and chain again without them. */
class RepeatedEvents extends Error {}

/** The caller's principal as an audit actor. */
export function actorOf(principal: Principal): string {
  return describePrincipal(principal);
}

/**
 * The tamper-evident audit log: one hash chain per workspace (and one per
 * organisation for organisation-wide changes), signed checkpoints, search,
 * export and verification. Domains call `record(tx, …)` inside the
 * transaction of the change itself, so a change and its record commit or
 * fail together.
 */
const RETENTION = SystemScopes.system('audit retention sweep');
const CHECKPOINTS = SystemScopes.system('audit checkpoint sweep');
const ANNOUNCED = SystemScopes.system('events read back from their audit records');

@Injectable()
export class AuditService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Audit');
  /** asks the database while this replica appends, and once a backstop when idle */
  private readonly sweeper: DeadlineSweep;
  private lastRetentionAt = 0;
  private lastAppendAt = Number.NEGATIVE_INFINITY;
  private readonly appended = new Set<(organizationId: string) => void>();

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: AuditRepository,
    private readonly keys: SigningKeysService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly outbox: OutboxService,
    private readonly clock: Clock,
  ) {
    // every event a domain announces is an audit record of the same transaction
    outbox.useAuditJournal((tx, records) => this.journal(tx, records));
    // an execution's event is stored as a reference to its record: read back from the record
    outbox.useRecordedPayloads((tx, messages) => this.announcedPayloads(tx, messages));
    // and an event that has no row at all is read from the record that keeps its id
    outbox.useStoredEvents((workspace, afterId, limit) => this.storedEvents(workspace, afterId, limit));
    // a chain this replica appends to waits at most auditCheckpointSeconds (plus one sweep) for its
    // checkpoint; one appended by a replica that died first, at most the backstop more
    const every = Math.min(SWEEP_MS, config.auditCheckpointSeconds * 1000);
    this.sweeper = new DeadlineSweep({
      name: 'audit sweep',
      everyMs: every,
      backstopMs: SWEEP_BACKSTOP_MS,
      look: async () => {
        await this.sweep();
        // while records come in, their chains fall due in turn: look again at the next tick
        const appending = this.clock.now() - this.lastAppendAt < config.auditCheckpointSeconds * 1000 + every;
        return appending ? new Date(this.clock.now() + every) : null;
      },
      logger: this.logger,
      clock,
    });
  }

  onApplicationBootstrap(): void {
    this.sweeper.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.sweeper.stop();
  }

  /** Called after records of an organisation commit (sinks stream them). */
  onAppended(listener: (organizationId: string) => void): void {
    this.appended.add(listener);
  }

  /** Appends to the scope's chain inside the caller's transaction. */
  async record(tx: Transaction, scope: OrgScope, ...entries: AuditEntry[]): Promise<ChainedRecord[]> {
    return this.append(tx, scope, chainOf(scope), entries);
  }

  private async append(
    tx: Transaction,
    scope: OrgScope,
    chain: Chain,
    entries: AuditEntry[],
  ): Promise<ChainedRecord[]> {
    const head = await this.repository.lockHead(tx, scope, chain.chainId, chain.workspaceId);
    const now = this.clock.date();
    const records = chainRecords(
      head,
      entries.map((entry) => unchained(scope, chain, entry, now)),
    );
    await this.repository.append(tx, scope, records);
    this.afterCommit(scope.organizationId);
    return records;
  }

  /**
   * Appends entries that carry their own ids: for writers that may replay a
   * batch after a crash (the pool's execution journal). With `replay` only
   * the ids the chain does not hold yet are appended; without it the ids are
   * new by construction, and a repeat fails the batch rather than be skipped.
   * `eventIds` (only without `replay`, one per entry) are the events that
   * announce the records without outbox rows of their own (`OutboxService.idsInPlace`).
   */
  async recordNew(
    tx: Transaction,
    scope: OrgScope,
    entries: (AuditEntry & { id: string })[],
    options: { replay: false; eventIds?: readonly string[] } | { replay: true },
  ): Promise<ChainedRecord[]> {
    const chain = chainOf(scope);
    const head = await this.repository.lockHead(tx, scope, chain.chainId, chain.workspaceId);
    const existing = options.replay
      ? await this.repository.existingIds(
          tx,
          scope,
          chain.chainId,
          entries.map((e) => e.id),
        )
      : new Set<string>();
    const fresh = entries.filter((e) => !existing.has(e.id));
    if (fresh.length === 0) return [];
    const now = this.clock.date();
    const records = chainRecords(
      head,
      fresh.map((entry) => unchained(scope, chain, entry, now)),
    );
    await this.repository.append(tx, scope, records, options.replay ? {} : { eventIds: options.eventIds });
    this.afterCommit(scope.organizationId);
    return records;
  }

  /** Appends in a transaction of its own; fails if the record cannot be written. */
  recordNow(scope: OrgScope, ...entries: AuditEntry[]): Promise<ChainedRecord[]> {
    return this.db.transaction((tx) => this.record(tx, scope, ...entries));
  }

  private async journal(tx: Transaction, records: OutboxRecord[]): Promise<void> {
    const byChain = new Map<string, { scope: OrgScope; chain: Chain; entries: AuditEntry[] }>();
    for (const record of records) {
      const organizationId = record.organizationId!;
      // the message names the workspace by id; its chain is all the record needs
      const chain: Chain = record.workspaceId
        ? { chainId: record.workspaceId, workspaceId: record.workspaceId }
        : { chainId: organizationId, workspaceId: null };
      const group =
        byChain.get(chain.chainId) ??
        byChain
          .set(chain.chainId, { scope: SystemScopes.organization(organizationId), chain, entries: [] })
          .get(chain.chainId)!;
      // the chain is the workspace's: its slug (which may change) adds nothing to the record
      const { actor, workspace: _workspace, ...data } = record.payload;
      group.entries.push({
        type: record.topic,
        actor: typeof actor === 'string' ? actor : 'system',
        source: 'api',
        data,
      });
    }
    for (const { scope, chain, entries } of byChain.values()) await this.append(tx, scope, chain, entries);
  }

  /** The payloads of events that announce their audit record (`announcedExecution`), rebuilt from the records. */
  private async announcedPayloads(
    tx: Transaction | undefined,
    messages: readonly OutboxMessage[],
  ): Promise<Map<string, Record<string, unknown>>> {
    const refs = messages.map((m) => ({
      organizationId: m.organizationId!,
      chainId: m.workspaceId ?? m.organizationId!,
      id: m.fromAuditRecord!.id,
    }));
    const records = await this.repository.recordsById(ANNOUNCED, refs, tx);
    const byRef = new Map(records.map((r) => [`${r.chainId}/${r.id}`, r]));
    const payloads = new Map<string, Record<string, unknown>>();
    messages.forEach((message, i) => {
      const record = byRef.get(`${refs[i]!.chainId}/${refs[i]!.id}`);
      if (record) payloads.set(message.id, executionEventOf(record, message.fromAuditRecord!.rest));
    });
    return payloads;
  }

  /** A workspace's events stored in their records (`event_id`), whole, as `announcedExecution` gave them. */
  private async storedEvents(workspace: StoredEventsQuery, afterId: bigint, limit: number): Promise<OutboxMessage[]> {
    const records = await this.repository.announcedAfter(
      SystemScopes.organization(workspace.organizationId),
      workspace.workspaceId,
      afterId,
      limit,
    );
    return records.map((record) => ({
      id: record.eventId.toString(),
      topic: record.type,
      organizationId: record.organizationId,
      workspaceId: workspace.workspaceId,
      audited: false,
      createdAt: record.recordedAt,
      payload: executionEventOf(record, { workspace: workspace.workspaceSlug }),
    }));
  }

  /** A gateway's batch: good events are chained in arrival order, bad ones rejected one by one, repeats skipped. */
  async ingest(scope: WorkspaceScope, gateway: Principal, events: unknown[]): Promise<IngestResult> {
    if (events.length > MAX_BATCH)
      throw new ValidationError([{ path: 'body.events', message: `at most ${MAX_BATCH} events per batch` }]);
    const result: IngestResult = { accepted: 0, duplicates: 0, rejected: [] };
    const good: { index: number; event: GatewayEvent }[] = [];
    const seen = new Set<string>();
    const arrived = this.clock.now();
    const actor = actorOf(gateway);
    events.forEach((raw, index) => {
      const check = checkGatewayEvent(raw, arrived, actor);
      if (!check.ok) {
        const id =
          typeof (raw as { id?: unknown } | null)?.id === 'string'
            ? String((raw as { id: string }).id).slice(0, 64)
            : null;
        // each field at fault as a 400 names it: body.events[3].data.rules[0]
        const errors = fieldIssues(
          'body',
          check.issues.map((issue) => ({ path: ['events', index, ...issue.path], message: issue.message })),
        );
        result.rejected.push({ index, id, code: check.code, reason: check.reason, errors });
      } else if (seen.has(check.event.id)) {
        result.duplicates++;
      } else {
        seen.add(check.event.id);
        good.push({ index, event: check.event });
      }
    });
    if (good.length === 0) return result;
    const chain = chainOf(scope);
    const now = this.clock.date();
    // zod's output is plain JSON already: no copy needed before hashing
    const candidates = good.map(({ event }) => unchained(scope, chain, fromGatewayEvent(event, actor), now, false));
    const executions = new Map(good.flatMap(({ event }) => (event.execution ? [[event.id, event] as const] : [])));
    const append = (dedupe: boolean) =>
      this.db.transaction(async (tx) => {
        // serialise the records while the head's lock is on the wire: the lock is held for less
        const locking = this.repository.lockHead(tx, scope, chain.chainId, chain.workspaceId);
        await new Promise<void>((resolve) => setImmediate(resolve));
        const hashers = candidates.map(recordHasher);
        const head = await locking;
        let fresh = candidates;
        let freshHashers = hashers;
        if (dedupe) {
          const existing = await this.repository.existingIds(
            tx,
            scope,
            chain.chainId,
            candidates.map((c) => c.id),
          );
          const keep = candidates.map((c) => !existing.has(c.id));
          fresh = candidates.filter((_, i) => keep[i]);
          freshHashers = hashers.filter((_, i) => keep[i]);
        }
        const records = chainRecords(head, fresh, freshHashers);
        // retries are rare: the first attempt inserts optimistically and gives up (rolling back) on a repeat
        if (!(await this.repository.append(tx, scope, records, { skipRepeats: !dedupe }))) throw new RepeatedEvents();
        await this.announceExecutions(tx, scope, actor, records, executions);
        return records.length;
      });
    const accepted = await append(false).catch((error: unknown) => {
      if (error instanceof RepeatedEvents) return append(true);
      throw error;
    });
    result.duplicates += candidates.length - accepted;
    result.accepted = accepted;
    this.afterCommit(scope.organizationId);
    return result;
  }

  /**
   * A gateway's tool calls are announced as the pool's are (the same event,
   * from the same shape), so webhook and live-stream subscribers see local
   * calls too; only the records this batch added, in the batch's transaction.
   */
  private async announceExecutions(
    tx: Transaction,
    scope: WorkspaceScope,
    actor: string,
    records: ChainedRecord[],
    executions: ReadonlyMap<string, GatewayEvent>,
  ): Promise<void> {
    const announced = records.flatMap((record) => {
      const execution = executions.get(record.id)?.execution;
      if (!execution) return [];
      return [
        {
          topic: execution.type,
          organizationId: scope.organizationId,
          workspaceId: scope.workspaceId,
          // the record above is the richer audit entry
          audited: false,
          payload: executionEventPayload(execution, {
            workspace: scope.workspaceSlug,
            actor,
            occurredAt: record.occurredAt,
          }),
        },
      ];
    });
    if (announced.length > 0) await this.outbox.record(tx, ...announced);
  }

  /** Newest first, by position in the chain. */
  search(scope: OrgScope, filters: AuditFilters, page: Keyset<number>): Promise<ChainedRecord[]> {
    return this.repository.search(scope, chainOf(scope).chainId, filters, {
      ...(page.after !== undefined ? { beforeSeq: page.after } : {}),
      limit: page.take,
      order: 'desc',
    });
  }

  /** The workspace's tool calls per bucket of time, counted by the database (domain/recorded-call.ts says which records are calls). */
  callCounts(scope: WorkspaceScope, range: { from: Date; to: Date; bucketSeconds: number }): Promise<CallCounts[]> {
    return this.repository.callCounts(scope, chainOf(scope).chainId, range);
  }

  /**
   * At most `limit` of the workspace's recorded calls, in the order they
   * happened; `last` is where the next read continues (null when none was read).
   */
  async recordedCalls(
    scope: WorkspaceScope,
    range: { from: Date; to: Date; after?: { occurredAt: Date; seq: number }; limit: number },
  ): Promise<{ calls: RecordedCall[]; read: number; last: { occurredAt: Date; seq: number } | null }> {
    const rows = await this.repository.calls(scope, chainOf(scope).chainId, range);
    const last = rows[rows.length - 1];
    return {
      calls: rows.map(recordedCallOf).filter((call): call is RecordedCall => call !== null),
      read: rows.length,
      last: last ? { occurredAt: last.occurredAt, seq: last.seq } : null,
    };
  }

  /** Every matching record in chain order, a page at a time: exports of any size in bounded memory. */
  async *stream(scope: OrgScope, filters: AuditFilters): AsyncGenerator<ChainedRecord> {
    const chainId = chainOf(scope).chainId;
    let after = 0;
    for (;;) {
      const page = await this.repository.search(scope, chainId, filters, {
        afterSeq: after,
        limit: 1000,
        order: 'asc',
      });
      yield* page;
      if (page.length < 1000) return;
      after = page[page.length - 1]!.seq;
    }
  }

  checkpoints(scope: OrgScope, page: Keyset<number>): Promise<CheckpointRecord[]> {
    return this.repository.checkpoints(scope, chainOf(scope).chainId, page);
  }

  /**
   * Verifies the chain as far as its head when verification starts. Records
   * are appended while it runs (the head moves in the same statement as each
   * append): reading past that head would take them for records added outside
   * the log. What lies past it is judged at the end, against the head read
   * again after the newest record: a record or checkpoint past that one was not
   * appended through the log.
   */
  async verify(scope: OrgScope): Promise<VerifyResult> {
    const chainId = chainOf(scope).chainId;
    // the head first: every checkpoint and record read after it is at least as new
    const head = await this.repository.head(scope, chainId);
    const [checkpoints, publicKeys] = await Promise.all([
      this.repository.checkpoints(scope, chainId),
      this.keys.publicKeys('audit-checkpoint'),
    ]);
    const verifier = new ChainVerifier(chainId, checkpoints, (kid, message, signature) => {
      const x = publicKeys.get(kid);
      return x !== undefined && verifyEd25519(publicKeyFromX(x), message, signature);
    });
    const through = head?.seq ?? 0;
    let after = 0;
    for (;;) {
      const page = await this.repository.pageBySeq(scope, chainId, after, VERIFY_PAGE, through);
      let going = true;
      for (const record of page) if (!(going = verifier.next(record))) break;
      if (!going || page.length < VERIFY_PAGE) break;
      after = page[page.length - 1]!.seq;
    }
    // in this order: a record appended before the newest was read has moved the head read after it
    const newestSeq = await this.repository.newestSeq(scope, chainId);
    const now = await this.repository.head(scope, chainId);
    return verifier.finish(head ? { seq: head.seq, hash: head.hash } : null, { newestSeq, headSeq: now?.seq ?? 0 });
  }

  /** Signs the chain's newest record if it is not signed yet. */
  async checkpoint(
    head: Pick<ChainHead, 'chainId' | 'organizationId' | 'workspaceId'>,
    kind: CheckpointRecord['kind'] = 'periodic',
  ): Promise<CheckpointRecord | null> {
    // the key is loaded before the transaction: PGlite has one connection, and the transaction holds it
    const ring = await this.keys.ring('audit-checkpoint');
    const scope = SystemScopes.organization(head.organizationId);
    return this.db.transaction(async (tx) => {
      const locked = await this.repository.lockHead(tx, scope, head.chainId, head.workspaceId);
      if (locked.seq === 0 || (kind === 'periodic' && locked.seq <= locked.checkpointSeq)) return null;
      const checkpoint = sign(ring.active, head.chainId, locked.seq, locked.hash, kind);
      await this.repository.writeCheckpoint(tx, scope, head.chainId, checkpoint);
      return checkpoint;
    });
  }

  /**
   * Removes records recorded before the organisation's retention, chain by
   * chain, leaving a signed retention checkpoint on the last removed record so
   * what remains still verifies from there.
   */
  async applyRetention(now = this.clock.date()): Promise<number> {
    let removed = 0;
    for (const organization of await this.repository.organizationsWithRetention(RETENTION)) {
      const scope = SystemScopes.organization(organization.id);
      const cutoff = new Date(now.getTime() - organization.days * 86_400_000);
      for (const head of await this.repository.heads(scope)) {
        const edge = await this.repository.retentionEdge(scope, head.chainId, cutoff);
        if (!edge) continue;
        const ring = await this.keys.ring('audit-checkpoint');
        removed += await this.db.transaction(async (tx) => {
          await this.repository.lockHead(tx, scope, head.chainId, head.workspaceId);
          await this.repository.writeCheckpoint(
            tx,
            scope,
            head.chainId,
            sign(ring.active, head.chainId, edge.seq, edge.hash, 'retention'),
          );
          return this.repository.removeThrough(tx, scope, head.chainId, edge.seq);
        });
      }
    }
    return removed;
  }

  retentionDays(scope: OrgScope): Promise<number | null> {
    return this.repository.retentionDays(scope);
  }

  async setRetentionDays(principal: Principal, scope: OrgScope, days: number | null): Promise<void> {
    await this.db.transaction(async (tx) => {
      await this.repository.setRetentionDays(scope, days, tx);
      await this.record(tx, scope, { type: 'audit.retention_changed', actor: actorOf(principal), data: { days } });
    });
  }

  /** Periodic work of every replica: checkpoints due by time, and retention once an hour. */
  async sweep(): Promise<void> {
    const due = await this.repository.chainsNeedingCheckpoint(
      CHECKPOINTS,
      this.config.auditCheckpointEvery,
      this.config.auditCheckpointSeconds,
      100,
    );
    for (const head of due) await this.checkpoint(head);
    if (this.clock.now() - this.lastRetentionAt > 3600_000) {
      this.lastRetentionAt = this.clock.now();
      await this.applyRetention();
    }
  }

  private afterCommit(organizationId: string): void {
    this.lastAppendAt = this.clock.now();
    this.sweeper.expect(this.clock.date());
    // a record appended inside someone else's transaction is visible only after it commits
    setImmediate(() => {
      for (const listener of this.appended) listener(organizationId);
    });
  }
}

function sign(
  active: { kid: string; key: import('node:crypto').KeyObject },
  chainId: string,
  seq: number,
  hash: string,
  kind: CheckpointRecord['kind'],
): CheckpointRecord {
  return {
    seq,
    hash,
    kind,
    keyId: active.kid,
    signature: signEd25519(active.key, checkpointSigningInput({ chainId, seq, hash, kind })),
  };
}

type Chain = { chainId: string; workspaceId: string | null };

function chainOf(scope: OrgScope): Chain {
  const workspaceId = (scope as Partial<WorkspaceScope>).workspaceId;
  return workspaceId ? { chainId: workspaceId, workspaceId } : { chainId: scope.organizationId, workspaceId: null };
}

function unchained(scope: OrgScope, chain: Chain, entry: AuditEntry, now: Date, copy = true): UnchainedRecord {
  return {
    chainId: chain.chainId,
    organizationId: scope.organizationId,
    workspaceId: chain.workspaceId,
    id: entry.id ?? randomUUID(),
    type: wellFormed(entry.type),
    recordedAt: now,
    occurredAt: entry.occurredAt ?? now,
    source: entry.source ?? 'api',
    actor: wellFormed(entry.actor ?? null),
    principal: wellFormed(entry.principal ?? null),
    executionMode: entry.executionMode ?? null,
    server: wellFormed(entry.server ?? null),
    tool: wellFormed(entry.tool ?? null),
    decision: wellFormed(entry.decision ?? null),
    sessionId: wellFormed(entry.sessionId ?? null),
    // the JSON round trip stores exactly what was hashed (no undefined, no Dates), as jsonb can hold it:
    // an agent's NUL must not fail the batch, keeping its calls and everyone else's in it out of the log
    data: copy
      ? storableJson(JSON.parse(JSON.stringify(entry.data ?? {})) as Record<string, unknown>)
      : (entry.data ?? {}),
  };
}

/** Text as PostgreSQL will store it: hash what will be stored, or the record would not verify. */
function wellFormed<T extends string | null>(value: T): T {
  return (value === null ? value : storableText(value)) as T;
}

function fromGatewayEvent(event: GatewayEvent, actor: string): AuditEntry {
  return {
    id: event.id,
    type: event.type,
    occurredAt: new Date(event.time),
    source: 'gateway',
    actor,
    principal: event.principal,
    executionMode: event.execution_mode,
    server: event.server,
    tool: event.tool,
    decision: event.decision,
    sessionId: event.session,
    data: event.data,
  };
}
