import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { People } from '../approvals/people';
import { ExecutionJournal } from '../../libs/pool/src';
import { HttpUpstream } from '../pool/http-upstream';
import { aRemoteServer, connect, textOf } from '../pool/mcp-client';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { aToken, aWorkspace, anOrganization } from '../support/builders';
import { BACKENDS } from '../support/databases';
import { eventually } from '../support/eventually';
import { listen } from './sse-client';

describe.each(BACKENDS)('workspace event stream on %s', (backend) => {
  let cp: TestControlPlane;
  /** where streams are opened: in server mode another replica, so the end must travel between replicas */
  let reader: TestControlPlane;
  const people = new People();
  beforeAll(async () => {
    await people.start();
    // the identity provider's JWKS listens on 127.0.0.1, which server mode refuses unless allowed
    const env: Record<string, string> = backend === 'postgres' ? { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' } : {};
    cp = await startTestControlPlane(backend, env);
    reader = backend === 'postgres' ? await aReplicaOf(cp, env) : cp;
    await people.trustedBy(cp);
  });
  afterAll(async () => {
    if (reader !== cp) await reader?.close();
    await cp?.close();
    await people.stop();
  });

  it('ends a stream when its token is revoked, its membership removed, or the token behind its JWT revoked: not only at the next request', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const token = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const person = await people.aPerson(cp, ws.slug, 'member');
    const minted = await cp.request('POST', '/v1/auth/token', { token: token.token });
    expect(minted.status, minted.text).toBe(201);
    const jwt = minted.body.token as string;
    const url = `${reader.url}/v1/workspaces/${ws.slug}/events`;
    const streams = {
      token: listen(url, token.token),
      person: listen(url, person.token),
      jwt: listen(url, jwt),
      owner: listen(url, cp.ownerToken),
    };
    await Promise.all(Object.values(streams).map((s) => s.opened));

    expect((await cp.request('DELETE', `/v1/workspaces/${ws.slug}/members/${person.id}`)).status).toBe(204);
    expect(await streams.person.ended).toContain('stream.ended');
    expect((await cp.request('DELETE', `/v1/tokens/${token.id}`)).status).toBe(204);
    // the hang guard of vitest's test timeout bounds these waits; revocation reaches the other replica through Redis
    expect(await streams.token.ended).toContain('stream.ended');
    expect(await streams.jwt.ended).toContain('stream.ended');
    // what was withdrawn ended nothing else: the owner still hears the workspace
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/after/revocation`, { body: { value: 'x' } });
    await eventually('the owner hears the write', () =>
      streams.owner.events.some((e) => e.event === 'secret.written' || e.data.type.startsWith('secret.')),
    );
    streams.owner.close();
  });

  it('streams the workspace’s events as they commit, filtered by type, and replays what a reconnecting client missed', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const other = await aWorkspace(cp, cp.ownerToken);
    const all = listen(`${cp.url}/v1/workspaces/${ws.slug}/events`, cp.ownerToken);
    const secretsOnly = listen(`${cp.url}/v1/workspaces/${ws.slug}/events?types=secret.*`, cp.ownerToken);
    await Promise.all([all.opened, secretsOnly.opened]);

    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: { rules: [{ id: 'r', effect: 'allow', tools: ['x'] }] },
    });
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/a/b`, { body: { value: 'never-streamed-value' } });
    await cp.request('PUT', `/v1/workspaces/${other.slug}/policy`, {
      body: { rules: [{ id: 'elsewhere', effect: 'deny', tools: ['x'] }] },
    });
    await eventually('policy.updated and secret.written', () =>
      ['policy.updated', 'secret.written'].every((t) => all.events.some((e) => e.event === t)),
    );
    await eventually('the filtered stream', () => secretsOnly.events.length >= 1);

    const policy = all.events.find((e) => e.event === 'policy.updated')!;
    expect(policy.data).toMatchObject({
      id: policy.id,
      type: 'policy.updated',
      workspace: ws.slug,
      data: { version: 1 },
    });
    expect(
      all.events.every((e) => e.data.workspace === ws.slug),
      'another workspace’s events leak into this stream',
    ).toBe(true);
    expect(secretsOnly.events.map((e) => e.event)).toEqual(['secret.written']);
    expect(JSON.stringify(all.events)).not.toContain('never-streamed-value');
    const seen = all.events.at(-1)!.id;
    all.close();
    secretsOnly.close();

    // missed while disconnected, replayed on reconnect from the last id seen
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/a/c`, { body: { value: 'x' } });
    const again = listen(`${cp.url}/v1/workspaces/${ws.slug}/events`, cp.ownerToken, { 'last-event-id': seen });
    await eventually('the missed event', () =>
      again.events.some((e) => e.event === 'secret.written' && e.data.data.path === 'a/c'),
    );
    expect(
      again.events.some((e) => e.id === seen),
      'an event the client already had came again',
    ).toBe(false);
    again.close();
  });

  /** An organisation with a webhook endpoint (subscribed to nothing these tests record: never called, but its events have a consumer). */
  async function anOrganizationWithAnEndpoint(): Promise<string> {
    const org = await anOrganization(cp);
    const hook = await cp.request('POST', '/v1/webhooks', {
      token: org.token,
      body: { name: 'elsewhere', url: 'https://93.184.216.34/hook', events: ['nothing.*'] },
    });
    expect(hook.status, hook.text).toBe(201);
    return org.token;
  }

  /** A workspace that allows everything, with `upstream` as a remote server behind its vault. */
  async function aWorkspaceCalling(
    token: string,
    upstream: HttpUpstream,
    key: string,
  ): Promise<{ ws: { slug: string; id: string }; server: string }> {
    const ws = await aWorkspace(cp, token);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { token, body: { default: 'allow', rules: [] } });
    const put = await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/upstream/authorization`, {
      token,
      body: { value: `Bearer ${key}` },
    });
    expect(put.status, put.text).toBe(200);
    const server = await aRemoteServer(cp, token, ws.slug, {
      transport: 'streamable_http',
      url: upstream.url,
      headers: { Authorization: 'vault://upstream/authorization' },
    });
    return { ws, server };
  }

  // Where a webhook endpoint could hear them, the events have rows that reference the records; where none
  // can, they have no rows and the records keep their ids. A client sees no difference either way.
  it.each([
    ['an organisation no webhook hears', 'stored in the audit records'],
    ['an organisation with a webhook endpoint', 'rows that reference the audit records'],
  ])('replays a proxied call’s events in %s as they were streamed, in order among the others: %s', async (kind) => {
    const key = 'upstream-key-events-replay';
    const upstream = new HttpUpstream(key);
    await upstream.start();
    try {
      const token =
        kind === 'an organisation with a webhook endpoint' ? await anOrganizationWithAnEndpoint() : cp.ownerToken;
      const as = { token };
      const { ws, server } = await aWorkspaceCalling(token, upstream, key);
      const live = listen(`${reader.url}/v1/workspaces/${ws.slug}/events`, token);
      await live.opened;
      // an event from before the call, to reconnect from
      await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/before/the-call`, { ...as, body: { value: 'x' } });
      await eventually('the event before the call', () => live.events.some((e) => e.event === 'secret.written'));
      const before = live.events.find((e) => e.event === 'secret.written')!.id;

      const { client } = await connect(cp, token, `/mcp/${ws.slug}/${server}`);
      try {
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'replayed' } }))).toBe(
          'Hello, replayed',
        );
      } finally {
        await client.close();
      }
      await cp.cp.app.get(ExecutionJournal).flush();
      const executions = (events: typeof live.events) => events.filter((e) => e.event.startsWith('execution.'));
      await eventually('the call’s events, live', () => executions(live.events).length === 2);
      // and one after them, from a row of its own: the replay must put each where it belongs
      await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/after/the-call`, { ...as, body: { value: 'x' } });
      await eventually(
        'the event after the call',
        () => live.events.filter((e) => e.event === 'secret.written').length === 2,
      );
      live.close();
      expect(executions(live.events)[0]!.data).toMatchObject({
        type: 'execution.started',
        workspace: ws.slug,
        execution_mode: 'remote',
        data: { server, tool: 'greet', arguments: { name: 'replayed' } },
      });
      // (besides the pool's secret.read of the upstream's header, when it connects)
      const ours = (events: typeof live.events) => events.filter((e) => e.event !== 'secret.read');
      const missed = ours(live.events.slice(live.events.findIndex((e) => e.id === before) + 1));
      expect(missed.map((e) => e.event)).toEqual(['execution.started', 'execution.succeeded', 'secret.written']);

      const again = listen(`${reader.url}/v1/workspaces/${ws.slug}/events`, token, { 'last-event-id': before });
      await eventually('the replay', () => ours(again.events).length === 3);
      again.close();
      expect(ours(again.events)).toEqual(missed);
      // from the middle: the stored events after the first one only
      const later = listen(`${reader.url}/v1/workspaces/${ws.slug}/events`, token, { 'last-event-id': missed[0]!.id });
      await eventually('the later replay', () => ours(later.events).length === 2);
      later.close();
      expect(ours(later.events)).toEqual(missed.slice(1));

      // the call is stored once, in the audit log
      const rows = await cp.cp.database.client.$queryRaw<{ payload: unknown; audit_record_id: string | null }[]>`
        SELECT payload, audit_record_id FROM outbox_messages
        WHERE workspace_id = ${ws.id}::uuid AND topic LIKE 'execution.%' ORDER BY id`;
      const records = await cp.cp.database.client.$queryRaw<{ event_id: bigint | null }[]>`
        SELECT event_id FROM audit_events WHERE chain_id = ${ws.id}::uuid AND type LIKE 'execution.%' ORDER BY seq`;
      if (kind === 'an organisation no webhook hears') {
        expect(rows).toEqual([]);
        expect(records.map((r) => `evt_${r.event_id}`)).toEqual(missed.slice(0, 2).map((e) => e.id));
      } else {
        // each event's row holds the record's id and the workspace's slug
        expect(rows.map((r) => (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload))).toEqual([
          { workspace: ws.slug },
          { workspace: ws.slug },
        ]);
        expect(rows.every((r) => r.audit_record_id !== null)).toBe(true);
        expect(records.map((r) => r.event_id)).toEqual([null, null]);
      }
    } finally {
      await upstream.stop();
    }
  });

  it('stores each call’s events its own way when one batch holds calls of both kinds of organisation, and replays each whole', async () => {
    const key = 'upstream-key-events-mixed';
    const upstream = new HttpUpstream(key);
    await upstream.start();
    try {
      const sides = [
        { token: cp.ownerToken, stored: 'in records' },
        { token: await anOrganizationWithAnEndpoint(), stored: 'as rows' },
      ];
      const prepared = [];
      for (const side of sides) {
        const { ws, server } = await aWorkspaceCalling(side.token, upstream, key);
        await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/before/the-call`, {
          token: side.token,
          body: { value: 'x' },
        });
        prepared.push({ ...side, ws, server });
      }
      // everything so far in the audit log: the two calls below go into one batch together
      await cp.cp.app.get(ExecutionJournal).flush();
      for (const { token, ws, server } of prepared) {
        const { client } = await connect(cp, token, `/mcp/${ws.slug}/${server}`);
        try {
          expect(textOf(await client.callTool({ name: 'greet', arguments: { name: ws.slug } }))).toBe(
            `Hello, ${ws.slug}`,
          );
        } finally {
          await client.close();
        }
      }
      await cp.cp.app.get(ExecutionJournal).flush();

      for (const { token, ws, stored } of prepared) {
        // from the event before the calls: this workspace's two execution events, whole, and nothing of the other's
        const before = await cp.cp.database.client.$queryRaw<{ id: bigint }[]>`
          SELECT id FROM outbox_messages WHERE workspace_id = ${ws.id}::uuid AND topic = 'secret.written' ORDER BY id DESC LIMIT 1`;
        const replay = listen(`${reader.url}/v1/workspaces/${ws.slug}/events`, token, {
          'last-event-id': `evt_${before[0]!.id}`,
        });
        const executions = () => replay.events.filter((e) => e.event.startsWith('execution.'));
        await eventually(`the replay of ${stored}`, () => executions().length === 2);
        replay.close();
        expect(executions().map((e) => [e.event, e.data.workspace, e.data.data.tool])).toEqual([
          ['execution.started', ws.slug, 'greet'],
          ['execution.succeeded', ws.slug, 'greet'],
        ]);
        const rows = await cp.cp.database.client.$queryRaw<{ n: number }[]>`
          SELECT count(*)::int AS n FROM outbox_messages WHERE workspace_id = ${ws.id}::uuid AND topic LIKE 'execution.%'`;
        const ids = await cp.cp.database.client.$queryRaw<{ event_id: bigint | null }[]>`
          SELECT event_id FROM audit_events WHERE chain_id = ${ws.id}::uuid AND type LIKE 'execution.%' ORDER BY seq`;
        if (stored === 'in records') {
          expect(rows[0]!.n).toBe(0);
          expect(ids.map((r) => `evt_${r.event_id}`)).toEqual(executions().map((e) => e.id));
        } else {
          expect(rows[0]!.n).toBe(2);
          expect(ids.map((r) => r.event_id)).toEqual([null, null]);
        }
      }
    } finally {
      await upstream.stop();
    }
  });

  it('another organisation gets 404, not a stream', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const stranger = await anOrganization(cp);
    const res = await fetch(`${cp.url}/v1/workspaces/${ws.slug}/events`, {
      headers: { authorization: `Bearer ${stranger.token}` },
    });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/problem\+json/);
    await res.arrayBuffer();
  });
});

describe('a control plane that shuts down with event streams open', () => {
  it('ends each with stream.ended "shutting down", and its close does not wait for their clients', async () => {
    const cp = await startTestControlPlane('postgres');
    const stream = listen(`${cp.url}/v1/workspaces/default/events`, cp.ownerToken);
    await stream.opened;
    // before, the HTTP server's close waited for the open answer until its client left: here, for ever (a hang
    // that vitest's test timeout turns into a failure)
    await cp.close();
    const ended = await stream.ended;
    expect(ended).toContain('event: stream.ended');
    expect(JSON.parse(ended.slice(ended.indexOf('data: ') + 6))).toMatchObject({
      reason: 'shutting down',
      detail: expect.stringContaining('reconnect'),
    });
  });
});
