import { Logger } from '@nestjs/common';
import { JobFailureLog } from './job-failure-log';
import { DEFAULT_ATTEMPTS, DEFAULT_BACKOFF_MS, EnqueueOptions, JobProcessor, JobQueue } from './job';

const COMPLETED_KEPT = 10_000;

interface PendingJob {
  name: string;
  payload: unknown;
  options: EnqueueOptions;
  attempt: number;
}

/**
 * The embedded mode's queue: jobs run in this process with the same retry and
 * de-duplication rules as BullMQ. It holds no fact of its own: every job comes
 * from a database row (the outbox) that is re-dispatched if the process dies.
 */
export class InProcessQueue implements JobQueue {
  private readonly logger = new Logger('InProcessQueue');
  private readonly failures = new JobFailureLog(this.logger);
  private readonly processors = new Map<string, JobProcessor>();
  /** queued, running and recently completed job ids, as BullMQ keeps them (removeOnComplete) */
  private readonly known = new Set<string>();
  private readonly completed: string[] = [];
  private readonly waiting: PendingJob[] = [];
  private readonly running = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private started = false;
  private closed = false;

  async enqueue(name: string, payload: unknown, options: EnqueueOptions): Promise<void> {
    if (this.closed) throw new Error('queue is closed');
    const key = `${name}:${options.jobId}`;
    if (this.known.has(key)) return;
    this.known.add(key);
    const job: PendingJob = { name, payload, options, attempt: 1 };
    if (options.delayMs) this.later(job, options.delayMs);
    else this.waiting.push(job);
    this.pump();
  }

  async startWorkers(processors: readonly JobProcessor[]): Promise<void> {
    for (const processor of processors) this.processors.set(processor.name, processor);
    this.started = true;
    this.pump();
  }

  async ping(): Promise<boolean> {
    return !this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
  }

  private later(job: PendingJob, delayMs: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.waiting.push(job);
      this.pump();
    }, delayMs);
    timer.unref();
    this.timers.add(timer);
  }

  private pump(): void {
    if (!this.started || this.closed) return;
    for (let i = 0; i < this.waiting.length; ) {
      const job = this.waiting[i]!;
      const processor = this.processors.get(job.name);
      const busy = this.running.get(job.name) ?? 0;
      if (!processor || busy >= (processor.concurrency ?? 4)) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      this.running.set(job.name, busy + 1);
      const run = this.run(processor, job).finally(() => {
        this.inFlight.delete(run);
        this.running.set(job.name, (this.running.get(job.name) ?? 1) - 1);
        this.pump();
      });
      this.inFlight.add(run);
    }
  }

  private async run(processor: JobProcessor, job: PendingJob): Promise<void> {
    const key = `${job.name}:${job.options.jobId}`;
    try {
      const payload = processor.payload.parse(job.payload);
      await processor.handle(payload, { jobId: job.options.jobId, attempt: job.attempt });
      this.completed.push(key);
      if (this.completed.length > COMPLETED_KEPT) this.known.delete(this.completed.shift()!);
    } catch (error) {
      const attempts = job.options.attempts ?? DEFAULT_ATTEMPTS;
      if (job.attempt >= attempts || this.closed) {
        this.known.delete(key);
        this.logger.error(
          { job: job.name, jobId: job.options.jobId, attempt: job.attempt, err: error },
          'job failed for good',
        );
        return;
      }
      const delay = (job.options.backoffMs ?? DEFAULT_BACKOFF_MS) * 2 ** (job.attempt - 1);
      this.failures.attemptFailed(
        { job: job.name, jobId: job.options.jobId, attempt: job.attempt, retryInMs: delay },
        error,
        'job failed, will retry',
      );
      this.later({ ...job, attempt: job.attempt + 1 }, delay);
    }
  }
}
