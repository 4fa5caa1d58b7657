import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { z } from 'zod';
import { MESSAGE_BUS, MessageBus } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { DatabaseService, Transaction } from '@aileron/database';
import { JobProcessor, JobRegistry, QueueService } from '@aileron/queue';
import { RedisService, RedisUnavailableError } from '@aileron/redis';
import { DeadlineSweep } from '@aileron/schedule';
import {
  AuditJournal,
  DurableConsumer,
  LiveConsumer,
  OutboxConsumer,
  OutboxMessage,
  OutboxRecord,
  RecordedPayloads,
  StoredEvents,
  StoredEventsQuery,
  subscribes,
  withFields,
} from './outbox-message';
import { ClaimedMessage, OutboxRepository, RecordedMessage } from './outbox.repository';

export const OUTBOX_DELIVER_JOB = 'outbox.deliver';

/** A group of events `idsInPlace` keeps out of the table: their ids, and the durable consumer that had nothing to do with them. */
export interface InPlace {
  readonly ids: readonly string[];
  readonly consumer: string;
}
const LEASE_MS = 60_000;
const BATCH = 200;
/** what a process that does not dispatch (a worker, a CLI command) says after it recorded messages */
const PENDING = 'outbox.pending';
/** sweeps between looks at the database when nothing said there is work: for leases that ran out (a dead process) */
const TICKS_PER_LOOK = 10;

const deliverPayload = z.object({
  consumer: z.string().min(1),
  messages: z
    .array(z.object({ id: z.string().regex(/^\d{1,19}$/), topic: z.string().min(1) }))
    .min(1)
    .max(BATCH),
});

/**
 * The transactional outbox. `record(tx, …)` writes messages with the change
 * that causes them, leased to this process, and after commit hands each
 * subscribed consumer its share as one `outbox.deliver` job; the sweep claims
 * what was left (a lease that ran out: its process died). A crash
 * anywhere loses nothing (the row stays until every consumer has handled it)
 * and duplicates nothing per consumer (outbox_deliveries is written in the
 * consumer's own transaction; where a topic has one durable consumer, as the
 * product's events have, its transaction sets the completion instead). Such a
 * consumer that runs `inline` (webhooks) handles the messages in the
 * recording transaction itself, so they are written completed: on PGlite the
 * later completion of a batch cost more than writing it.
 *
 * Messages travel in batches because a busy workspace produces them in
 * bursts (two execution events per proxied call): one transaction per
 * consumer for the whole batch, instead of that per message. On PGlite every statement runs on the
 * control plane's own thread, so this is what keeps the event pipeline from
 * eating the request path's time.
 */
@Injectable()
export class OutboxService implements OnApplicationShutdown {
  private readonly logger = new Logger('Outbox');
  private readonly consumers = new Map<string, OutboxConsumer>();
  private readonly byTopic = new Map<string, OutboxConsumer[]>();
  /** the sweep, from start() on: set only where this process dispatches (a worker process does not) */
  private sweeper: DeadlineSweep | undefined;
  private unsubscribe: (() => void) | undefined;
  private journal: AuditJournal | undefined;
  private recordedPayloads: RecordedPayloads | undefined;
  private stored: StoredEvents | undefined;
  private readonly watchers: {
    topics: (topic: string) => boolean;
    hook: (topics: readonly string[]) => Promise<void>;
    /** the topics each open transaction recorded so far, which its one hook is told once it commits */
    recorded: WeakMap<Transaction, string[]>;
  }[] = [];
  private redisWasAway = false;
  /** set when Redis comes back: messages leased before then are dispatched again by the next sweep */
  private reclaimLeasedBefore: Date | undefined;
  private readonly stopWatching: () => void;

  constructor(
    private readonly repository: OutboxRepository,
    private readonly queue: QueueService,
    private readonly db: DatabaseService,
    jobs: JobRegistry,
    redis: RedisService,
    private readonly clock: Clock,
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
  ) {
    jobs.register(this.deliverProcessor());
    // A Redis that restarted lost the jobs it held: their messages would wait out
    // their lease. Dispatching them again is safe, each consumer handles a message once.
    this.stopWatching = redis.onChange((available) => {
      if (!available) this.redisWasAway = true;
      else if (this.redisWasAway) {
        this.redisWasAway = false;
        this.reclaimLeasedBefore = this.clock.date();
        this.sweepSoon();
      }
    });
  }

