import { z } from 'zod';
import { slug } from '@aileron/auth';
import { legacyPageView, pageQuery } from '@aileron/http';
import { EVENT_FILTER } from './domain/event-filter';
import { WEBHOOK_FORMATS } from './domain/formats';
import type { WebhookDelivery, WebhookEndpoint } from './webhooks.service';
import { hostOf } from './webhooks.service';

const eventFilter = z
  .string()
  .max(100)
  .regex(EVENT_FILTER, 'must be an event type (policy.updated) or a domain wildcard (approval.*)');
const events = z
  .array(eventFilter)
  .max(50)
  .transform((list) => [...new Set(list)])
  .describe('event types or `domain.*`; empty or absent: every event');
const format = z.enum(WEBHOOK_FORMATS, { message: `must be one of ${WEBHOOK_FORMATS.join(', ')}` });

export const createWebhookBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048),
    events: events.default([]),
    workspace: slug.optional().describe("only this workspace's events; absent: the whole organisation"),
    format: format.default('json').describe('`json`: the event envelope; `slack`: a Slack incoming-webhook message'),
    secret: z
      .string()
      .min(16)
      .max(256)
      .optional()
      .describe('HMAC signing secret; generated (`whsec_…`) and returned once when absent'),
  })
  .strict();

export const updateWebhookBody = z
  .object({
    events: events.optional(),
    enabled: z.boolean().optional(),
    format: format.optional(),
  })
  .strict();

export const webhookParams = z.object({ id: z.uuid({ message: 'must be a UUID' }) });

export const deliveriesQuery = pageQuery();

export const webhookView = z.object({
  id: z.string(),
  name: z.string(),
  host: z.string().describe('where events go; the full URL may carry credentials and is not shown'),
  workspace: z.string().nullable().describe('the workspace filter; null: every workspace'),
  events: z.array(z.string()),
  format: format,
  enabled: z.boolean(),
  status: z
    .enum(['active', 'failing', 'paused', 'disabled'])
    .describe('`paused`: deliveries failed for too long; `POST …/resume` resumes'),
  paused: z.boolean(),
  paused_at: z.string().nullable(),
  paused_reason: z.string().nullable(),
  failing_since: z.string().nullable().describe('first failure since the last success'),
  created_at: z.string(),
  created_by: z.string().nullable(),
});
export type WebhookView = z.infer<typeof webhookView>;

export const createdWebhookView = webhookView.extend({
  secret: z.string().describe('the signing secret, shown this once'),
});

export const attemptView = z.object({
  attempt: z.number().int(),
  status: z.number().int().nullable().describe('HTTP status; null when there was no answer'),
  error: z.string().nullable(),
  duration_ms: z.number().int(),
  at: z.string(),
});

export const deliveryView = z.object({
  id: z.string().describe('sent as `x-aileron-delivery`'),
  event_id: z.string(),
  event_type: z.string(),
  status: z.enum(['pending', 'delivered', 'failed', 'skipped']),
  attempt_count: z.number().int(),
  last_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  created_at: z.string(),
  last_attempt_at: z.string().nullable(),
  delivered_at: z.string().nullable(),
  attempts: z.array(attemptView),
});
export type DeliveryView = z.infer<typeof deliveryView>;

export const deliveriesView = legacyPageView(deliveryView, 'deliveries');

export function toWebhookView(endpoint: WebhookEndpoint): WebhookView {
  return {
    id: endpoint.id,
    name: endpoint.name,
    host: hostOf(endpoint.url),
    workspace: endpoint.workspaceSlug,
    events: endpoint.events,
    format: endpoint.format === 'slack' ? 'slack' : 'json',
    enabled: endpoint.enabled,
    status: endpoint.pausedAt
      ? 'paused'
      : !endpoint.enabled
        ? 'disabled'
        : endpoint.failingSince
          ? 'failing'
          : 'active',
    paused: endpoint.pausedAt !== null,
    paused_at: endpoint.pausedAt?.toISOString() ?? null,
    paused_reason: endpoint.pausedReason,
    failing_since: endpoint.failingSince?.toISOString() ?? null,
    created_at: endpoint.createdAt.toISOString(),
    created_by: endpoint.createdBy,
  };
}

export function toDeliveryView(delivery: WebhookDelivery): DeliveryView {
  return {
    id: delivery.id,
    event_id: delivery.eventId,
    event_type: delivery.eventType,
    status: delivery.status as DeliveryView['status'],
    attempt_count: delivery.attempts,
    last_status: delivery.lastStatus,
    last_error: delivery.lastError,
    created_at: delivery.createdAt.toISOString(),
    last_attempt_at: delivery.lastAttemptAt?.toISOString() ?? null,
    delivered_at: delivery.deliveredAt?.toISOString() ?? null,
    attempts: delivery.attemptLog.map((a) => ({
      attempt: a.attempt,
      status: a.status,
      error: a.error,
      duration_ms: a.durationMs,
      at: a.createdAt.toISOString(),
    })),
  };
}
