export * from './outbox-message';
export { OutboxService, OUTBOX_DELIVER_JOB } from './outbox.service';
export { OutboxModule } from './outbox.module';
