import { createHash } from 'node:crypto';
import { closeSync, fstatSync, open, openSync, readFileSync, rmdirSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { announcedExecution, AuditService, ExecutionRecord } from '@aileron/audit';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService } from '@aileron/database';
import { OutboxService } from '@aileron/outbox';
import { PeriodicTask } from '@aileron/schedule';
import { JournalDirectory } from './journal-directory';

/**
 * One execution record as the journal holds it (a line of its file): written
 * there at once, to the audit log and events in a batch. Its call's fields are
 * an ExecutionRecord's (`@aileron/audit`), built through that one schema; the
 * line stays flat so segments written by an older version still replay.
 */
export interface JournalEntry {
  id: string;
  type: ExecutionRecord['type'];
  time: string;
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
  sessionId: string;
  actor: string;
  server: string;
  tool: string;
  decision: string;
  data: Record<string, unknown>;
}

/** The pool's entry as the one execution shape: it ran remote, for its caller. */
export function entryRecord(entry: JournalEntry): ExecutionRecord {
  return {
    type: entry.type,
    execution_mode: 'remote',
    server: entry.server,
    tool: entry.tool,
    // written by the pool, through the schema (or by an older pool, in its names)
    decision: entry.decision as ExecutionRecord['decision'],
    principal: entry.actor,
    session: entry.sessionId,
    // a denial an older pool journaled had no execution id: the record's own is the call's
    data: { execution_id: entry.id, ...entry.data } as ExecutionRecord['data'],
  };
}

const FLUSH_AT = 500;
/** how often segments of processes that died meanwhile are looked for (besides at start) */
const TAKEOVER_EVERY_MS = 30_000;

/**
 * Execution records leave the call's critical path but are never lost: each
 * is appended to a local journal file before the call is answered (a write to
 * the OS, which survives the process dying), and a batch writer moves them to
 * the audit chain and the outbox in one transaction, then drops the journal
 * segment. After a crash the segments left behind are replayed, at the next
 * start or by another process sharing the data directory (JournalDirectory:
 * each process writes only its own, and takes over only a dead one's);
 * records carry their ids, so a batch that had committed is not chained twice.
 *
 * A call still running when its process dies never gets its end record. So
 * that whoever replays the journal can tell, the newest segment always holds
 * every call that has started and not ended: each new segment begins with a
 * copy of their `execution.started` records (already chained, or in the batch
 * being written: the copies are skipped as repeats). The replay ends each of
 * them with an `execution.failed`.
 */
