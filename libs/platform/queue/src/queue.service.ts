import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { EnqueueOptions, JOB_QUEUE, JobQueue } from './job';
import { JobRegistry } from './job-registry';

@Injectable()
export class QueueService implements OnApplicationShutdown {
  constructor(
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    private readonly registry: JobRegistry,
  ) {}

  async enqueue(name: string, payload: unknown, options: EnqueueOptions): Promise<void> {
    if (!this.registry.has(name)) throw new Error(`no processor is registered for job "${name}"`);
    await this.queue.enqueue(name, payload, options);
  }

  /** Starts this process's workers for every registered job. */
  startWorkers(): Promise<void> {
    return this.queue.startWorkers(this.registry.all());
  }

  ping(): Promise<boolean> {
    return this.queue.ping();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.queue.close();
  }
}
