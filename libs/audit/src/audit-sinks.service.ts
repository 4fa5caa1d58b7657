import { randomBytes, randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { z } from 'zod';
import type { OrgScope, Principal } from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService, isDatabaseUnavailable, Keyset } from '@aileron/database';
import { NotFoundError, ValidationError } from '@aileron/errors';
import { KeyProvider, ROOT_KEYS } from '@aileron/keys';
import {
  checkOutboundUrl,
  outboundPolicyOf,
  OutboundUrlRefusedError,
  postSigned,
  signatureHeaders,
} from '@aileron/net';
import { JobProcessor, JobRegistry, QueueService } from '@aileron/queue';
import { PeriodicTask } from '@aileron/schedule';
import { AuditRepository } from './audit.repository';
import { actorOf, AuditService } from './audit.service';
import { AuditSinkRecord, AuditSinksRepository } from './audit-sinks.repository';
import { toView } from './audit.schemas';

export const AUDIT_STREAM_JOB = 'audit.stream';
const BATCH = 500;
const LEASE_MS = 60_000;
const SEND_TIMEOUT_MS = 10_000;
/** batches one job sends before handing over to a fresh job (fairness between sinks) */
const BATCHES_PER_JOB = 20;
const CATCH_UP_MS = 10_000;
/** how long a replica that missed a bus message may go on with a removed sink (a new one the catch-up finds anyway) */
const ENABLED_TTL_MS = 30_000;

const streamPayload = z.object({ organizationId: z.uuid(), sinkId: z.uuid() });

export class SinkDeliveryError extends Error {
  constructor(readonly summary: string) {
    super(summary);
    this.name = 'SinkDeliveryError';
  }
}

/**
 * SIEM streaming: every record of every chain of the organisation goes to each
 * sink, in chain order, signed (HMAC-SHA256 over timestamp and body). A
 * cursor per (sink, chain) moves only after the sink answered 2xx, and lives
 * in the database, so a crash or restart resumes where delivery stopped:
 * nothing is skipped. A batch that was delivered but whose cursor did not
 * move before a crash is sent again with the same `x-aileron-delivery` id, so
 * the receiver can drop the repeat.
 */
