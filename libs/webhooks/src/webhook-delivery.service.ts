import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { z } from 'zod';
import type { OrgScope } from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { databaseUnavailableReason, DatabaseService, RetryingLoopLog, Transaction } from '@aileron/database';
import { KeyProvider, ROOT_KEYS } from '@aileron/keys';
import { outboundPolicyOf, postSigned, SendOutcome, signatureHeaders } from '@aileron/net';
import { eventId, OutboxMessage, OutboxService, PublicEvent, toPublicEvent } from '@aileron/outbox';
import { JobContext, JobProcessor, JobRegistry, QueueService } from '@aileron/queue';
import { RedisService, RedisUnavailableError } from '@aileron/redis';
import { PeriodicTask } from '@aileron/schedule';
import { pauseReason, PausePolicy } from './domain/endpoint-health';
import { addressedTo, matchesEvent, matchesWorkspace, takesPersonalNotification } from './domain/event-filter';
import { renderBody } from './domain/formats';
import { QuietOrganizations } from './quiet-organizations';
import { WebhookEndpointRecord, WebhooksRepository } from './webhooks.repository';
import { secretAad, WebhooksService } from './webhooks.service';

export const WEBHOOK_DELIVER_JOB = 'webhooks.deliver';
export const WEBHOOK_CONSUMER = 'webhooks';
/** with the queue's exponential backoff from 1 s: retries over about two minutes */
export const WEBHOOK_ATTEMPTS = 8;
const BACKOFF_MS = 1000;
const SEND_TIMEOUT_MS = 10_000;
/** a receiver that refused this many deliveries in a row is paused, however recent its last success */
const PAUSE_AFTER_FAILED_DELIVERIES = 20;
/** how long a job waits for the consumer's transaction to commit before letting the queue retry */
const COMMIT_WAIT_MS = [50, 100, 200, 400];
/** between tries to record a receiver's answer while the database is away; the last one repeats */
const RECORD_RETRY_MS = [250, 500, 1000, 2000, 5000];
/** how long a delivery the receiver has answered waits for the database before it is left to the queue's retry */
const RECORD_GIVE_UP_MS = 10 * 60_000;
/** a run that claimed a send and said nothing for this long died mid-send: another run may send (longer than any send and its recording) */
const SEND_LEASE_MS = SEND_TIMEOUT_MS + RECORD_GIVE_UP_MS + 60_000;
/** how often the worker looks for deliveries whose job was lost */
const SWEEP_MS = 30_000;
/** how late a delivery's next attempt must be before the sweep takes its job for lost (the queue's own retry comes well before) */
const OVERDUE_MS = 60_000;
const SWEEP_BATCH = 200;
const EVENT_ID_PREFIX = eventId('');
/** the run of the job the fan-out queues; a job the sweep queues again carries a run of its own */
const FIRST_RUN = 'fan-out';
const SWEEP_SCOPE = SystemScopes.system('webhook delivery sweep');

const publicEvent = z.object({
  id: z.string().min(1),
  type: z.string().min(1),
  time: z.string(),
  organization_id: z.string().nullable(),
  workspace_id: z.string().nullable(),
  workspace: z.string().nullable(),
  session: z.string().nullable(),
  execution_mode: z.string().optional(),
  data: z.record(z.string(), z.unknown()),
});

const deliverPayload = z.object({
  organizationId: z.uuid(),
  endpointId: z.uuid(),
  deliveryId: z.uuid(),
  // the event travels with the job: the delivery log keeps only its id and type
  event: publicEvent,
  /** set by the sweep: attempts made before this job, which carries on their count and backoff */
  attemptsBefore: z.number().int().min(0).optional(),
  /** set by the sweep: this job's own run, which must not send while another run is sending */
  run: z.string().min(1).optional(),
});

export class WebhookDeliveryError extends Error {
  constructor(readonly summary: string) {
    super(summary);
    this.name = 'WebhookDeliveryError';
  }
}

/**
 * Fans every outbox message out to the organisation's endpoints and delivers
 * it. The consumer runs in the outbox's delivery transaction: the delivery
 * rows and the message's "handled" mark commit together, so a message adds
 * its deliveries once. Each delivery is one `webhooks.deliver` job, retried
 * with exponential backoff; every attempt is logged. An endpoint that keeps
 * failing is paused, and its remaining deliveries stop.
 */
