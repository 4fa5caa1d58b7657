export { WebhooksModule } from './webhooks.module';
export { WebhooksService } from './webhooks.service';
export { QuietOrganizations } from './quiet-organizations';
export {
  WebhookDeliveryService,
  WEBHOOK_DELIVER_JOB,
  WEBHOOK_CONSUMER,
  WEBHOOK_ATTEMPTS,
} from './webhook-delivery.service';
export { matchesEvent, matchesWorkspace, EVENT_FILTER } from './domain/event-filter';
export { slackMessage } from './domain/slack-message';
export type { SlackMessage, SlackBlock } from './domain/slack-message';
export { renderBody, WEBHOOK_FORMATS } from './domain/formats';
export type { WebhookFormat } from './domain/formats';
export { pauseReason } from './domain/endpoint-health';
export type { PausePolicy, FailureState } from './domain/endpoint-health';
