import type { PublicEvent } from '@aileron/outbox';
import { slackMessage } from './slack-message';

export const WEBHOOK_FORMATS = ['json', 'slack'] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

/** The request body for one event in the endpoint's format; the signature covers exactly this string. */
export function renderBody(format: string, event: PublicEvent): string {
  return format === 'slack' ? JSON.stringify(slackMessage(event)) : JSON.stringify(event);
}