@Injectable()
export class WebhookDeliveryService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('Webhooks');
  private readonly recordLog = new RetryingLoopLog(this.logger, 'recording a webhook delivery the receiver answered');
  private readonly pausePolicy: PausePolicy;
  /** aborted at shutdown: a delivery waiting to record its answer stops waiting, so the queue can close */
  private readonly closing = new AbortController();
  private readonly sweeper = new PeriodicTask({
    name: 'webhook delivery sweep',
    everyMs: SWEEP_MS,
    run: async () => {
      const queued = await this.sweep();
      // a job that still exists makes its add a no-op, so this counts tries, not sends
      if (queued > 0) this.logger.debug(`handed ${queued} overdue webhook deliveries to the queue again`);
    },
    logger: this.logger,
    // Redis away: RedisService says so once, and the sweep right after its return finds these
    expected: (error) => error instanceof RedisUnavailableError,
  });
  private redisWasAway = false;
  private readonly stopWatching: () => void;

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: WebhooksRepository,
    private readonly webhooks: WebhooksService,
    private readonly queue: QueueService,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly outbox: OutboxService,
    jobs: JobRegistry,
    redis: RedisService,
    quiet: QuietOrganizations,
  ) {
    this.pausePolicy = {
      pauseAfterSeconds: config.webhookPauseAfterSeconds,
      pauseAfterFailedDeliveries: PAUSE_AFTER_FAILED_DELIVERIES,
    };
    const processor: JobProcessor<typeof deliverPayload> = {
      name: WEBHOOK_DELIVER_JOB,
      payload: deliverPayload,
      concurrency: 8,
      handle: (payload, context) => this.deliver(payload, context),
    };
    jobs.register(processor);
    outbox.addConsumer({
      name: WEBHOOK_CONSUMER,
      topics: '*',
      handle: (message, tx) => this.fanOut([message], tx),
      handleMany: (messages, tx) => this.fanOut(messages, tx),
      // its effect is delivery rows and queued jobs: at home in whichever transaction records the event
      inline: true,
      idle: (messages) => quiet.quietFor(messages),
    });
    // where the jobs run, so does the search for those a restarted Redis lost
    queue.onWorkersStarted(() => this.sweeper.start());
    this.stopWatching = redis.onChange((available) => {
      if (!available) this.redisWasAway = true;
      else if (this.redisWasAway) {
        this.redisWasAway = false;
        this.sweeper.runNow();
      }
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.closing.abort();
    this.stopWatching();
    await this.sweeper.stop();
  }

  /**
   * Queues again the deliveries whose next attempt is overdue by a minute:
   * their job is gone (a Redis that restarted empty, or an embedded process
   * that restarted). Each goes under its own job id, so a job that still
   * exists is not doubled; it carries the attempts made so far, so the count
   * and the backoff go on where they were; the event is read again from the
   * outbox. Returns how many it queued. Exposed for tests.
   */
  async sweep(): Promise<number> {
    const now = this.clock.now();
    const query = {
      dueBefore: new Date(now - OVERDUE_MS),
      sendingBefore: new Date(now - SEND_LEASE_MS),
      backoffMs: BACKOFF_MS,
      maxAttempts: WEBHOOK_ATTEMPTS,
      limit: SWEEP_BATCH,
    };
    let queued = 0;
    for (let after: string | null = null; ; ) {
      const due = await this.repository.overdue(SWEEP_SCOPE, { ...query, after });
      if (due.length === 0) return queued;
      const messages = await this.outbox.read(due.map((d) => d.eventId.slice(EVENT_ID_PREFIX.length)));
      const events = new Map(messages.map((m) => [eventId(m.id), toPublicEvent(m)]));
      for (const delivery of due) {
        const event = events.get(delivery.eventId);
        if (!event) {
          // the outbox keeps its messages: only a hand-edited database gets here
          this.logger.warn(
            { delivery: delivery.id, event: delivery.eventId },
            'webhook delivery cannot be sent again: its event is no longer in the outbox',
          );
          continue;
        }
        const before = delivery.attempts;
        await this.queue.enqueue(
          WEBHOOK_DELIVER_JOB,
          {
            organizationId: delivery.organizationId,
            endpointId: delivery.endpointId,
            deliveryId: delivery.id,
            event,
            attemptsBefore: before,
            run: randomUUID(),
          },
          // the backoff after attempt n is BACKOFF_MS·2^(n-1) whichever job makes it
          { jobId: `webhook-${delivery.id}`, attempts: WEBHOOK_ATTEMPTS - before, backoffMs: BACKOFF_MS * 2 ** before },
        );
        queued++;
      }
      if (due.length < SWEEP_BATCH) return queued;
      after = due[due.length - 1]!.id;
    }
  }

  /**
   * Inside the outbox's transaction (the one that records the messages, or
   * their delivery's): everything here goes through `tx` (PGlite
   * has one connection, and tx holds it). The subscribers are read once per
   * organisation and workspace of the batch.
   */
  async fanOut(messages: readonly OutboxMessage[], tx: Transaction): Promise<void> {
    const subscribers = new Map<string, WebhookEndpointRecord[]>();
    for (const message of messages) {
      if (!message.organizationId) continue;
      const scope = SystemScopes.organization(message.organizationId);
      const workspaceId = message.workspaceId ?? null;
      const key = `${message.organizationId}/${workspaceId ?? ''}`;
      let endpoints = subscribers.get(key);
      if (endpoints === undefined)
        subscribers.set(key, (endpoints = await this.repository.subscribers(scope, workspaceId, tx)));
      const personal = this.webhooks.notification(message.topic) !== undefined;
      const directed = this.webhooks.directed(message.topic);
      const targets = endpoints.filter(
        (endpoint) =>
          matchesWorkspace(endpoint.workspaceId, workspaceId) &&
          (directed
            ? addressedTo(message.payload, endpoint.name)
            : personal
              ? takesPersonalNotification(endpoint, message.topic)
              : matchesEvent(endpoint.events, message.topic)),
      );
      if (targets.length === 0) continue;
      const event = toPublicEvent(message);
      for (const endpoint of targets) {
        const deliveryId = randomUUID();
        if (
          !(await this.repository.addDelivery(
            scope,
            { id: deliveryId, endpointId: endpoint.id, eventId: event.id, eventType: event.type },
            tx,
          ))
        )
          continue;
        // queued before this transaction commits: the job waits for the row (or retries) rather than lose the delivery
        await this.queue.enqueue(
          WEBHOOK_DELIVER_JOB,
          { organizationId: scope.organizationId, endpointId: endpoint.id, deliveryId, event },
          { jobId: `webhook-${deliveryId}`, attempts: WEBHOOK_ATTEMPTS, backoffMs: BACKOFF_MS },
        );
      }
    }
  }

  /** One attempt; throws (and the queue retries) while the receiver fails and attempts remain. */
  async deliver(payload: z.infer<typeof deliverPayload>, context: JobContext): Promise<void> {
    const scope = SystemScopes.organization(payload.organizationId);
    const found = await this.awaitDelivery(scope, payload.deliveryId, payload.endpointId);
    if (found === 'gone') return;
    if (!found) throw new WebhookDeliveryError('the delivery is not committed yet');
    const { delivery, endpoint } = found;
    // a duplicate run of a finished job
    if (delivery.status !== 'pending') return;
    if (!endpoint.enabled || endpoint.pausedAt) {
      await this.repository.setStatus(scope, delivery.id, 'skipped');
      return;
    }

    let event = payload.event;
    const complete = this.webhooks.notification(event.type);
    if (complete) {
      const data = await complete(event);
      if (data === null) {
        await this.repository.setStatus(scope, delivery.id, 'skipped');
        return;
      }
      event = { ...event, data };
    }
    // A job the sweep queued again while the lost one's run is still sending
    // (Redis restarted under it) must not send too: the receiver would get it twice.
    if (!(await this.repository.claimSend(scope, delivery.id, payload.run ?? FIRST_RUN, SEND_LEASE_MS))) {
      const now = await this.repository.delivery(scope, delivery.id);
      if (!now || now.delivery.status !== 'pending') return;
      throw new WebhookDeliveryError('another run of this delivery is sending it');
    }
    const outcome = await this.send(scope, endpoint, delivery.id, event);
    const delivered = outcome.error === null;
    // this job's count, after the attempts made before it; the log's, where a job re-ran an attempt it had recorded
    const attempt = Math.max((payload.attemptsBefore ?? 0) + context.attempt, delivery.attempts + 1);
    const last = attempt >= WEBHOOK_ATTEMPTS;
    const recorded = await this.untilRecorded(() =>
      this.db.transaction((tx) =>
        this.repository.recordAttempt(
          scope,
          delivery.id,
          { ...outcome, outcome: delivered ? 'delivered' : last ? 'failed' : 'pending' },
          tx,
        ),
      ),
    );
    if (recorded === null) return; // the endpoint was deleted meanwhile
    if (delivered) {
      await this.repository.markHealthy(scope, endpoint.id);
      return;
    }

    const failingSince = await this.repository.markFailing(scope, endpoint.id);
    if (!failingSince) return;
    const failedDeliveries = await this.repository.failedSince(scope, endpoint.id, failingSince);
    const reason = pauseReason({ failingSince, failedDeliveries }, this.clock.date(), this.pausePolicy);
    if (reason) {
      await this.pause(scope, endpoint, delivery.id, reason);
      return;
    }
    if (last) return; // marked failed with the attempt: the log says why
    throw new WebhookDeliveryError(outcome.error ?? 'delivery failed');
  }

  private async send(
    scope: OrgScope,
    endpoint: WebhookEndpointRecord,
    deliveryId: string,
    event: PublicEvent,
  ): Promise<SendOutcome> {
    let secret: string;
    try {
      secret = this.root.unwrap(endpoint.secret, secretAad(scope.organizationId, endpoint.id)).toString('utf8');
    } catch (error) {
      this.logger.error({ err: error, webhook: endpoint.id }, 'webhook secret cannot be opened');
      return { status: null, error: 'the signing secret cannot be opened (root key missing?)', durationMs: 0 };
    }
    const body = renderBody(endpoint.format, event);
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'Aileron-Webhooks/1',
      'x-aileron-event': event.type,
      'x-aileron-delivery': deliveryId,
      // signed per attempt: a retry carries a fresh timestamp, so it passes the receiver's 5-minute window
      ...signatureHeaders(secret, body, this.clock.now()),
    };
    return postSigned(endpoint.url, headers, body, {
      policy: outboundPolicyOf(this.config),
      timeoutMs: SEND_TIMEOUT_MS,
    });
  }

  /**
   * The receiver has answered, and a send cannot be taken back: while the
   * database is away, recording the answer is tried again here rather than
   * failing the job, whose retry would send the same delivery a second time
   * (a duplicate at the receiver, issue 22). Only a long outage or a shutdown
   * leaves it to the queue's retry.
   */
  private async untilRecorded<T>(record: () => Promise<T>): Promise<T> {
    const giveUpAt = this.clock.now() + RECORD_GIVE_UP_MS;
    for (let attempt = 0; ; attempt++) {
      try {
        return await record();
      } catch (error) {
        if (!databaseUnavailableReason(error) || this.closing.signal.aborted || this.clock.now() >= giveUpAt)
          throw error;
        this.recordLog.failed(error);
        // a shutdown ends the pause at once; the next try then gives up
        await sleep(RECORD_RETRY_MS[Math.min(attempt, RECORD_RETRY_MS.length - 1)], undefined, {
          signal: this.closing.signal,
        }).catch(() => undefined);
      }
    }
  }

  /** The pause stops this delivery and, through the endpoint's state, every other one still retrying. */
  private async pause(
    scope: OrgScope,
    endpoint: WebhookEndpointRecord,
    deliveryId: string,
    reason: string,
  ): Promise<void> {
    const paused = await this.db.transaction(async (tx) => {
      await this.repository.setStatus(scope, deliveryId, 'failed', tx);
      if (!(await this.repository.pause(scope, endpoint.id, reason, tx))) return false;
      await this.webhooks.announce(tx, scope, 'webhook.paused', endpoint, null, 'system', { reason });
      return true;
    });
    if (paused)
      this.logger.warn({ webhook: endpoint.id, organization: scope.organizationId, reason }, 'webhook endpoint paused');
  }

  /**
   * The job can start before the consumer's transaction commits; a short wait
   * covers the usual case, after which the queue's retry covers the rest.
   * 'gone': the endpoint no longer exists, so neither does the delivery.
   */
  private async awaitDelivery(
    scope: OrgScope,
    deliveryId: string,
    endpointId: string,
  ): Promise<Awaited<ReturnType<WebhooksRepository['delivery']>> | 'gone'> {
    for (const waitMs of [...COMMIT_WAIT_MS, 0]) {
      const found = await this.repository.delivery(scope, deliveryId);
      if (found) return found;
      if (!(await this.repository.get(scope, endpointId))) return 'gone';
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
    return null;
  }
}