@Injectable()
export class ExecutionJournal implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('ExecutionJournal');
  private readonly directory: JournalDirectory;
  private readonly batchMs: number;
  /** the pause in records a due batch waits for */
  private readonly quietMs: number;
  /** the Clock's time of the last record appended */
  private lastRecordAt = 0;
  /** checks for the pause a due batch waits for */
  private quietTimer: NodeJS.Timeout | undefined;
  /** directories taken over from dead processes whose records are not in the audit log yet */
  private readonly claimed = new Set<string>();
  private readonly sweeper = new PeriodicTask({
    name: 'execution journal take-over',
    everyMs: TAKEOVER_EVERY_MS,
    run: () => this.takeOver(),
    logger: this.logger,
  });
  private sweeping: Promise<void> = Promise.resolve();
  private segment = 0;
  private fd: number | null = null;
  private batch: JournalEntry[] = [];
  /** started and not ended, by execution id: carried into each new segment */
  private readonly running = new Map<string, JournalEntry>();
  /** when the pending batch falls due, and then its last chance: written then with or without a next call */
  private timer: NodeJS.Timeout | undefined;
  /** when the pending batch is due (read from the Clock, so a test can move it) */
  private dueAt = Infinity;
  private flushing: Promise<void> = Promise.resolve();
  /** the next segment's file while it is created off the thread, and once it is, its descriptor */
  private prepared: { segment: number; fd: number | null; created: Promise<void> } | undefined;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly db: DatabaseService,
    private readonly audit: AuditService,
    private readonly outbox: OutboxService,
    private readonly clock: Clock,
  ) {
    this.directory = new JournalDirectory(join(config.dataDir, 'pool', 'journal'));
    this.batchMs = config.pool.auditBatchMs;
    this.quietMs = config.pool.auditQuietMs;
  }

  async onApplicationBootstrap(): Promise<void> {
    this.directory.open();
    this.segment = this.clock.now();
    await this.takeOver();
    this.sweeper.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.sweeper.stop();
    // a take-over the MCP admission asked for may still be under way
    await this.sweeping;
    await this.flush();
    const prepared = this.prepared;
    await prepared?.created;
    if (prepared && this.prepared === prepared && prepared.fd !== null) {
      this.prepared = undefined;
      closeSync(prepared.fd);
      rmSync(this.path(prepared.segment), { force: true }); // created for records that never came
    }
    try {
      rmdirSync(this.directory.own); // only when empty: a segment whose batch failed stays for whoever takes it over
    } catch {
      // not empty, or already gone
    }
  }

  /** Replays what dead processes left (and what an earlier attempt could not write yet). */
  takeOver(): Promise<void> {
    this.sweeping = this.sweeping.then(async () => {
      for (const dir of this.directory.claimOrphans()) this.claimed.add(dir);
      for (const dir of [...this.claimed]) {
        let replayed = 0;
        let ended = 0;
        try {
          const files = this.directory.segments(dir);
          for (const [index, file] of files.entries()) {
            const records = readRecords(file);
            // only the newest segment knows every call that was still running (see above)
            const failures = index === files.length - 1 ? endUnfinished(records, this.clock.date()) : [];
            if (records.length > 0) await this.write([...records, ...failures], { replay: true });
            unlinkSync(file);
            replayed += records.length;
            ended += failures.length;
          }
          this.directory.drop(dir);
          this.claimed.delete(dir);
          if (replayed > 0)
            this.logger.log({
              msg: 'replayed execution records a stopped process left',
              records: replayed,
              unfinished_calls: ended,
            });
        } catch (error) {
          this.logger.error({
            msg: 'could not replay execution records yet; will retry',
            err: error instanceof Error ? error.message : String(error),
          });
        }
      }
    });
    return this.sweeping;
  }

  append(record: JournalEntry): void {
    const execution = typeof record.data.execution_id === 'string' ? record.data.execution_id : undefined;
    const start = record.type === 'execution.started';
    if (execution !== undefined && !start) this.running.delete(execution);
    writeSync(this.openSegment(), `${JSON.stringify(record)}\n`);
    // running once journaled: a start that could not be written never ran (its call is refused, not forwarded)
    if (execution !== undefined && start) this.running.set(execution, record);
    this.batch.push(record);
    const now = this.clock.now();
    this.lastRecordAt = now;
    if (this.batch.length >= FLUSH_AT) void this.flush();
    else if (now >= this.dueAt && this.running.size === 0) {
      // On the embedded database the batch's statements block the thread, and
      // whatever answer arrives meanwhile waits for them: a due batch waits for
      // a moment when no call waits for its answer, and no call came for a
      // moment (`quietMs`): an agent calling in a tight loop sends its next
      // request right after this answer, which would meet the batch. Its
      // pauses, or an interval more (below), are when the batch is written
      // (docs/pool.md § Performance: the sequential calls the batches held up).
      this.flushWhenQuiet();
    } else if (record.type === 'execution.started' && now >= this.dueAt + this.batchMs) {
      // calls keep overlapping for a whole interval more: the batch goes right
      // after this call's request leaves, while the proxy waits for the answer
      this.flushSoon();
    } else if (!this.timer) {
      this.dueAt = now + this.batchMs;
      this.timer = setTimeout(() => this.due(), this.batchMs);
    }
  }

  /** The interval is over: written once no call waits and none came for a moment, at the latest an interval later. */
  private due(): void {
    this.timer = setTimeout(() => void this.flush(), this.batchMs);
    if (this.running.size === 0) this.flushWhenQuiet();
  }

  /** Written once no call waits for its answer and no record came for `quietMs`. */
  private flushWhenQuiet(): void {
    if (this.quietTimer) return;
    if (this.quietMs === 0) return this.flushSoon();
    const check = (): void => {
      this.quietTimer = undefined;
      const quiet = this.clock.now() - this.lastRecordAt;
      if (this.running.size > 0) return; // a call waits: its end asks again
      if (quiet >= this.quietMs) void this.flush();
      else this.quietTimer = setTimeout(check, this.quietMs - quiet);
    };
    check();
  }

  private flushSoon(): void {
    this.dueAt = Infinity;
    setImmediate(() => void this.flush());
  }

  /** Resolves once everything appended so far is in the audit log (tests, shutdown). */
  async flush(): Promise<void> {
    if (this.quietTimer) clearTimeout(this.quietTimer);
    this.quietTimer = undefined;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.dueAt = Infinity;
    const records = this.batch;
    if (records.length === 0) return this.flushing;
    this.batch = [];
    const fd = this.fd;
    const segment = this.segment;
    // later records go to a new segment, so this one can go once its batch commits
    this.fd = null;
    this.segment = Math.max(this.clock.now(), segment + 1);
    if (this.running.size > 0)
      writeSync(this.openSegment(), [...this.running.values()].map((r) => `${JSON.stringify(r)}\n`).join(''));
    else this.prepare(this.segment);
    const previous = this.flushing;
    this.flushing = (async () => {
      await previous;
      try {
        await this.write(records, { replay: false });
        if (fd !== null) closeSync(fd);
        unlinkSync(this.path(segment));
      } catch (error) {
        // the segment stays on disk; the next start replays it
        if (fd !== null) closeSync(fd);
        this.logger.error({
          msg: 'execution records not written yet; kept in the journal',
          records: records.length,
          err: error instanceof Error ? error.message : String(error),
        });
      }
    })();
    return this.flushing;
  }

  /**
   * A live batch is new to the chain: it has never been written, and if its
   * transaction fails it stays in its segment for the next start. Only a
   * replayed segment may hold records that did commit (the process died
   * before dropping it), so only a replay asks which ids the chain holds.
   */
  private async write(records: JournalEntry[], options: { replay: boolean }): Promise<void> {
    const byWorkspace = new Map<string, JournalEntry[]>();
    for (const record of records) {
      const list =
        byWorkspace.get(record.workspaceId) ?? byWorkspace.set(record.workspaceId, []).get(record.workspaceId)!;
      list.push(record);
    }
    const lists = [...byWorkspace.values()];
    await this.db.transaction(async (tx) => {
      // A live batch is new by construction; where no durable consumer wants its events, they are stored in
      // their records, not as rows of their own (a quarter of the batch's cost: docs/events.md § Executions),
      // with ids for every workspace's reserved at once
      const entries = lists.map((list) => list.map(entryRecord));
      const inPlace = options.replay
        ? undefined
        : lists.map((list, at) => list.map((r, i) => announced(r, entries[at]![i]!)));
      const reserved = inPlace && (await this.outbox.idsInPlace(tx, inPlace));
      for (const [at, list] of lists.entries()) {
        const first = list[0]!;
        const scope = SystemScopes.workspace(first.organizationId, {
          id: first.workspaceId,
          slug: first.workspaceSlug,
        });
        const placed = reserved?.[at];
        const written = await this.audit.recordNew(
          tx,
          scope,
          list.map((r, i) => {
            const record = entries[at]![i]!;
            return {
              id: r.id,
              type: record.type,
              occurredAt: new Date(r.time),
              source: 'pool' as const,
              actor: r.actor,
              principal: record.principal,
              executionMode: record.execution_mode,
              server: record.server,
              tool: record.tool,
              decision: record.decision,
              sessionId: record.session,
              data: record.data,
            };
          }),
          options.replay ? { replay: true } : { replay: false, eventIds: placed?.ids },
        );
        if (inPlace && placed) {
          this.outbox.announcedInPlace(
            tx,
            inPlace[at]!,
            placed,
            written.map((w) => w.recordedAt),
          );
          continue;
        }
        // each event references its record rather than carry the call a second time
        const fresh = new Set(written.map((w) => w.id));
        const events =
          inPlace?.[at] ?? list.flatMap((r, i) => (fresh.has(r.id) ? [announced(r, entries[at]![i]!)] : []));
        if (events.length > 0) await this.outbox.record(tx, ...events);
      }
    });
  }

  private openSegment(): number {
    if (this.fd === null) {
      const prepared = this.prepared;
      this.prepared = undefined;
      this.fd =
        prepared?.segment === this.segment && prepared.fd !== null
          ? prepared.fd
          : openSync(this.path(this.segment), 'a', 0o600);
    }
    return this.fd;
  }

  /**
   * Creates the segment's file on the thread pool, for the next record to find
   * open: creating a file waits for the file system's journal (0.1–0.7 ms
   * here while the database writes), and the next record is a call's start,
   * on its way to the server. A record that comes first opens the same file
   * itself. An empty segment is never the last word on running calls: it is
   * prepared only when none is running, and the next start is written to it.
   */
  private prepare(segment: number): void {
    const path = this.path(segment);
    let created!: () => void;
    const prepared = { segment, fd: null as number | null, created: new Promise<void>((r) => (created = r)) };
    this.prepared = prepared;
    open(path, 'a', 0o600, (error, fd) => {
      created();
      if (error) return; // the next record opens it itself
      if (this.prepared === prepared) {
        prepared.fd = fd;
        return;
      }
      // Not taken: a record opened the same file meanwhile (in use, or written and flushed since), or this
      // open came after that segment's batch committed and its file was deleted, and created it again, empty
      // (a callback of the event loop: a failure here must not end the process, and leaves at most an empty file)
      try {
        const emptyAndPast = segment !== this.segment && fstatSync(fd).size === 0;
        closeSync(fd);
        if (emptyAndPast) unlinkSync(path);
      } catch {
        // closed or removed already
      }
    });
  }

  private path(segment: number): string {
    return join(this.directory.own, `${String(segment).padStart(16, '0')}.jsonl`);
  }
}

