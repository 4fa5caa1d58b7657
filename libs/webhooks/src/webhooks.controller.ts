import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, OrgScope, Principal, TenantScope } from '@aileron/auth';
import { createdAtKey, legacyPageView, ListCursor, PageQuery, pageQuery, Route, withLegacyKey } from '@aileron/http';
import {
  createdWebhookView,
  createWebhookBody,
  deliveriesQuery,
  deliveriesView,
  toDeliveryView,
  toWebhookView,
  updateWebhookBody,
  webhookParams,
  webhookView,
  WebhookView,
} from './webhooks.schemas';
import { WebhooksService } from './webhooks.service';

const SIGNING =
  'Each delivery is a POST with `x-aileron-event`, `x-aileron-delivery` (the same on every retry of one delivery), `x-aileron-timestamp` and `x-aileron-signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`; reject timestamps older than 5 minutes. Private, link-local and (in server mode) loopback targets are refused unless UPSTREAM_ALLOW_CIDRS allows them.';

const webhooksPage = legacyPageView(webhookView, 'webhooks');
const webhooksCursor = new ListCursor('webhooks', createdAtKey);

/** `<created_at>|<id>`: the cursors the delivery log gave out before every list had one format. */
function legacyDeliveriesCursor(text: string): { createdAt: Date; id: string } | undefined {
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\|([0-9a-f-]{36})$/.exec(text);
  return match ? createdAtKey.fromParts([match[1], match[2]]) : undefined;
}
const deliveriesCursor = new ListCursor('webhook-deliveries', createdAtKey, legacyDeliveriesCursor);

@Controller()
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Route({
    method: 'POST',
    path: '/v1/webhooks',
    summary: "Send the organisation's events to an HTTPS endpoint (or a Slack incoming webhook)",
    description: `${SIGNING} The secret is returned once, in this answer.`,
    tag: 'webhooks',
    permission: 'webhook.manage',
    tenancy: 'organization',
    body: createWebhookBody,
    response: createdWebhookView,
    status: 201,
    example: {
      body: {
        name: 'approvals-to-ops',
        url: 'https://hooks.example.com/aileron',
        events: ['approval.*'],
        workspace: '{ws}',
      },
    },
  })
  async create(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: z.infer<typeof createWebhookBody>,
  ): Promise<WebhookView & { secret: string }> {
    const { endpoint, secret } = await this.webhooks.create(caller, scope, body);
    return { ...toWebhookView(endpoint), secret };
  }

  @Route({
    method: 'GET',
    path: '/v1/webhooks',
    summary: "The organisation's webhook endpoints and their health, oldest first",
    tag: 'webhooks',
    permission: 'webhook.read',
    tenancy: 'organization',
    query: pageQuery(),
    response: webhooksPage,
  })
  async list(@TenantScope() scope: OrgScope, @Query() query: PageQuery): Promise<z.infer<typeof webhooksPage>> {
    const rows = await this.webhooks.list(scope, webhooksCursor.keyset(query));
    return withLegacyKey(
      webhooksCursor.page(rows, query, (w) => w, toWebhookView),
      'webhooks',
    );
  }

  @Route({
    method: 'GET',
    path: '/v1/webhooks/:id',
    summary: 'One webhook endpoint',
    tag: 'webhooks',
    permission: 'webhook.read',
    tenancy: 'organization',
    params: webhookParams,
    response: webhookView,
    example: { params: { id: '{webhook}' } },
  })
  async get(@TenantScope() scope: OrgScope, @Param() params: z.infer<typeof webhookParams>): Promise<WebhookView> {
    return toWebhookView(await this.webhooks.get(scope, params.id));
  }

  @Route({
    method: 'PATCH',
    path: '/v1/webhooks/:id',
    summary: "Change an endpoint's event filter, format or whether it is enabled",
    description:
      'Disabling stops new deliveries and skips pending ones. A paused endpoint stays paused until `POST /v1/webhooks/{id}/resume`.',
    tag: 'webhooks',
    permission: 'webhook.manage',
    tenancy: 'organization',
    params: webhookParams,
    body: updateWebhookBody,
    response: webhookView,
    example: { params: { id: '{webhook}' }, body: { enabled: false } },
  })
  async update(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof webhookParams>,
    @Body() body: z.infer<typeof updateWebhookBody>,
  ): Promise<WebhookView> {
    const changes = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
    return toWebhookView(await this.webhooks.update(caller, scope, params.id, changes));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/webhooks/:id',
    summary: 'Remove an endpoint and its delivery log',
    tag: 'webhooks',
    permission: 'webhook.manage',
    tenancy: 'organization',
    params: webhookParams,
    status: 204,
    example: { params: { id: '{webhook}' } },
  })
  async remove(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof webhookParams>,
  ): Promise<void> {
    await this.webhooks.remove(caller, scope, params.id);
  }

  @Route({
    method: 'GET',
    path: '/v1/webhooks/:id/deliveries',
    summary: 'The delivery log: newest first, each delivery with every attempt and what the receiver answered',
    tag: 'webhooks',
    permission: 'webhook.read',
    tenancy: 'organization',
    params: webhookParams,
    query: deliveriesQuery,
    response: deliveriesView,
    example: { params: { id: '{webhook}' } },
  })
  async deliveries(
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof webhookParams>,
    @Query() query: z.infer<typeof deliveriesQuery>,
  ): Promise<z.infer<typeof deliveriesView>> {
    const rows = await this.webhooks.deliveries(scope, params.id, deliveriesCursor.keyset(query));
    return withLegacyKey(
      deliveriesCursor.page(rows, query, (d) => d, toDeliveryView),
      'deliveries',
    );
  }

  @Route({
    method: 'POST',
    path: '/v1/webhooks/:id/resume',
    summary: 'Resume an endpoint that was paused because its deliveries kept failing',
    description: 'New events are delivered again; events that occurred while it was paused are not re-sent.',
    tag: 'webhooks',
    permission: 'webhook.manage',
    tenancy: 'organization',
    params: webhookParams,
    response: webhookView,
    example: { params: { id: '{webhook}' } },
  })
  async resume(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof webhookParams>,
  ): Promise<WebhookView> {
    return toWebhookView(await this.webhooks.resume(caller, scope, params.id));
  }
}
