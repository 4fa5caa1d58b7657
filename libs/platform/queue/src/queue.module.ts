import { DynamicModule, Global, Module } from '@nestjs/common';
import { BullMqQueue } from './bullmq.queue';
import { InProcessQueue } from './in-process.queue';
import { JOB_QUEUE, JobQueue } from './job';
import { JobRegistry } from './job-registry';
import { QueueService } from './queue.service';

export function createJobQueue(redisUrl: string | undefined, prefix: string): JobQueue {
  return redisUrl ? new BullMqQueue(redisUrl, prefix) : new InProcessQueue();
}

@Global()
@Module({})
export class QueueModule {
  static forRoot(redisUrl: string | undefined, prefix = 'aileron'): DynamicModule {
    return {
      module: QueueModule,
      providers: [{ provide: JOB_QUEUE, useFactory: () => createJobQueue(redisUrl, prefix) }, JobRegistry, QueueService],
      exports: [QueueService, JobRegistry],
    };
  }
}