/** A record's event, announcing it: its payload is the record's, built when first read. */
function announced(r: JournalEntry, record: ExecutionRecord) {
  return announcedExecution(
    { topic: r.type, organizationId: r.organizationId, workspaceId: r.workspaceId, audited: false },
    record,
    { workspace: r.workspaceSlug, actor: r.actor, occurredAt: new Date(r.time) },
    r.id,
  );
}

function readRecords(file: string): JournalEntry[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as JournalEntry];
      } catch {
        return []; // the line being written when the process died
      }
    });
}

/**
 * The calls of a dead process's newest segment that started and never ended:
 * each gets its `execution.failed`, with an id made from its start's, so a
 * replay that is itself interrupted and repeated records it once.
 */
export function endUnfinished(records: JournalEntry[], now: Date): JournalEntry[] {
  const started = new Map<string, JournalEntry>();
  for (const record of records) {
    const execution = record.data.execution_id;
    if (typeof execution !== 'string') continue;
    if (record.type === 'execution.started') started.set(execution, record);
    else started.delete(execution);
  }
  return [...started.values()].map((start) => ({
    ...start,
    id: derivedId(`execution.failed/${start.id}`),
    type: 'execution.failed' as const,
    time: now.toISOString(),
    data: {
      ...(start.data.instance !== undefined ? { instance: start.data.instance } : {}),
      ...(start.data.version !== undefined ? { version: start.data.version } : {}),
      ...(start.data.approval_id !== undefined ? { approval_id: start.data.approval_id } : {}),
      execution_id: start.data.execution_id,
      error: 'the control plane process serving the call stopped before the call ended',
    },
  }));
}

/** A UUID (version 5's layout) derived from a name: the same name, the same id. */
function derivedId(name: string): string {
  const hash = createHash('sha256').update(name).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