  addConsumer(consumer: OutboxConsumer): void {
    if (this.consumers.has(consumer.name)) throw new Error(`outbox consumer "${consumer.name}" registered twice`);
    this.consumers.set(consumer.name, consumer);
    this.byTopic.clear();
  }

  /**
   * Runs `hook` after every commit that recorded a message of these topics,
   * before that transaction's caller goes on. Every change records its
   * message (it is the audit trail), so state derived from what changed
   * (caches) follows every write by construction, not by each writer
   * remembering to say so.
   */
  afterCommitOf(topics: (topic: string) => boolean, hook: (topics: readonly string[]) => Promise<void>): void {
    this.watchers.push({ topics, hook, recorded: new WeakMap() });
  }

  /** What is announced is audited: set once by the audit domain. */
  useAuditJournal(journal: AuditJournal): void {
    if (this.journal) throw new Error('an audit journal is already set');
    this.journal = journal;
  }

  /** Where the payloads of events stored as a reference to their audit record come from: set once by the audit domain. */
  useRecordedPayloads(source: RecordedPayloads): void {
    if (this.recordedPayloads) throw new Error('a source of recorded payloads is already set');
    this.recordedPayloads = source;
  }

  /** Where events stored in their audit records (`idsInPlace`) are read back from: set once by the audit domain. */
  useStoredEvents(source: StoredEvents): void {
    if (this.stored) throw new Error('a source of stored events is already set');
    this.stored = source;
  }

  /**
   * A workspace's events after `afterId` that are stored in their audit
   * records rather than as rows, in id order, whole: the rest of its history
   * beside the table's rows.
   */
  storedAfter(workspace: StoredEventsQuery, afterId: bigint, limit: number): Promise<OutboxMessage[]> {
    return this.stored ? this.stored(workspace, afterId, limit) : Promise.resolve([]);
  }

  /**
   * Messages read from the table with their whole payloads: those stored as a
   * reference to their audit record get theirs rebuilt from it, in one read
   * (through `tx` where given). For whoever reads the table (the event history).
   */
  async withPayloads(messages: OutboxMessage[], tx?: Transaction): Promise<OutboxMessage[]> {
    const referenced = messages.filter((m) => m.fromAuditRecord);
    if (referenced.length === 0) return messages;
    if (!this.recordedPayloads) throw new Error('messages reference audit records, and nothing reads them');
    const payloads = await this.recordedPayloads(tx, referenced);
    return messages.map((m) => {
      const payload = payloads.get(m.id);
      return payload ? { ...m, payload } : m;
    });
  }

  async record(tx: Transaction, ...records: OutboxRecord[]): Promise<void> {
    // a process that does not dispatch (a CLI command, one shutting down) leaves its messages to the next sweep
    const handOver = this.sweeper?.running === true;
    const leased = await this.write(tx, records, handOver);
    this.afterWriting(tx, records, leased, handOver);
    const audited = records.filter((r) => r.audited !== false && r.organizationId);
    if (this.journal && audited.length > 0) await this.journal(tx, audited);
  }

  /**
   * Ids for events that announce the audit records written beside them in
   * `tx` (`fromAuditRecord`, the pool's executions) and need no row of their
   * own: no durable consumer would do anything with them (`idle`: no webhook
   * endpoint in their organisations) and this process hands its messages over
   * itself. Asked for groups at once (a batch's workspaces), one reservation
   * for them all; a group that needs rows gets undefined (`record` it). The
   * ids come from the outbox's sequence, so each event takes its place in its
   * workspace's history among the others; the caller stores each in its
   * audit record, where a replay finds it (`useStoredEvents`), and calls
   * `announcedInPlace` once the records are written.
   */
  async idsInPlace(
    tx: Transaction,
    groups: readonly (readonly OutboxRecord[])[],
  ): Promise<(InPlace | undefined)[] | undefined> {
    if (this.sweeper?.running !== true || !this.stored) return undefined;
    const consumers = groups.map((records) => {
      if (!records.every((r) => r.fromAuditRecord && r.workspaceId && r.audited === false)) return undefined;
      const inline = this.inlineConsumerOf(records);
      return inline?.idle?.(records) ? inline.name : undefined;
    });
    const count = groups.reduce((sum, records, i) => sum + (consumers[i] ? records.length : 0), 0);
    if (count === 0) return undefined;
    const ids = await this.repository.reserveIds(tx, count);
    let next = 0;
    return groups.map((records, i) => {
      const consumer = consumers[i];
      return consumer ? { ids: ids.slice(next, (next += records.length)), consumer } : undefined;
    });
  }

