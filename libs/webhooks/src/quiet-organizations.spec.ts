import { describe, expect, it, vi } from 'vitest';
import { InProcessBus, MessageBus } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import type { OutboxService } from '@aileron/outbox';
import { QuietOrganizations } from './quiet-organizations';
import type { WebhooksRepository } from './webhooks.repository';

/** The in-process bus, with an outage to switch on: what Redis going away looks like to a replica. */
class SwitchableBus implements MessageBus {
  private readonly bus = new InProcessBus();
  private readonly listeners = new Set<(connected: boolean) => void>();
  connected = true;
  publish(channel: string, message: unknown): Promise<void> {
    return this.bus.publish(channel, message);
  }
  subscribe(channel: string, handler: (message: unknown) => void): () => void {
    return this.bus.subscribe(channel, handler);
  }
  audible(channel: string): boolean {
    return this.bus.audible(channel);
  }
  onConnectionChange(listener: (connected: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  close(): Promise<void> {
    return this.bus.close();
  }
  set(up: boolean): void {
    this.connected = up;
    for (const listener of this.listeners) listener(up);
  }
}

function aReplica(endpoints: Map<string, boolean>) {
  const bus = new SwitchableBus();
  const hooks: { topics: (topic: string) => boolean; hook: () => Promise<void> }[] = [];
  const outbox = {
    afterCommitOf: (topics: (t: string) => boolean, hook: () => Promise<void>) => hooks.push({ topics, hook }),
  };
  const repository = {
    anyTaking: async (scope: { organizationId: string }) => endpoints.get(scope.organizationId) ?? false,
  };
  const quiet = new QuietOrganizations(
    bus,
    repository as unknown as WebhooksRepository,
    outbox as unknown as OutboxService,
    new Clock(),
  );
  const committed = (topic: string) => Promise.all(hooks.filter((h) => h.topics(topic)).map((h) => h.hook()));
  return { bus, quiet, committed };
}

const message = (organizationId?: string) => ({ topic: 'execution.started', organizationId, payload: {} });

describe('QuietOrganizations', () => {
  it('says quiet only for organisations it has learned have no endpoint, and learns on being asked', async () => {
    const { quiet } = aReplica(new Map([['with-endpoint', true]]));
    expect(quiet.quietFor([message('none')])).toBe(false);
    await vi.waitFor(() => expect(quiet.quietFor([message('none')])).toBe(true));
    // one organisation it does not know (or that has an endpoint) is enough to ask the consumer
    expect(quiet.quietFor([message('none'), message('with-endpoint')])).toBe(false);
    await vi.waitFor(() => expect(quiet.quietFor([message('with-endpoint')])).toBe(false));
    expect(quiet.quietFor([message('none'), message('with-endpoint')])).toBe(false);
    // a message of no organisation goes to no endpoint
    expect(quiet.quietFor([message('none'), message()])).toBe(true);
  });

  it('forgets on every commit of an endpoint change, and trusts nothing while the bus is away', async () => {
    const endpoints = new Map<string, boolean>();
    const { bus, quiet, committed } = aReplica(endpoints);
    quiet.quietFor([message('org')]);
    await vi.waitFor(() => expect(quiet.quietFor([message('org')])).toBe(true));

    await committed('policy.updated');
    expect(quiet.quietFor([message('org')])).toBe(true);
    endpoints.set('org', true);
    await committed('webhook.created');
    expect(quiet.quietFor([message('org')])).toBe(false);
    await vi.waitFor(() => expect(endpoints.get('org')).toBe(true));
    endpoints.set('org', false);
    await committed('webhook.deleted');
    await vi.waitFor(() => expect(quiet.quietFor([message('org')])).toBe(true));

    // Redis away: another replica's new endpoint could not be heard of
    bus.set(false);
    expect(quiet.quietFor([message('org')])).toBe(false);
    // back: what was known before may be out of date, and is learned again
    bus.set(true);
    expect(quiet.quietFor([message('org')])).toBe(false);
    await vi.waitFor(() => expect(quiet.quietFor([message('org')])).toBe(true));
  });
});
