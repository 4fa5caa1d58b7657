import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { OutboxRecord, OutboxService } from '@aileron/outbox';
import { WebhooksRepository } from './webhooks.repository';

/**
 * Bounds how long a lost bus message can leave a new endpoint unheard (the
 * bus's outages are covered apart: see `quietFor`).
 */
const TTL_MS = 60_000;

/**
 * Which organisations have no endpoint that takes events: for them the
 * webhook consumer has nothing to do, and the outbox writes their messages
 * completed without asking it (a pool's batch of executions read the
 * endpoints, in a savepoint, for nothing; a tenth of the batch's cost on the
 * embedded database).
 *
 * Known from committed state only, and only while every replica hears of
 * endpoint changes: every change of an endpoint records a `webhook.*` event,
 * and its commit drops what every replica knows (the bus). So an endpoint
 * hears what is recorded after its change has committed and reached the
 * recording replica (the bus's delay, a few milliseconds), as it hears what
 * is recorded after its commit on the same replica; the consumer's own read
 * inside the recording transaction had the same race with a transaction
 * already under way.
 */
@Injectable()
export class QuietOrganizations implements OnModuleDestroy {
  private readonly quiet: SharedCache<boolean>;

  constructor(
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    private readonly repository: WebhooksRepository,
    outbox: OutboxService,
    clock: Clock,
  ) {
    this.quiet = new SharedCache(bus, 'webhooks-quiet-organizations', TTL_MS, clock);
    // after the commit: a replica reloading before it would learn the old endpoints again
    outbox.afterCommitOf(
      (topic) => topic.startsWith('webhook.'),
      () => this.quiet.invalidate(''),
    );
  }

  onModuleDestroy(): void {
    this.quiet.close();
  }

  /**
   * True when no organisation of these messages has an endpoint that takes
   * events. Synchronous, read from memory: it is asked inside the recording
   * transaction, where a read of its own would wait for that transaction on
   * the embedded database. What it does not know it learns for next time.
   */
  quietFor(messages: readonly OutboxRecord[]): boolean {
    // while the bus is away a change on another replica would not reach this one
    if (!this.bus.connected) return false;
    let quiet = true;
    // a batch is one organisation's messages, nearly always: each is asked once
    for (const organizationId of new Set(messages.map((m) => m.organizationId))) {
      if (!organizationId) continue;
      const known = this.quiet.get(organizationId);
      if (known === undefined) this.learn(organizationId);
      if (known !== true) quiet = false;
    }
    return quiet;
  }

  private learn(organizationId: string): void {
    void this.quiet
      .getOrLoad(
        organizationId,
        async () => !(await this.repository.anyTaking(SystemScopes.organization(organizationId))),
      )
      // unknown stays unknown: the consumer reads for itself meanwhile
      .catch(() => undefined);
  }
}
