import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { EnqueueOptions, JOB_QUEUE, JobQueue } from './job';
import { JobRegistry } from './job-registry';

@Injectable()
export class QueueService implements OnApplicationShutdown {
  private readonly whileWorking: (() => void)[] = [];

  constructor(
    @Inject(JOB_QUEUE) private readonly queue: JobQueue,
    private readonly registry: JobRegistry,
  ) {}

  async enqueue(name: string, payload: unknown, options: EnqueueOptions): Promise<void> {
    if (!this.registry.has(name)) throw new Error(`no processor is registered for job "${name}"`);
    await this.queue.enqueue(name, payload, options);
  }

  /** Starts this process's workers for every registered job, then what runs beside them. */
  async startWorkers(): Promise<void> {
    await this.queue.startWorkers(this.registry.all());
    for (const started of this.whileWorking.splice(0)) started();
  }

  /**
   * `started` runs once this process's workers have started: a domain's
   * upkeep of its jobs (finding those a restarted Redis lost) runs where its
   * jobs run, not in every process that loads the module (a CLI command).
   */
  onWorkersStarted(started: () => void): void {
    this.whileWorking.push(started);
  }

  ping(): Promise<boolean> {
    return this.queue.ping();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.queue.close();
  }
}
