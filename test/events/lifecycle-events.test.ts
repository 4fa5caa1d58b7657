import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentSessionsService } from '@aileron/sessions';
import { aWorkspace, uniqueSlug } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { BACKENDS } from '../support/databases';
import { eventually } from '../support/eventually';
import { aReceiver } from '../support/webhook-receiver';
import { listen } from './sse-client';

/** An event as subscribers get it: the webhook's body, and the data of the stream's `data:` line. */
interface Delivered {
  id: string;
  type: string;
  time: string;
  workspace: string | null;
  workspace_id: string | null;
  session: string | null;
  data: Record<string, unknown>;
}

/**
 * The session and sandbox events the design names (API.md § Events), as a
 * webhook subscriber and the live stream receive them, with the fields
 * docs/events.md lists for each.
 */
describe.each(BACKENDS)('session and sandbox events on %s', (backend) => {
  let cp: TestControlPlane;
  const hooks: string[] = [];
  beforeAll(async () => {
    cp = await startTestControlPlane(backend, backend === 'postgres' ? { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' } : {});
  });
  afterAll(async () => cp?.close());
  afterEach(async () => {
    resetClock(cp);
    for (const id of hooks.splice(0)) await cp.request('DELETE', `/v1/webhooks/${id}`);
  });

  it('session.started and session.ended, sandbox.created and sandbox.deleted reach a webhook and the live stream with their fields', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const me = await cp.request('GET', '/v1/me');
    expect(me.status, me.text).toBe(200);
    // who did it, as every record names a caller: the owner's token
    const actor = `token:${me.body.principal.id as string}`;
    expect(me.body.principal.kind).toBe('api_token');
    const receiver = await aReceiver([]);
    const stream = listen(`${cp.url}/v1/workspaces/${ws.slug}/events?types=session.*,sandbox.*`, cp.ownerToken);
    try {
      const hook = await cp.request('POST', '/v1/webhooks', {
        body: {
          name: uniqueSlug('lifecycle'),
          url: receiver.url,
          events: ['session.*', 'sandbox.*'],
          workspace: ws.slug,
        },
      });
      expect(hook.status, hook.text).toBe(201);
      hooks.push(hook.body.id);
      await stream.opened;

      const started = await cp.request('POST', `/v1/workspaces/${ws.slug}/sessions`, {
        body: { name: 'fix the flaky test', agent: 'claude', ttl_seconds: 600 },
      });
      expect(started.status, started.text).toBe(201);
      const session = started.body.id as string;
      expect((await cp.request('DELETE', `/v1/sessions/${session}`)).status).toBe(200);
      const made = await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, { body: { name: 'Fix The Bug' } });
      expect(made.status, made.text).toBe(201);
      expect((await cp.request('DELETE', `/v1/workspaces/${ws.slug}/sandboxes/fix-the-bug`)).status).toBe(204);

      const types = ['session.started', 'session.ended', 'sandbox.created', 'sandbox.deleted'];
      const delivered = await eventually('the four events at the webhook', () => {
        const events = receiver.accepted().map((r) => JSON.parse(r.raw) as Delivered);
        return types.every((t) => events.some((e) => e.type === t)) ? events : undefined;
      });
      const streamed = await eventually('the four events on the stream', () =>
        types.every((t) => stream.events.some((e) => e.event === t)) ? stream.events : undefined,
      );
      const of = (type: string): Delivered => {
        const hooked = delivered.filter((e) => e.type === type);
        const live = streamed.filter((e) => e.event === type).map((e) => e.data as unknown as Delivered);
        // once each, and the same event on both
        expect(hooked).toHaveLength(1);
        expect(live).toHaveLength(1);
        expect(live[0]).toEqual(hooked[0]);
        return hooked[0]!;
      };
      const common = { workspace: ws.slug, workspace_id: ws.id, id: expect.stringMatching(/^evt_\d+$/) };

      expect(of('session.started')).toMatchObject({
        ...common,
        session,
        data: {
          name: 'fix the flaky test',
          agent: 'claude',
          caps: expect.arrayContaining(['actions:list', 'actions:run', 'approvals:poll', 'comms']),
          caveats: [],
          expires_at: started.body.expires_at,
          actor,
        },
      });
      expect(of('session.ended')).toMatchObject({
        ...common,
        session,
        data: { name: 'fix the flaky test', reason: 'ended', actor },
      });
      expect(of('sandbox.created')).toMatchObject({
        ...common,
        session: null,
        data: { sandbox: 'fix-the-bug', network: 'none', actor },
      });
      expect(of('sandbox.deleted')).toMatchObject({
        ...common,
        session: null,
        data: { sandbox: 'fix-the-bug', actor },
      });
      // the order they happened in
      const order = receiver.accepted().map((r) => JSON.parse(r.raw) as Delivered);
      expect(order.map((e) => Number(e.id.slice(4))).sort((a, b) => a - b)).toEqual(
        types.map((t) => Number(of(t).id.slice(4))),
      );
    } finally {
      stream.close();
      await receiver.close();
    }
  });

  it('session.ended with reason "expired" when a session reaches its expiry, once; ending it afterwards says nothing more', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const receiver = await aReceiver([]);
    const stream = listen(`${cp.url}/v1/workspaces/${ws.slug}/events?types=session.*`, cp.ownerToken);
    try {
      const hook = await cp.request('POST', '/v1/webhooks', {
        body: { name: uniqueSlug('expiry'), url: receiver.url, events: ['session.*'], workspace: ws.slug },
      });
      expect(hook.status, hook.text).toBe(201);
      hooks.push(hook.body.id);
      await stream.opened;
      const start = async (name: string) => {
        const started = await cp.request('POST', `/v1/workspaces/${ws.slug}/sessions`, {
          body: { name, agent: 'claude', ttl_seconds: 60 },
        });
        expect(started.status, started.text).toBe(201);
        return started.body.id as string;
      };
      const lapsing = await start('runs out of time');
      const ended = await start('ended by hand first');
      expect((await cp.request('DELETE', `/v1/workspaces/${ws.slug}/sessions/${ended}`)).status).toBe(200);

      // the session's hour has come: no sleep, the control plane's clock moves past it
      advanceClock(cp, 61_000);
      const hooked = (session: string, type = 'session.ended') =>
        receiver
          .accepted()
          .map((r) => JSON.parse(r.raw) as Delivered)
          .filter((e) => e.type === type && e.session === session);
      const [expired] = await eventually('the expiry at the webhook', () =>
        hooked(lapsing).length > 0 ? hooked(lapsing) : undefined,
      );
      expect(expired).toMatchObject({
        workspace: ws.slug,
        workspace_id: ws.id,
        session: lapsing,
        data: { name: 'runs out of time', reason: 'expired', actor: 'system' },
      });
      const live = await eventually('the expiry on the stream', () =>
        stream.events.find((e) => e.event === 'session.ended' && e.data.session === lapsing),
      );
      expect(live.data).toEqual(expired);
      const view = await cp.request('GET', `/v1/workspaces/${ws.slug}/sessions/${lapsing}`);
      expect(view.body).toMatchObject({ state: 'expired', ended_at: null });

      // announced once: another sweep finds nothing, and an end afterwards is no second end
      expect(await cp.cp.app.get(AgentSessionsService).announceExpired()).toBe(0);
      const late = await cp.request('DELETE', `/v1/workspaces/${ws.slug}/sessions/${lapsing}`);
      expect(late.status, late.text).toBe(200);
      expect(late.body).toMatchObject({ state: 'expired', ended_at: null });
      // the stream is in the order things were recorded: what came before the marker is there once it is
      const marker = await start('marker');
      await eventually('the marker on the stream and at the webhook', () =>
        stream.events.some((e) => e.data.session === marker) && hooked(marker, 'session.started').length === 1
          ? true
          : undefined,
      );
      const endings = (session: string) =>
        stream.events.filter((e) => e.event === 'session.ended' && e.data.session === session);
      expect(endings(lapsing)).toHaveLength(1);
      expect(hooked(lapsing)).toHaveLength(1);
      // a session ended by hand before it expired is not announced again at its expiry
      expect(endings(ended).map((e) => e.data.data.reason)).toEqual(['ended']);
      expect(hooked(ended).map((e) => e.data.reason)).toEqual(['ended']);
    } finally {
      stream.close();
      await receiver.close();
    }
  });
});
