import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { z } from 'zod';
import { DatabaseService, Transaction } from '@aileron/database';
import { JobProcessor, JobRegistry, QueueService } from '@aileron/queue';
import { AuditJournal, OutboxConsumer, OutboxRecord, subscribes } from './outbox-message';
import { OutboxRepository } from './outbox.repository';

export const OUTBOX_DELIVER_JOB = 'outbox.deliver';
const LEASE_MS = 60_000;
const BATCH = 200;

const deliverPayload = z.object({ messageId: z.string().regex(/^\d+$/), topic: z.string().min(1), consumer: z.string().min(1) });

/**
 * The transactional outbox. `record(tx, …)` writes messages with the change
 * that causes them; after commit the dispatcher hands each message to every
 * subscribed consumer as an `outbox.deliver` job. A crash anywhere loses
 * nothing (the row stays until every consumer has handled it) and duplicates
 * nothing per consumer (outbox_deliveries is written in the consumer's own
 * transaction and the job id is deterministic).
 */
@Injectable()
export class OutboxService implements OnApplicationShutdown {
  private readonly logger = new Logger('Outbox');
  private readonly consumers = new Map<string, OutboxConsumer>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private pollMs = 1000;
  private journal: AuditJournal | undefined;

  constructor(
    private readonly repository: OutboxRepository,
    private readonly queue: QueueService,
    db: DatabaseService,
    jobs: JobRegistry,
  ) {
    jobs.register(this.deliverProcessor());
    db.onCommit(() => this.nudge());
  }

  addConsumer(consumer: OutboxConsumer): void {
    if (this.consumers.has(consumer.name)) throw new Error(`outbox consumer "${consumer.name}" registered twice`);
    this.consumers.set(consumer.name, consumer);
  }

  /** What is announced is audited: set once by the audit domain. */
  useAuditJournal(journal: AuditJournal): void {
    if (this.journal) throw new Error('an audit journal is already set');
    this.journal = journal;
  }

  async record(tx: Transaction, ...records: OutboxRecord[]): Promise<void> {
    await this.repository.record(tx, records.map(({ audited: _audited, ...record }) => record));
    const audited = records.filter((r) => r.audited !== false && r.organizationId);
    if (this.journal && audited.length > 0) await this.journal(tx, audited);
  }

  /** Begin dispatching: the control plane calls this once it is up. */
  start(pollMs: number): void {
    this.pollMs = pollMs;
    this.stopped = false;
    this.schedule(0);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.sweeping;
  }

  /** Wake the dispatcher now (after a commit) instead of at the next poll. */
  nudge(): void {
    if (this.stopped || this.timer === undefined) return;
    if (this.sweeping) this.again = true;
    else this.schedule(0);
  }

  /** One pass: dispatch everything due. Exposed for tests and the CLI. */
  async sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const claimed = await this.repository.claimDue(LEASE_MS, BATCH);
      for (const message of claimed) {
        const targets = this.consumersOf(message.topic).filter((c) => !message.delivered.includes(c.name));
        if (targets.length === 0) {
          await this.repository.completeIfDelivered(message.id, this.consumersOf(message.topic).map((c) => c.name));
          continue;
        }
        for (const consumer of targets) {
          await this.queue.enqueue(
            OUTBOX_DELIVER_JOB,
            { messageId: message.id, topic: message.topic, consumer: consumer.name },
            { jobId: `outbox-${message.id}-${consumer.name}` },
          );
        }
      }
      total += claimed.length;
      if (claimed.length < BATCH) return total;
    }
  }

  private consumersOf(topic: string): OutboxConsumer[] {
    return [...this.consumers.values()].filter((c) => subscribes(c, topic));
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.sweeping || this.stopped) return;
    this.again = false;
    this.sweeping = this.sweep()
      .then(() => undefined)
      .catch((error: unknown) => this.logger.warn({ err: error }, 'outbox sweep failed; will retry'))
      .finally(() => {
        this.sweeping = undefined;
      });
    await this.sweeping;
    this.schedule(this.again ? 0 : this.pollMs);
  }

  private deliverProcessor(): JobProcessor<typeof deliverPayload> {
    return {
      name: OUTBOX_DELIVER_JOB,
      payload: deliverPayload,
      concurrency: 8,
      handle: async ({ messageId, topic, consumer: name }) => {
        const consumer = this.consumers.get(name);
        // a consumer removed by a newer release: nothing to do, and nothing to retry
        if (!consumer) return;
        await this.repository.deliverOnce(messageId, name, (message, tx) => consumer.handle(message, tx));
        await this.repository.completeIfDelivered(messageId, this.consumersOf(topic).map((c) => c.name));
      },
    };
  }
}