  /**
   * Events stored in their audit records with the ids `idsInPlace` gave
   * them, each with its record's time: heard live once `tx` commits, as
   * recorded messages are, and handed to no durable consumer (the one there
   * is had nothing to do with them).
   */
  announcedInPlace(
    tx: Transaction,
    records: readonly OutboxRecord[],
    inPlace: InPlace,
    recordedAt: readonly Date[],
  ): void {
    const handled = records.map((record, i) =>
      withFields(record, {
        id: inPlace.ids[i]!,
        createdAt: recordedAt[i]!,
        dispatches: 1,
        delivered: [inPlace.consumer],
        completed: true,
      }),
    );
    this.afterWriting(tx, records, handled, true);
  }

  /** What follows a write once `tx` commits: the hand-over (live consumers hear at once) and the commit hooks. */
  private afterWriting(
    tx: Transaction,
    records: readonly OutboxRecord[],
    leased: RecordedMessage[],
    handOver: boolean,
  ): void {
    // handed over as soon as they commit; if that fails, the sweep takes them once their lease runs out
    if (handOver) {
      this.db.afterCommit(tx, () => {
        void this.dispatch(leased).catch((error: unknown) => {
          this.sweeper?.expect(this.clock.date());
          this.failed(error, 'outbox hand-over failed; the next sweep dispatches these');
        });
      });
    } else {
      // the processes that dispatch sweep at once, instead of at their next look
      this.db.afterCommit(tx, () => this.bus.publish(PENDING, null));
    }
    for (const watcher of this.watchers) {
      const matched = records.map((r) => r.topic).filter(watcher.topics);
      if (matched.length === 0) continue;
      let recorded = watcher.recorded.get(tx);
      if (!recorded) {
        const topics: string[] = [];
        recorded = topics;
        watcher.recorded.set(tx, topics);
        this.db.afterCommit(tx, () => watcher.hook(topics));
      }
      recorded.push(...matched);
    }
  }

  /**
   * Handled in `tx` by their topics' one durable consumer where it runs
   * inline (webhooks, for every product event), else leased to this process
   * (or left to the sweep where it does not dispatch).
   */
  private async write(tx: Transaction, records: OutboxRecord[], handOver: boolean): Promise<RecordedMessage[]> {
    const inline = handOver ? this.inlineConsumerOf(records) : undefined;
    if (inline?.idle?.(records)) {
      // a pool's batch, most of the time: the savepoint and the consumer's read were a tenth of its cost
      return this.repository.recordCompleted(tx, records, inline.name);
    }
    if (inline) {
      const outcome = await this.repository.recordHandled(tx, records, inline.name, effectOf(inline));
      if ('written' in outcome) return outcome.written;
      this.failed(
        outcome.failed,
        `outbox consumer ${inline.name} failed in the writing transaction; handed over instead`,
      );
    }
    return this.repository.record(tx, records, { leased: handOver });
  }

  /** The consumer that is every record's topic's one durable consumer and runs inline, if there is one. */
  private inlineConsumerOf(records: readonly OutboxRecord[]): DurableConsumer | undefined {
    let inline: DurableConsumer | undefined;
    for (const { topic } of records) {
      const sole = this.soleDurableConsumerOf(topic);
      if (!sole?.inline || (inline !== undefined && sole !== inline)) return undefined;
      inline = sole;
    }
    return inline;
  }

  /** Messages by id, in id order: for a consumer that hands one on again (a webhook delivery whose job a restarted Redis lost). */
  async read(messageIds: readonly string[]): Promise<OutboxMessage[]> {
    return this.withPayloads(await this.repository.read(messageIds));
  }

