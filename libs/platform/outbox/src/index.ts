export * from './outbox-message';
export { OutboxService, OUTBOX_DELIVER_JOB } from './outbox.service';
export { OutboxModule } from './outbox.module';
export { toPublicEvent, eventId } from './public-event';
export type { PublicEvent } from './public-event';
