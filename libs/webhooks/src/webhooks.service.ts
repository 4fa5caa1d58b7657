import { randomBytes, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { AccessService, describePrincipal, OrgScope, Principal } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService, isUniqueViolation, Keyset, Transaction } from '@aileron/database';
import { ConflictError, NotFoundError, ValidationError } from '@aileron/errors';
import { KeyProvider, ROOT_KEYS } from '@aileron/keys';
import { checkOutboundUrl, outboundPolicyOf, OutboundUrlRefusedError } from '@aileron/net';
import { OutboxService, PublicEvent } from '@aileron/outbox';
import { matchesWorkspace, takesPersonalNotification } from './domain/event-filter';
import type { WebhookFormat } from './domain/formats';
import {
  WebhookAttemptRecord,
  WebhookDeliveryRecord,
  WebhookEndpointRecord,
  WebhooksRepository,
} from './webhooks.repository';

export interface NewWebhook {
  name: string;
  url: string;
  events: string[];
  workspace?: string;
  format: WebhookFormat;
  secret?: string;
}

export interface WebhookChanges {
  events?: string[];
  enabled?: boolean;
  format?: WebhookFormat;
}

/** An endpoint with its workspace filter as a slug, for display. */
export type WebhookEndpoint = WebhookEndpointRecord & { workspaceSlug: string | null };

export type WebhookDelivery = WebhookDeliveryRecord & { attemptLog: WebhookAttemptRecord[] };

/**
 * Completes a personal notification at the moment it is sent: adds what only
 * its person may hold (a one-time link), so the credential is made per attempt
 * and never rests in the outbox, a job or the audit log. null: nothing to send
 * any more (the request was decided meanwhile).
 */
export type NotificationCompleter = (event: PublicEvent) => Promise<Record<string, unknown> | null>;

const ENDPOINT_PAGE = 200;

/** The sealed secret is bound to its endpoint: a sealed value copied onto another row does not open. */
export function secretAad(organizationId: string, endpointId: string): string {
  return `aileron/webhook/${organizationId}/${endpointId}`;
}

/**
 * The organisation's webhook endpoints. Every change is an outbox message
 * (`webhook.created`, …) of the same transaction, so it is audited with the
 * change and other endpoints hear about it.
 */
@Injectable()
export class WebhooksService {
  constructor(
    private readonly db: DatabaseService,
    private readonly repository: WebhooksRepository,
    private readonly access: AccessService,
    private readonly outbox: OutboxService,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private readonly notifications = new Map<string, NotificationCompleter>();
  private readonly directedTypes = new Set<string>();

  /** Declares an event type a personal notification (see takesPersonalNotification); set by the domain that owns it. */
  addNotification(type: string, complete: NotificationCompleter): void {
    if (this.notifications.has(type)) throw new Error(`notification "${type}" registered twice`);
    this.notifications.set(type, complete);
  }

  notification(type: string): NotificationCompleter | undefined {
    return this.notifications.get(type);
  }

  /**
   * Declares an event type directed: it goes to the endpoints its message
   * names in `channels` (see addressedTo), whatever their filters, and to no
   * other. Set by the domain that writes its messages, which alone decides
   * where they go (an approval route's channels).
   */
  addDirected(type: string): void {
    if (this.directedTypes.has(type) || this.notifications.has(type))
      throw new Error(`event type "${type}" declared directed twice, or also personal`);
    this.directedTypes.add(type);
  }

  directed(type: string): boolean {
    return this.directedTypes.has(type);
  }

  /** The organisation's endpoints of these names, enabled or not: what a route may name as its channels. */
  async endpointsNamed(
    scope: OrgScope,
    names: readonly string[],
  ): Promise<{ name: string; workspaceId: string | null }[]> {
    const wanted = new Set(names);
    const found: { name: string; workspaceId: string | null }[] = [];
    if (wanted.size === 0) return found;
    // an organisation has a handful of endpoints: read them a page at a time rather than add a query
    for (let after: { createdAt: Date; id: string } | undefined; ; ) {
      const page = await this.repository.list(scope, { take: ENDPOINT_PAGE, ...(after ? { after } : {}) });
      for (const e of page) if (wanted.has(e.name)) found.push({ name: e.name, workspaceId: e.workspaceId });
      const last = page[page.length - 1];
      if (!last || page.length < ENDPOINT_PAGE || found.length === wanted.size) return found;
      after = { createdAt: last.createdAt, id: last.id };
    }
  }

  /** How many endpoints would carry a personal notification of this type for the workspace now. */
  async notificationChannels(scope: OrgScope, workspaceId: string, type: string): Promise<number> {
    const endpoints = await this.db.transaction((tx) => this.repository.subscribers(scope, workspaceId, tx));
    return endpoints.filter(
      (endpoint) => matchesWorkspace(endpoint.workspaceId, workspaceId) && takesPersonalNotification(endpoint, type),
    ).length;
  }

  /** A new endpoint; its signing secret is returned here once (generated unless given) and never again. */
  async create(
    principal: Principal,
    scope: OrgScope,
    input: NewWebhook,
  ): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    // the workspace first: another tenant's slug is a 404 whatever the URL
    const workspace = input.workspace
      ? await this.access.workspace(principal, input.workspace, 'webhook.manage')
      : null;
    this.checkPersonal(input);
    await this.checkUrl(input.url);
    const secret = input.secret ?? `whsec_${randomBytes(32).toString('base64url')}`;
    const id = randomUUID();
    const actor = describePrincipal(principal);
    try {
      const endpoint = await this.db.transaction(async (tx) => {
        const created = await this.repository.create(
          scope,
          {
            id,
            workspaceId: workspace?.workspaceId ?? null,
            name: input.name,
            url: input.url,
            secret: this.root.wrap(Buffer.from(secret, 'utf8'), secretAad(scope.organizationId, id)),
            events: input.events,
            format: input.format,
            createdBy: actor,
          },
          tx,
        );
        await this.announce(tx, scope, 'webhook.created', created, workspace?.workspaceSlug ?? null, actor);
        return created;
      });
      return { endpoint: { ...endpoint, workspaceSlug: workspace?.workspaceSlug ?? null }, secret };
    } catch (error) {
      if (isUniqueViolation(error))
        throw new ConflictError('WEBHOOK_NAME_TAKEN', `A webhook named "${input.name}" already exists`);
      throw error;
    }
  }