@Injectable()
export class AuditSinksService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('AuditSinks');
  private readonly pending = new Map<string, NodeJS.Timeout>();
  private readonly catchUp = new PeriodicTask({
    name: 'audit sink catch-up',
    everyMs: CATCH_UP_MS,
    run: () => this.enqueueEnabled(),
    logger: this.logger,
  });
  private stopped = false;
  /**
   * Per organisation: its enabled sinks. Every batch of audit records asks,
   * and nearly always the answer is the same (most have none): a query each
   * time took the embedded database from requests for nothing.
   */
  private readonly enabled: SharedCache<string[]>;

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: AuditSinksRepository,
    private readonly records: AuditRepository,
    private readonly audit: AuditService,
    private readonly queue: QueueService,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    jobs: JobRegistry,
    private readonly clock: Clock,
  ) {
    this.enabled = new SharedCache(bus, 'audit-sinks', ENABLED_TTL_MS, clock, { staleIfError: isDatabaseUnavailable });
    const processor: JobProcessor<typeof streamPayload> = {
      name: AUDIT_STREAM_JOB,
      payload: streamPayload,
      concurrency: 4,
      handle: (payload) => this.deliver(payload.organizationId, payload.sinkId),
    };
    jobs.register(processor);
    audit.onAppended((organizationId) => this.soon(organizationId));
  }

  onApplicationBootstrap(): void {
    this.catchUp.start();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await this.catchUp.stop();
    for (const timer of this.pending.values()) clearTimeout(timer);
    this.enabled.close();
  }

  /** A new sink; its HMAC secret is returned once (generated unless given). */
  async create(
    principal: Principal,
    scope: OrgScope,
    input: { name: string; url: string; secret?: string },
  ): Promise<{ sink: AuditSinkRecord; secret: string }> {
    await this.checkUrl(input.url);
    const secret = input.secret ?? `whsec_${randomBytes(32).toString('base64url')}`;
    const id = randomUUID();
    const sink = await this.db.transaction(async (tx) => {
      const created = await this.repository.create(
        scope,
        {
          id,
          name: input.name,
          url: input.url,
          secret: this.root.wrap(Buffer.from(secret), aad(scope, id)),
          createdBy: actorOf(principal),
        },
        tx,
      );
      await this.audit.record(tx, scope, {
        type: 'audit.sink_created',
        actor: actorOf(principal),
        data: { sink: id, name: input.name, host: new URL(input.url).host },
      });
      return created;
    });
    await this.enabled.invalidate(scope.organizationId);
    this.soon(scope.organizationId);
    return { sink, secret };
  }

  list(scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<AuditSinkRecord[]> {
    return this.repository.list(scope, page);
  }

  async remove(principal: Principal, scope: OrgScope, id: string): Promise<void> {
    const removed = await this.db.transaction(async (tx) => {
      if (!(await this.repository.delete(scope, id, tx))) return false;
      await this.audit.record(tx, scope, { type: 'audit.sink_deleted', actor: actorOf(principal), data: { sink: id } });
      return true;
    });
    if (!removed) throw new NotFoundError('audit sink', id, 'AUDIT_SINK_NOT_FOUND');
    await this.enabled.invalidate(scope.organizationId);
  }

  /**
   * Pauses a sink: nothing more is sent (a batch already on its way finishes)
   * until it is resumed. Its cursors stay where they are, so a resumed sink
   * receives every record written meanwhile; nothing is skipped.
   */
  async pause(principal: Principal, scope: OrgScope, id: string): Promise<AuditSinkRecord> {
    const sink = await this.switchTo(principal, scope, id, false);
    await this.enabled.invalidate(scope.organizationId);
    return sink;
  }

  /** Resumes a paused sink: delivery starts again from where it stopped. */
  async resume(principal: Principal, scope: OrgScope, id: string): Promise<AuditSinkRecord> {
    const sink = await this.switchTo(principal, scope, id, true);
    await this.enabled.invalidate(scope.organizationId);
    this.soon(scope.organizationId);
    return sink;
  }

  /** The switch and its audit record in one transaction; asking for the state a sink is already in records nothing. */
  private async switchTo(
    principal: Principal,
    scope: OrgScope,
    id: string,
    enabled: boolean,
  ): Promise<AuditSinkRecord> {
    const sink = await this.db.transaction(async (tx) => {
      if (await this.repository.setEnabled(scope, id, enabled, tx))
        await this.audit.record(tx, scope, {
          type: enabled ? 'audit.sink_resumed' : 'audit.sink_paused',
          actor: actorOf(principal),
          data: { sink: id },
        });
      return this.repository.get(scope, id, tx);
    });
    if (!sink) throw new NotFoundError('audit sink', id, 'AUDIT_SINK_NOT_FOUND');
    return sink;
  }

  /** Sends what the sink has not received yet; throws (and the queue retries with backoff) when the sink fails. */
  async deliver(organizationId: string, sinkId: string): Promise<void> {
    const scope = SystemScopes.organization(organizationId);
    const sink = await this.repository.get(scope, sinkId);
    if (!sink || !sink.enabled) return;
    if (!(await this.repository.claim(scope, sinkId, LEASE_MS))) {
      // another process is sending and may have read the chain heads before our records committed: look again shortly
      await this.enqueue(organizationId, sinkId, `follow-up-${Math.floor(this.clock.now() / 1000)}`, 1000);
      return;
    }
    let sent = 0;
    try {
      const secret = this.root.unwrap(sink.secret, aad(scope, sinkId)).toString('utf8');
      const cursors = await this.repository.cursors(scope, sinkId);
      for (const head of await this.records.heads(scope)) {
        // heads are read after taking the lease: everything committed before it is sent now
        let after = cursors.get(head.chainId) ?? 0;
        while (after < head.seq && sent < BATCHES_PER_JOB) {
          const batch = await this.records.afterCursor(scope, head.chainId, after, BATCH);
          if (batch.length === 0) break;
          const last = batch[batch.length - 1]!.seq;
          await this.send(sink, secret, {
            delivery: `${sinkId}:${head.chainId}:${batch[0]!.seq}-${last}`,
            chain: head.chainId,
            workspace_id: head.workspaceId,
            events: batch.map(toView),
          });
          await this.repository.advance(scope, sinkId, head.chainId, last);
          after = last;
          sent++;
        }
      }
      await this.repository.release(scope, sinkId, { delivered: sent > 0 });
    } catch (error) {
      const summary =
        error instanceof SinkDeliveryError || error instanceof OutboundUrlRefusedError
          ? error.message
          : 'delivery failed';
      await this.repository.release(scope, sinkId, { delivered: sent > 0, error: summary });
      throw new SinkDeliveryError(summary);
    }
    if (sent >= BATCHES_PER_JOB) await this.enqueue(organizationId, sinkId, `more-${this.clock.now()}`);
  }

  /**
   * One signed POST through the same guarded sender as webhooks: the URL is
   * checked again (DNS may have moved since the sink was made) and so is the
   * address every socket connects to, redirects are not followed, and only
   * the status (never the receiver's body) is kept.
   */
  private async send(
    sink: AuditSinkRecord,
    secret: string,
    payload: { delivery: string; chain: string; workspace_id: string | null; events: unknown[] },
  ): Promise<void> {
    const body = JSON.stringify({ sink: sink.id, ...payload });
    const headers = {
      'content-type': 'application/json',
      'x-aileron-delivery': payload.delivery,
      ...signatureHeaders(secret, body, this.clock.now()),
    };
    const outcome = await postSigned(sink.url, headers, body, {
      policy: outboundPolicyOf(this.config),
      timeoutMs: SEND_TIMEOUT_MS,
    });
    if (outcome.error !== null) {
      throw new SinkDeliveryError(
        outcome.status === null
          ? `sink ${hostOf(sink.url)} unreachable: ${outcome.error}`
          : `sink ${hostOf(sink.url)} answered ${outcome.error}`,
      );
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

  /** Coalesces bursts of appends into one delivery job per sink. */
  private soon(organizationId: string): void {
    if (this.pending.has(organizationId)) return;
    const timer = setTimeout(() => {
      this.pending.delete(organizationId);
      void this.kick(SystemScopes.organization(organizationId));
    }, 200);
    timer.unref();
    this.pending.set(organizationId, timer);
  }

  private async kick(scope: OrgScope): Promise<void> {
    if (this.stopped) return;
    try {
      const enabled = await this.enabled.getOrLoad(scope.organizationId, async () =>
        (await this.repository.enabledIds(scope)).map((sink) => sink.id),
      );
      for (const id of enabled) await this.enqueue(scope.organizationId, id, `append-${this.clock.now()}`);
    } catch (error) {
      this.logger.warn({ err: error }, 'could not schedule audit sink delivery; the periodic catch-up will');
    }
  }

  /** Picks up whatever bursts and failures left behind, after restarts too. */
  private async enqueueEnabled(): Promise<void> {
    for (const sink of await this.repository.allEnabled(SystemScopes.system('audit sink catch-up')))
      await this.enqueue(sink.organizationId, sink.id, `catch-up-${Math.floor(this.clock.now() / CATCH_UP_MS)}`);
  }

  /**
   * Job ids say why and when: appends are already coalesced per organisation,
   * follow-ups and catch-ups collapse per time slot, and the lease keeps
   * deliveries to one sink one at a time whatever runs.
   */
  private enqueue(organizationId: string, sinkId: string, why: string, delayMs?: number): Promise<void> {
    return this.queue.enqueue(
      AUDIT_STREAM_JOB,
      { organizationId, sinkId },
      { jobId: `audit-stream-${sinkId}-${why}`, attempts: 8, backoffMs: 1000, ...(delayMs ? { delayMs } : {}) },
    );
  }
}

function aad(scope: OrgScope, sinkId: string): string {
  return `aileron/audit-sink/${scope.organizationId}/${sinkId}`;
}

function hostOf(url: string): string {
  return URL.canParse(url) ? new URL(url).host : '(invalid URL)';
}
