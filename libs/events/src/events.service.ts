import { Inject, Injectable } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { MESSAGE_BUS, MessageBus } from '@aileron/bus';
import { OutboxMessage, OutboxService, PublicEvent, toPublicEvent } from '@aileron/outbox';
import { RedisUnavailableError } from '@aileron/redis';
import { EventsRepository } from './events.repository';

const REPLAY_LIMIT = 1000;

function channel(workspaceId: string): string {
  return `events.${workspaceId}`;
}

/** `approval.*` or an exact type; empty: everything. */
export function matches(filters: readonly string[], type: string): boolean {
  return filters.length === 0 || filters.some((f) => (f.endsWith('.*') ? type.startsWith(f.slice(0, -1)) : f === type));
}

/**
 * Live events for the web console and `approvals watch`: every outbox message
 * of a workspace, fanned out to every replica through the bus once it is
 * committed, with a replay from the outbox for clients that reconnect with
 * Last-Event-ID.
 */
@Injectable()
export class EventsService {
  constructor(
    private readonly repository: EventsRepository,
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    private readonly outbox: OutboxService,
  ) {
    outbox.addConsumer({
      name: 'events.stream',
      topics: '*',
      // a live view: clients that missed something replay it from the outbox (Last-Event-ID)
      transient: true,
      hear: (messages) => this.publish(messages),
    });
  }

  /**
   * All of a batch sent at once: on one Redis connection the publishes are
   * pipelined and keep their order, instead of a round trip each while the
   * delivery's transaction stays open.
   */
  private async publish(messages: readonly OutboxMessage[]): Promise<void> {
    // an event no stream can hear is not built (in one process, with no console open: every pool call's two)
    const heard = messages.filter((m) => m.workspaceId && this.bus.audible(channel(m.workspaceId)));
    await Promise.all(heard.map((m) => this.bus.publish(channel(m.workspaceId!), toPublicEvent(m))));
  }

  /**
   * Live events reach every replica through Redis: while it is away a stream
   * would miss other replicas' events without knowing, so none opens
   * (RedisUnavailableError) and open ones hear `interrupted`, to end and
   * let their clients come back with Last-Event-ID.
   */
  subscribe(scope: WorkspaceScope, handler: (event: PublicEvent) => void, interrupted: () => void): () => void {
    if (!this.bus.connected) throw new RedisUnavailableError('A live event stream');
    const unsubscribe = this.bus.subscribe(channel(scope.workspaceId), (message) => handler(message as PublicEvent));
    const stopWatching = this.bus.onConnectionChange((connected) => {
      if (!connected) interrupted();
    });
    return () => {
      stopWatching();
      unsubscribe();
    };
  }

  async replay(scope: WorkspaceScope, lastEventId: string): Promise<PublicEvent[]> {
    const match = /^evt_(\d{1,19})$/.exec(lastEventId);
    if (!match) return [];
    const after = BigInt(match[1]!);
    const rows = await this.outbox.withPayloads(await this.repository.after(scope, after, REPLAY_LIMIT));
    // the pool's executions in organisations no webhook hears have no rows: their records keep their ids
    const stored = await this.outbox.storedAfter(scope, after, REPLAY_LIMIT);
    if (stored.length === 0) return rows.map(toPublicEvent);
    return [...rows, ...stored]
      .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
      .slice(0, REPLAY_LIMIT)
      .map(toPublicEvent);
  }
}
