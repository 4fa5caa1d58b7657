import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import {
  DatabaseService,
  Keyset,
  keysetAfter,
  keysetOrder,
  Prisma,
  Repository,
  isRecordNotFound,
  Transaction,
} from '@aileron/database';

export interface WebhookEndpointRecord {
  id: string;
  organizationId: string;
  /** null: every workspace of the organisation */
  workspaceId: string | null;
  name: string;
  url: string;
  /** sealed by the root key */
  secret: string;
  events: string[];
  format: string;
  enabled: boolean;
  pausedAt: Date | null;
  pausedReason: string | null;
  failingSince: Date | null;
  createdBy: string | null;
  createdAt: Date;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'skipped';

export interface WebhookDeliveryRecord {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  status: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: Date;
  lastAttemptAt: Date | null;
  deliveredAt: Date | null;
}

/** A pending delivery whose next attempt is overdue: its job was lost (a Redis that restarted empty). */
export interface OverdueDelivery {
  id: string;
  organizationId: string;
  endpointId: string;
  eventId: string;
  attempts: number;
}

export interface WebhookAttemptRecord {
  attempt: number;
  status: number | null;
  error: string | null;
  durationMs: number;
  createdAt: Date;
}

@Injectable()
export class WebhooksRepository extends Repository {
  constructor(
    db: DatabaseService,
    private readonly clock: Clock,
  ) {
    super(db);
  }

  create(
    scope: OrgScope,
    data: {
      id: string;
      workspaceId: string | null;
      name: string;
      url: string;
      secret: string;
      events: string[];
      format: string;
      createdBy: string;
    },
    tx: Transaction,
  ): Promise<WebhookEndpointRecord> {
    return tx.webhookEndpoint.create({ data: { organizationId: scope.organizationId, ...data } });
  }

