export * from './job';
export * from './job-registry';
export * from './queue.service';
export * from './queue.module';
export { InProcessQueue } from './in-process.queue';
export { BullMqQueue } from './bullmq.queue';
