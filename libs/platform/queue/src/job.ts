import type { z } from 'zod';

export interface EnqueueOptions {
  /** Deterministic id: adding a job whose id is already queued is a no-op. */
  jobId: string;
  attempts?: number;
  /** first retry delay; doubles each attempt */
  backoffMs?: number;
  delayMs?: number;
}

export interface JobContext {
  jobId: string;
  /** 1 on the first run */
  attempt: number;
}

/**
 * A job processor. The same object runs inside the control plane (embedded
 * mode) and in apps/worker (BullMQ), so a job behaves the same in both.
 * Names are `domain.action` (`outbox.deliver`).
 */
export interface JobProcessor<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly payload: S;
  readonly concurrency?: number;
  handle(payload: z.infer<S>, context: JobContext): Promise<void>;
}

export interface JobQueue {
  enqueue(name: string, payload: unknown, options: EnqueueOptions): Promise<void>;
  /** begin processing the registered jobs in this process */
  startWorkers(processors: readonly JobProcessor[]): Promise<void>;
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export const JOB_QUEUE = Symbol('JOB_QUEUE');

export const DEFAULT_ATTEMPTS = 8;
export const DEFAULT_BACKOFF_MS = 1_000;