  /** Oldest first, the id breaking ties. */
  list(scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<WebhookEndpointRecord[]> {
    return this.client.webhookEndpoint.findMany({
      where: {
        organizationId: scope.organizationId,
        ...keysetAfter<Prisma.WebhookEndpointWhereInput>(
          ['createdAt', 'id'],
          'asc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      orderBy: keysetOrder<Prisma.WebhookEndpointOrderByWithRelationInput>(['createdAt', 'id'], 'asc'),
      take: page.take,
    });
  }

  get(scope: OrgScope, id: string, tx?: Transaction): Promise<WebhookEndpointRecord | null> {
    return this.use(tx).webhookEndpoint.findFirst({ where: { organizationId: scope.organizationId, id } });
  }

  async update(
    scope: OrgScope,
    id: string,
    data: { events?: string[]; enabled?: boolean; format?: string },
    tx: Transaction,
  ): Promise<WebhookEndpointRecord | null> {
    const { count } = await tx.webhookEndpoint.updateMany({
      where: { organizationId: scope.organizationId, id },
      data,
    });
    return count === 0 ? null : this.get(scope, id, tx);
  }

  async delete(scope: OrgScope, id: string, tx: Transaction): Promise<boolean> {
    return (await tx.webhookEndpoint.deleteMany({ where: { organizationId: scope.organizationId, id } })).count > 0;
  }

  /** Clears the pause and the failure streak; false when the endpoint was not paused. */
  async resume(scope: OrgScope, id: string, tx: Transaction): Promise<boolean> {
    const { count } = await tx.webhookEndpoint.updateMany({
      where: { organizationId: scope.organizationId, id, pausedAt: { not: null } },
      data: { pausedAt: null, pausedReason: null, failingSince: null },
    });
    return count > 0;
  }

  /** Pauses unless already paused; false when another delivery paused it first. */
  async pause(scope: OrgScope, id: string, reason: string, tx: Transaction): Promise<boolean> {
    const { count } = await tx.webhookEndpoint.updateMany({
      where: { organizationId: scope.organizationId, id, pausedAt: null },
      data: { pausedAt: this.clock.date(), pausedReason: reason },
    });
    return count > 0;
  }

  /**
   * Slugs of the organisation's workspaces by id, to show an endpoint's
   * workspace filter by the name people use (read-only, inside the scope).
   */
  async workspaceSlugs(scope: OrgScope, ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.client.workspace.findMany({
      where: { organizationId: scope.organizationId, id: { in: [...new Set(ids)] } },
      select: { id: true, slug: true },
    });
    return new Map(rows.map((r) => [r.id, r.slug]));
  }

  /** Whether any endpoint of the organisation takes events right now (enabled and not paused), as committed. */
  async anyTaking(scope: OrgScope): Promise<boolean> {
    const found = await this.client.webhookEndpoint.findFirst({
      where: { organizationId: scope.organizationId, enabled: true, pausedAt: null },
      select: { id: true },
    });
    return found !== null;
  }

  /** Endpoints that take events of this workspace (or of the organisation itself, for null) right now. */
  subscribers(scope: OrgScope, workspaceId: string | null, tx: Transaction): Promise<WebhookEndpointRecord[]> {
    return tx.webhookEndpoint.findMany({
      where: {
        organizationId: scope.organizationId,
        enabled: true,
        pausedAt: null,
        OR: [{ workspaceId: null }, ...(workspaceId ? [{ workspaceId }] : [])],
      },
    });
  }

  /** Adds a delivery; false when this endpoint already has one for the event (a re-dispatched message). */
  async addDelivery(
    scope: OrgScope,
    data: { id: string; endpointId: string; eventId: string; eventType: string },
    tx: Transaction,
  ): Promise<boolean> {
    const { count } = await tx.webhookDelivery.createMany({
      data: [{ organizationId: scope.organizationId, ...data }],
      skipDuplicates: true,
    });
    return count > 0;
  }

  async delivery(
    scope: OrgScope,
    id: string,
  ): Promise<{ delivery: WebhookDeliveryRecord; endpoint: WebhookEndpointRecord } | null> {
    const row = await this.client.webhookDelivery.findFirst({
      where: { organizationId: scope.organizationId, id },
      include: { endpoint: true },
    });
    if (!row) return null;
    const { endpoint, organizationId: _org, ...delivery } = row;
    return { delivery, endpoint };
  }

  /**
   * Counts an attempt and logs it, moving the delivery to `outcome`; returns
   * the attempt's number, or null when the delivery is gone (its endpoint was
   * deleted meanwhile).
   */
  async recordAttempt(
    scope: OrgScope,
    deliveryId: string,
    attempt: { status: number | null; error: string | null; durationMs: number; outcome: DeliveryStatus },
    tx: Transaction,
  ): Promise<number | null> {
    // the streak's clock: failedSince compares these with failingSince
    const now = this.clock.date();
    let updated: { attempts: number };
    try {
      updated = await tx.webhookDelivery.update({
        where: { organizationId_id: { organizationId: scope.organizationId, id: deliveryId } },
        data: {
          attempts: { increment: 1 },
          status: attempt.outcome,
          lastStatus: attempt.status,
          lastError: attempt.error,
          lastAttemptAt: now,
          sendingRun: null,
          sendingSince: null,
          ...(attempt.outcome === 'delivered' ? { deliveredAt: now } : {}),
        },
        select: { attempts: true },
      });
    } catch (error) {
      if (isRecordNotFound(error)) return null;
      throw error;
    }
    await tx.webhookAttempt.create({
      data: {
        organizationId: scope.organizationId,
        deliveryId,
        attempt: updated.attempts,
        status: attempt.status,
        error: attempt.error,
        durationMs: attempt.durationMs,
        createdAt: now,
      },
    });
    return updated.attempts;
  }

  /**
   * Takes the delivery for one send by `run` (the job sending it): false when
   * it is no longer pending, or another run is sending it and has not been
   * silent longer than `leaseMs` (its process died mid-send). A run takes it
   * again freely: BullMQ runs a job's attempts one after the other.
   */
  async claimSend(scope: OrgScope, deliveryId: string, run: string, leaseMs: number): Promise<boolean> {
    const now = this.clock.now();
    const { count } = await this.client.webhookDelivery.updateMany({
      where: {
        organizationId: scope.organizationId,
        id: deliveryId,
        status: 'pending',
        OR: [{ sendingRun: null }, { sendingRun: run }, { sendingSince: { lt: new Date(now - leaseMs) } }],
      },
      data: { sendingRun: run, sendingSince: new Date(now) },
    });
    return count > 0;
  }

  /**
   * Pending deliveries, across organisations, whose next attempt was due
   * before `dueBefore` (the last attempt, or the creation for none, plus the
   * backoff after that many attempts) and that no run is sending (or its
   * claim is older than `sendingBefore`), in id order after `after`.
   */
  overdue(
    _system: SystemScope,
    query: {
      dueBefore: Date;
      sendingBefore: Date;
      backoffMs: number;
      maxAttempts: number;
      after: string | null;
      limit: number;
    },
  ): Promise<OverdueDelivery[]> {
    const { dueBefore, sendingBefore, backoffMs, maxAttempts, after, limit } = query;
    return this.client.$queryRaw<OverdueDelivery[]>`
      SELECT d.id::text AS "id", d.organization_id::text AS "organizationId", d.endpoint_id::text AS "endpointId", d.event_id AS "eventId", d.attempts
      FROM webhook_deliveries d
      WHERE d.status = 'pending' AND d.attempts < ${maxAttempts}
        AND (${after}::uuid IS NULL OR d.id > ${after}::uuid)
        AND (d.sending_since IS NULL OR d.sending_since < ${sendingBefore})
        AND COALESCE(d.last_attempt_at, d.created_at)
            + CASE WHEN d.attempts = 0 THEN interval '0' ELSE make_interval(secs => ${backoffMs / 1000}::float8 * power(2, d.attempts - 1)) END
            < ${dueBefore}
      ORDER BY d.id
      LIMIT ${limit}`;
  }

  async setStatus(scope: OrgScope, deliveryId: string, status: DeliveryStatus, tx?: Transaction): Promise<void> {
    await this.use(tx).webhookDelivery.updateMany({
      where: { organizationId: scope.organizationId, id: deliveryId },
      data: { status },
    });
  }

  /** Starts the failure streak unless one is running; returns when it started (null: the endpoint is gone). */
  async markFailing(scope: OrgScope, endpointId: string): Promise<Date | null> {
    await this.client.webhookEndpoint.updateMany({
      where: { organizationId: scope.organizationId, id: endpointId, failingSince: null },
      data: { failingSince: this.clock.date() },
    });
    const row = await this.client.webhookEndpoint.findFirst({
      where: { organizationId: scope.organizationId, id: endpointId },
      select: { failingSince: true },
    });
    return row?.failingSince ?? null;
  }

  async markHealthy(scope: OrgScope, endpointId: string): Promise<void> {
    await this.client.webhookEndpoint.updateMany({
      where: { organizationId: scope.organizationId, id: endpointId, failingSince: { not: null } },
      data: { failingSince: null },
    });
  }

  /** Deliveries that failed for good since the streak began: a success would have ended the streak, so they are consecutive. */
  failedSince(scope: OrgScope, endpointId: string, since: Date): Promise<number> {
    return this.client.webhookDelivery.count({
      where: { organizationId: scope.organizationId, endpointId, status: 'failed', lastAttemptAt: { gte: since } },
    });
  }

  /** Newest first, each with its attempts in order. */
  /** Newest first, the id breaking ties. */
  async deliveries(
    scope: OrgScope,
    endpointId: string,
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<(WebhookDeliveryRecord & { attemptLog: WebhookAttemptRecord[] })[]> {
    const rows = await this.client.webhookDelivery.findMany({
      where: {
        organizationId: scope.organizationId,
        endpointId,
        ...keysetAfter<Prisma.WebhookDeliveryWhereInput>(
          ['createdAt', 'id'],
          'desc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      orderBy: keysetOrder<Prisma.WebhookDeliveryOrderByWithRelationInput>(['createdAt', 'id'], 'desc'),
      take: page.take,
      include: {
        attemptLog: {
          orderBy: { attempt: 'asc' },
          select: { attempt: true, status: true, error: true, durationMs: true, createdAt: true },
        },
      },
    });
    return rows.map(({ organizationId: _org, ...row }) => row);
  }
}
