import { Global, Module } from '@nestjs/common';
import { RedisService } from '@aileron/redis';
import { BullMqQueue } from './bullmq.queue';
import { InProcessQueue } from './in-process.queue';
import { JOB_QUEUE, JobQueue } from './job';
import { JobRegistry } from './job-registry';
import { QueueService } from './queue.service';

/** BullMQ where Redis is configured (RedisModule), in-process otherwise. */
@Global()
@Module({
  providers: [
    {
      provide: JOB_QUEUE,
      inject: [RedisService],
      useFactory: (redis: RedisService): JobQueue => (redis.configured ? new BullMqQueue(redis) : new InProcessQueue()),
    },
    JobRegistry,
    QueueService,
  ],
  exports: [QueueService, JobRegistry],
})
export class QueueModule {}
