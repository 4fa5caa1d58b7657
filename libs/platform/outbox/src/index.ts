export * from './outbox-message';
export { OutboxService, OUTBOX_DELIVER_JOB } from './outbox.service';
export type { InPlace } from './outbox.service';
export { OutboxRepository } from './outbox.repository';
export { OutboxModule } from './outbox.module';
export { toPublicEvent, eventId } from './public-event';
export type { PublicEvent } from './public-event';