  async list(scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<WebhookEndpoint[]> {
    return this.withSlugs(scope, await this.repository.list(scope, page));
  }

  async get(scope: OrgScope, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.repository.get(scope, id);
    if (!endpoint) throw new NotFoundError('webhook', id, 'WEBHOOK_NOT_FOUND');
    return (await this.withSlugs(scope, [endpoint]))[0]!;
  }

  async update(principal: Principal, scope: OrgScope, id: string, changes: WebhookChanges): Promise<WebhookEndpoint> {
    const actor = describePrincipal(principal);
    const updated = await this.db.transaction(async (tx) => {
      const endpoint = await this.repository.update(scope, id, changes, tx);
      if (!endpoint) return null;
      this.checkPersonal(endpoint); // throwing rolls the change back
      if (Object.keys(changes).length > 0)
        await this.announce(tx, scope, 'webhook.updated', endpoint, null, actor, {
          changed: Object.keys(changes).sort(),
        });
      return endpoint;
    });
    if (!updated) throw new NotFoundError('webhook', id, 'WEBHOOK_NOT_FOUND');
    return (await this.withSlugs(scope, [updated]))[0]!;
  }

  async remove(principal: Principal, scope: OrgScope, id: string): Promise<void> {
    const actor = describePrincipal(principal);
    const removed = await this.db.transaction(async (tx) => {
      const endpoint = await this.repository.get(scope, id, tx);
      if (!endpoint || !(await this.repository.delete(scope, id, tx))) return false;
      await this.announce(tx, scope, 'webhook.deleted', endpoint, null, actor);
      return true;
    });
    if (!removed) throw new NotFoundError('webhook', id, 'WEBHOOK_NOT_FOUND');
  }

  /** Ends a pause: deliveries of new events start again (the ones refused while paused are not re-sent). */
  async resume(principal: Principal, scope: OrgScope, id: string): Promise<WebhookEndpoint> {
    const actor = describePrincipal(principal);
    const endpoint = await this.db.transaction(async (tx) => {
      const before = await this.repository.get(scope, id, tx);
      if (!before) return null;
      if (await this.repository.resume(scope, id, tx)) {
        await this.announce(tx, scope, 'webhook.resumed', before, null, actor, { paused_reason: before.pausedReason });
      }
      return this.repository.get(scope, id, tx);
    });
    if (!endpoint) throw new NotFoundError('webhook', id, 'WEBHOOK_NOT_FOUND');
    return (await this.withSlugs(scope, [endpoint]))[0]!;
  }

  async deliveries(
    scope: OrgScope,
    id: string,
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<WebhookDelivery[]> {
    if (!(await this.repository.get(scope, id))) throw new NotFoundError('webhook', id, 'WEBHOOK_NOT_FOUND');
    return this.repository.deliveries(scope, id, page);
  }

  /** The message every change records: what changed and who did it, never the URL (it may carry a token) nor the secret. */
  async announce(
    tx: Transaction,
    scope: OrgScope,
    topic: string,
    endpoint: WebhookEndpointRecord,
    workspaceSlug: string | null,
    actor: string,
    extra: Record<string, unknown> = {},
  ): Promise<void> {
    await this.outbox.record(tx, {
      topic,
      organizationId: scope.organizationId,
      payload: {
        webhook: endpoint.id,
        name: endpoint.name,
        host: hostOf(endpoint.url),
        events: endpoint.events,
        format: endpoint.format,
        enabled: endpoint.enabled,
        ...(workspaceSlug ? { workspace_filter: workspaceSlug } : {}),
        ...extra,
        actor,
      },
    });
  }

  private async withSlugs(scope: OrgScope, endpoints: WebhookEndpointRecord[]): Promise<WebhookEndpoint[]> {
    const slugs = await this.repository.workspaceSlugs(
      scope,
      endpoints.flatMap((e) => (e.workspaceId ? [e.workspaceId] : [])),
    );
    return endpoints.map((e) => ({ ...e, workspaceSlug: e.workspaceId ? (slugs.get(e.workspaceId) ?? null) : null }));
  }

  /** A Slack channel is shared: a credential meant for one person must not be posted there. */
  private checkPersonal(endpoint: { events: readonly string[]; format: string }): void {
    const personal = endpoint.events.filter((type) => this.notifications.has(type));
    if (endpoint.format !== 'json' && personal.length > 0) {
      throw new ValidationError([
        {
          path: 'body.format',
          message: `${personal.join(', ')} carries a one-time credential for one person and is delivered in the json format only`,
        },
      ]);
    }
  }

  private async checkUrl(url: string): Promise<void> {
    try {
      await checkOutboundUrl(url, outboundPolicyOf(this.config));
    } catch (error) {
      if (error instanceof OutboundUrlRefusedError)
        throw new ValidationError([{ path: 'body.url', message: error.message }]);
      throw error;
    }
  }
}

export function hostOf(url: string): string {
  return URL.canParse(url) ? new URL(url).host : '';
}
