import { Logger } from '@nestjs/common';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';
import { DEFAULT_ATTEMPTS, DEFAULT_BACKOFF_MS, EnqueueOptions, JobProcessor, JobQueue } from './job';

/**
 * Server mode: one BullMQ queue per job name on Redis. BullMQ never closes
 * connections it is given (nor the ones it duplicates), so this class owns and
 * quits every connection it makes.
 */
export class BullMqQueue implements JobQueue {
  private readonly logger = new Logger('BullMqQueue');
  private readonly connection: IORedis;
  private readonly queues = new Map<string, Queue>();
  private readonly workers: Worker[] = [];
  private readonly workerConnections: IORedis[] = [];

  constructor(
    private readonly redisUrl: string,
    private readonly prefix = 'aileron',
  ) {
    this.connection = new IORedis(redisUrl, { maxRetriesPerRequest: null, lazyConnect: false });
    this.connection.on('error', (error) => this.logger.warn(`redis: ${error.message}`));
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
      this.queues.set(name, queue);
    }
    return queue;
  }

  async enqueue(name: string, payload: unknown, options: EnqueueOptions): Promise<void> {
    await this.queue(name).add(name, payload, {
      jobId: options.jobId,
      attempts: options.attempts ?? DEFAULT_ATTEMPTS,
      backoff: { type: 'exponential', delay: options.backoffMs ?? DEFAULT_BACKOFF_MS },
      delay: options.delayMs,
      // completed ids stay a while so a re-dispatch of the same job is a no-op
      removeOnComplete: { age: 24 * 3600, count: 10_000 },
      removeOnFail: { age: 7 * 24 * 3600 },
    });
  }

  async startWorkers(processors: readonly JobProcessor[]): Promise<void> {
    for (const processor of processors) {
      const connection = new IORedis(this.redisUrl, { maxRetriesPerRequest: null });
      connection.on('error', (error) => this.logger.warn(`redis: ${error.message}`));
      this.workerConnections.push(connection);
      const worker = new Worker(
        processor.name,
        async (job) => processor.handle(processor.payload.parse(job.data), { jobId: job.id ?? '', attempt: job.attemptsMade + 1 }),
        { connection, prefix: this.prefix, concurrency: processor.concurrency ?? 4 },
      );
      worker.on('failed', (job, error) =>
        this.logger.warn({ job: processor.name, jobId: job?.id, attempt: job?.attemptsMade, err: error }, 'job failed'),
      );
      worker.on('error', (error) => this.logger.warn(`worker ${processor.name}: ${error.message}`));
      this.workers.push(worker);
    }
    await Promise.all(this.workers.map((w) => w.waitUntilReady()));
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.connection.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.workers.map((w) => w.close()));
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    await Promise.allSettled([this.connection, ...this.workerConnections].map((c) => c.quit()));
  }
}