  /** Begin dispatching: the control plane calls this once it is up. */
  start(pollMs: number): void {
    if (this.sweeper) return;
    // What the sweep is for arrives by other means: this process hands its own messages over at commit, and
    // one that does not dispatch says so on the bus. Between those it looks every TICKS_PER_LOOK ticks, for
    // leases that ran out; on PGlite each look is the control plane's own thread running PostgreSQL.
    this.unsubscribe = this.bus.subscribe(PENDING, () => this.sweepSoon());
    this.sweeper = new DeadlineSweep({
      name: 'outbox sweep',
      everyMs: pollMs,
      firstAfterMs: 0,
      backstopMs: pollMs * TICKS_PER_LOOK,
      look: async () => {
        await this.sweep();
        return null;
      },
      clock: this.clock,
      logger: this.logger,
      // Redis away fails every hand-over until it is back: RedisService logs that outage once
      expected: (error) => error instanceof RedisUnavailableError,
    });
    this.sweeper.start();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopWatching();
    this.unsubscribe?.();
    await this.sweeper?.stop();
  }

  /**
   * One pass: dispatch everything whose lease ran out (its writer or
   * dispatcher died) and what was written without one. Exposed for tests and the CLI.
   */
  async sweep(): Promise<number> {
    const leasedBefore = this.reclaimLeasedBefore;
    this.reclaimLeasedBefore = undefined;
    let total = 0;
    try {
      for (;;) {
        const claimed = await this.repository.claimDue(LEASE_MS, BATCH, leasedBefore);
        await this.dispatch(claimed);
        total += claimed.length;
        if (claimed.length < BATCH) return total;
      }
    } catch (error) {
      this.reclaimLeasedBefore ??= leasedBefore;
      throw error;
    }
  }

  /**
   * Hands leased messages to their consumers: one job per durable consumer,
   * in batches of at most BATCH. Live consumers hear messages this process
   * has in memory (it recorded them) at once, without a job or a read.
   */
  private async dispatch(leased: ClaimedMessage[] | RecordedMessage[]): Promise<void> {
    for (let at = 0; at < leased.length; at += BATCH) {
      try {
        await this.dispatchBatch(leased.slice(at, at + BATCH));
      } catch (error) {
        // what may not have gone out is dispatched again by the next sweep, not after its lease: Redis may be back by then
        await this.repository.release(leased.slice(at).map((m) => m.id)).catch(() => undefined);
        throw error;
      }
    }
  }

  private async dispatchBatch(batch: ClaimedMessage[] | RecordedMessage[]): Promise<void> {
    const owed = new Map<string, ClaimedMessage[]>();
    const handled: ClaimedMessage[] = [];
    for (const message of batch) {
      const pending = this.consumersOf(message.topic).filter((c) => !message.delivered.includes(c.name));
      const durable = pending.filter((c) => !c.transient);
      // a live feed hears a message on its first dispatch only: a re-dispatch (a lost lease, a failed webhook) must not repeat it
      const targets = message.dispatches === 1 ? pending : durable;
      if (durable.length === 0) handled.push(message);
      for (const consumer of targets) {
        const list = owed.get(consumer.name);
        if (list) list.push(message);
        else owed.set(consumer.name, [message]);
      }
    }
    // nothing durable waits for these (or every consumer had handled them before a dispatcher died, or as they were written)
    await this.complete(handled.filter((m) => !m.completed));
    for (const [name, messages] of owed) {
      const consumer = this.consumers.get(name)!;
      if (consumer.transient && messages.every(inMemory)) {
        void this.tell(consumer, async () => messages as RecordedMessage[]);
        continue;
      }
      const first = messages[0]!;
      await this.queue.enqueue(
        OUTBOX_DELIVER_JOB,
        { consumer: name, messages: messages.map(({ id, topic }) => ({ id, topic })) },
        // each lease bumps its messages' dispatch count, so (first message, its count) names this hand-over alone
        { jobId: `outbox-${name}-${first.id}.${first.dispatches}` },
      );
    }
  }

  /** A look at the database now, whenever the last one was. */
  private sweepSoon(): void {
    this.sweeper?.lookNow(this.clock.date());
  }

