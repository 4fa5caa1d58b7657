import { Logger } from '@nestjs/common';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { RedisService } from '@aileron/redis';
import { JobFailureLog } from './job-failure-log';
import { DEFAULT_ATTEMPTS, DEFAULT_BACKOFF_MS, EnqueueOptions, JobProcessor, JobQueue } from './job';

/**
 * Server mode: one BullMQ queue per job name on Redis, under the
 * installation's prefix. BullMQ never closes connections it is given (nor the
 * ones it duplicates), so this class quits every connection it asks for.
 */
export class BullMqQueue implements JobQueue {
  private readonly logger = new Logger('BullMqQueue');
  private readonly failures = new JobFailureLog(this.logger);
  /** the producer side: no offline queue, so an enqueue while Redis is away fails at once */
  private readonly connection: Redis;
  private readonly queues = new Map<string, Queue>();
  private readonly workers: Worker[] = [];
  private readonly workerConnections: Redis[] = [];

  constructor(private readonly redis: RedisService) {
    this.connection = redis.connection('queue');
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: this.redis.prefix });
      // without a listener BullMQ prints every connection error; the outage is RedisService's to log, a failed add the caller's
      queue.on('error', () => undefined);
      this.queues.set(name, queue);
    }
    return queue;
  }

  /** Throws RedisUnavailableError at once while Redis is away: the outbox row stays and is dispatched again. */
  async enqueue(name: string, payload: unknown, options: EnqueueOptions): Promise<void> {
    await this.redis.run(`queueing job "${name}"`, () =>
      this.queue(name).add(name, payload, {
        jobId: options.jobId,
        attempts: options.attempts ?? DEFAULT_ATTEMPTS,
        backoff: { type: 'exponential', delay: options.backoffMs ?? DEFAULT_BACKOFF_MS },
        delay: options.delayMs,
        // completed ids stay a while so a re-dispatch of the same job is a no-op
        removeOnComplete: { age: 24 * 3600, count: 10_000 },
        removeOnFail: { age: 7 * 24 * 3600 },
      }),
    );
  }

  async startWorkers(processors: readonly JobProcessor[]): Promise<void> {
    for (const processor of processors) {
      // blocking commands wait through an outage; BullMQ reconnects and carries on when Redis is back
      const connection = this.redis.connection('worker');
      this.workerConnections.push(connection);
      const worker = new Worker(
        processor.name,
        async (job) =>
          processor.handle(processor.payload.parse(job.data), { jobId: job.id ?? '', attempt: job.attemptsMade + 1 }),
        { connection, prefix: this.redis.prefix, concurrency: processor.concurrency ?? 4 },
      );
      worker.on('failed', (job, error) => {
        const fields = { job: processor.name, jobId: job?.id, attempt: job?.attemptsMade };
        // the last attempt's failure is said in full: the job gives up
        if (job && job.attemptsMade < (job.opts.attempts ?? 1))
          this.failures.attemptFailed(fields, error, 'job failed, will retry');
        else this.logger.warn({ ...fields, err: error }, 'job failed');
      });
      // connection errors repeat on every reconnect attempt: RedisService logs the outage once
      worker.on('error', (error) => {
        if (this.redis.available) this.logger.warn(`worker ${processor.name}: ${error.message}`);
      });
      this.workers.push(worker);
    }
    // started while Redis is away, the process serves what it can: its workers take jobs once Redis answers
    if (this.redis.available) await Promise.all(this.workers.map((w) => w.waitUntilReady()));
  }

  ping(): Promise<boolean> {
    return this.redis.ping(this.connection);
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.workers.map((w) => w.close()));
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    await Promise.allSettled([this.connection, ...this.workerConnections].map((c) => c.quit()));
  }
}