  /** Redis away fails every hand-over until it is back: RedisService logs that outage once, not each of them. */
  private failed(error: unknown, what: string): void {
    if (error instanceof RedisUnavailableError) this.logger.debug(`${what}: ${error.message}`);
    else this.logger.warn({ err: error }, what);
  }

  /** A live consumer misses what it could not hear; nothing is retried for it. */
  private async tell(consumer: LiveConsumer, messages: () => Promise<readonly OutboxMessage[]>): Promise<void> {
    try {
      const list = await messages();
      if (list.length > 0) await consumer.hear(list);
    } catch (error) {
      this.logger.warn({ err: error, consumer: consumer.name }, 'a live feed missed messages');
    }
  }

  /** Asked per message on every hand-over, delivery and completion: worked out once per topic. */
  private consumersOf(topic: string): OutboxConsumer[] {
    let list = this.byTopic.get(topic);
    if (!list) this.byTopic.set(topic, (list = [...this.consumers.values()].filter((c) => subscribes(c, topic))));
    return list;
  }

  private soleDurableConsumerOf(topic: string): DurableConsumer | undefined {
    const durable = this.consumersOf(topic).filter((c): c is DurableConsumer => !c.transient);
    return durable.length === 1 ? durable[0] : undefined;
  }

  private deliverProcessor(): JobProcessor<typeof deliverPayload> {
    return {
      name: OUTBOX_DELIVER_JOB,
      payload: deliverPayload,
      concurrency: 8,
      handle: async ({ consumer: name, messages }) => {
        const consumer = this.consumers.get(name);
        // a consumer removed by a newer release: nothing to do, and nothing to retry
        if (!consumer) return;
        if (consumer.transient) {
          // never retried, never counted for completion: see LiveConsumer
          await this.tell(consumer, () => this.read(messages.map((m) => m.id)));
          return;
        }
        // the usual case: every message of the batch has this consumer as its only durable one
        const sole = messages.every((m) => this.soleDurableConsumerOf(m.topic) === consumer);
        let failed: unknown;
        try {
          await this.deliver(
            consumer,
            messages.map((m) => m.id),
            sole,
          );
        } catch (error) {
          failed = error;
        }
        // what the batch did deliver is done whether or not one of its messages failed
        if (!sole) await this.complete(messages);
        if (failed !== undefined) throw failed;
      },
    };
  }

  private async deliver(consumer: DurableConsumer, ids: string[], sole: boolean): Promise<void> {
    const handle = effectOf(consumer);
    const effect = async (messages: OutboxMessage[], tx: Transaction) =>
      handle(await this.withPayloads(messages, tx), tx);
    const once = (batch: string[]) =>
      sole
        ? this.repository.deliverAndComplete(batch, effect)
        : this.repository.deliverOnce(batch, consumer.name, effect);
    try {
      await once(ids);
    } catch (error) {
      if (ids.length === 1) throw error;
      // One message the consumer cannot handle must not hold back the rest of
      // its batch: each goes on its own, and the job is retried for those that failed.
      let failed: unknown;
      for (const id of ids) {
        try {
          await once([id]);
        } catch (single) {
          failed ??= single;
        }
      }
      if (failed !== undefined) throw failed;
    }
  }

  /** Marks done what every consumer subscribed to its topic has handled: one statement per set of consumers. */
  private async complete(messages: readonly { id: string; topic: string }[]): Promise<void> {
    const bySet = new Map<string, { consumers: string[]; ids: string[] }>();
    for (const message of messages) {
      const consumers = this.consumersOf(message.topic)
        .filter((c) => !c.transient)
        .map((c) => c.name);
      const key = consumers.join('\n');
      const group = bySet.get(key) ?? bySet.set(key, { consumers, ids: [] }).get(key)!;
      group.ids.push(message.id);
    }
    for (const { consumers, ids } of bySet.values()) await this.repository.completeIfDelivered(ids, consumers);
  }
}

function inMemory(message: ClaimedMessage | RecordedMessage): message is RecordedMessage {
  return 'payload' in message;
}

function effectOf(consumer: DurableConsumer): (messages: OutboxMessage[], tx: Transaction) => Promise<void> {
  return async (messages, tx) => {
    if (consumer.handleMany) await consumer.handleMany(messages, tx);
    else for (const message of messages) await consumer.handle(message, tx);
  };
}
