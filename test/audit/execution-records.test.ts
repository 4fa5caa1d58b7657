import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, aWorkspace, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { BACKENDS, Backend } from '../support/databases';
import { eventually } from '../support/eventually';
import { aReceiver, Receiver } from '../support/webhook-receiver';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { listen } from '../events/sse-client';

/** An audit record as the search answers it: the fields compared below, and the rest by name. */
type View = Record<string, unknown> & {
  type: string;
  tool: string;
  source: string;
  execution_mode: string;
  decision: string;
  data: Record<string, unknown>;
};

/** An event as a webhook receives it. */
interface Envelope {
  id: string;
  type: string;
  workspace: string | null;
  session: string | null;
  execution_mode?: string;
  data: Record<string, unknown>;
  [field: string]: unknown;
}

/**
 * What may differ between a remote call's record and a local one's for the
 * same call and decision: who and when and where (ids, times, positions in the
 * chain, the reporter, the mode, the session label) and the call's own ids and
 * timing. Everything else must be equal, key for key.
 */
const ALLOWED_TO_DIFFER = new Set([
  'id',
  'seq',
  'recorded_at',
  'occurred_at',
  'source',
  'execution_mode',
  'session',
  'prev_hash',
  'hash',
  'data.execution_id',
  'data.latency_ms',
  'data.approval_id',
]);
/** keys only a remote record has: the pool instance that ran it and the MCP session it came in on */
const REMOTE_ONLY = new Set(['data.instance', 'data.mcp_session']);

/** An event's fields that may differ likewise (the envelope's own id and time, and the record's). */
const EVENT_ALLOWED_TO_DIFFER = new Set([
  'id',
  'time',
  'session',
  'execution_mode',
  'data.execution_id',
  'data.latency_ms',
  'data.approval_id',
  'data.occurred_at',
]);

/** A record's fields as `field` and `data.key`, for comparing key by key. */
function flat(record: Record<string, unknown>): Map<string, unknown> {
  const fields = new Map<string, unknown>();
  for (const [key, value] of Object.entries(record)) {
    if (key === 'data') for (const [k, v] of Object.entries(value as object)) fields.set(`data.${k}`, v);
    else fields.set(key, value);
  }
  return fields;
}

/** The differences between two records outside what may differ; empty when they are structurally identical. */
function differences(
  remote: Record<string, unknown>,
  local: Record<string, unknown>,
  allowed: ReadonlySet<string>,
): string[] {
  const r = flat(remote);
  const l = flat(local);
  const found: string[] = [];
  for (const key of new Set([...r.keys(), ...l.keys()])) {
    if (REMOTE_ONLY.has(key)) {
      if (l.has(key)) found.push(`${key}: only a remote record has it, the local one does too`);
      continue;
    }
    if (r.has(key) !== l.has(key)) found.push(`${key}: only the ${r.has(key) ? 'remote' : 'local'} record has it`);
    else if (!allowed.has(key) && JSON.stringify(r.get(key)) !== JSON.stringify(l.get(key)))
      found.push(`${key}: remote ${JSON.stringify(r.get(key))}, local ${JSON.stringify(l.get(key))}`);
  }
  return found;
}

function serverEnv(backend: Backend): Record<string, string> {
  return {
    // a call that needs approval answers at once with its pending request
    AILERON_POOL_APPROVAL_WAIT_SECONDS: '0',
    // server mode refuses loopback receivers unless allowed
    ...(backend === 'postgres' ? { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' } : {}),
  };
}

describe.each(BACKENDS)('execution records of local and remote calls on %s', (backend) => {
  let cp: TestControlPlane;
  const hooks: string[] = [];
  beforeAll(async () => {
    cp = await startTestControlPlane(backend, serverEnv(backend));
  });
  afterAll(async () => cp?.close());
  // an endpoint left behind would keep retrying against its closed receiver
  afterEach(async () => {
    for (const id of hooks.splice(0)) await cp.request('DELETE', `/v1/webhooks/${id}`);
  });

  async function aWebhook(receiver: Receiver, workspace: string): Promise<void> {
    const res = await cp.request('POST', '/v1/webhooks', {
      body: { name: uniqueSlug('exec'), url: receiver.url, events: ['execution.*'], workspace },
    });
    expect(res.status, res.text).toBe(201);
    hooks.push(res.body.id);
  }

  const ingest = async (token: string, events: Record<string, unknown>[]) => {
    const res = await cp.request('POST', '/v1/gateway/audit', { token, body: { events } });
    expect(res.status, res.text).toBe(200);
    return res.body as { accepted: number; duplicates: number; rejected: unknown[] };
  };

  const search = async (ws: string, query: string): Promise<View[]> => {
    const res = await cp.request('GET', `/v1/workspaces/${ws}/audit?limit=500&${query}`);
    expect(res.status, res.text).toBe(200);
    return res.body.items;
  };

  it("announces a gateway's local calls to webhook subscribers and the live stream, once, as the pool's are announced", async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    const receiver = await aReceiver([]);
    const stream = listen(`${cp.url}/v1/workspaces/${ws.slug}/events?types=execution.*`, cp.ownerToken);
    try {
      await aWebhook(receiver, ws.slug);
      await stream.opened;
      const time = new Date(Date.now() - 60_000).toISOString();
      const call = {
        time,
        execution_mode: 'local',
        principal: 'user:dev@example.com',
        server: 'laptop-git',
        tool: 'status',
        session: 'laptop-session',
        execution_id: 'local-call-1',
      };
      const started = { id: randomUUID(), type: 'execution.started', decision: 'allow', rule: 'git-reads', ...call };
      const succeeded = {
        id: randomUUID(),
        type: 'execution.succeeded',
        decision: 'allow',
        latency_ms: 8,
        result_size: 512,
        ...call,
      };
      // not a tool call: recorded, never announced as one
      const other = { id: randomUUID(), type: 'gateway.restarted', time };
      expect(await ingest(gateway.token, [started, succeeded, other])).toMatchObject({ accepted: 3 });

      const delivered = await eventually('both records at the webhook', () => {
        const events = receiver.accepted().map((r) => JSON.parse(r.raw) as Envelope);
        return events.length >= 2 ? events : undefined;
      });
      expect(delivered.map((e) => e.type).sort()).toEqual(['execution.started', 'execution.succeeded']);
      const end = delivered.find((e) => e.type === 'execution.succeeded')!;
      expect(end).toMatchObject({
        workspace: ws.slug,
        session: 'laptop-session',
        execution_mode: 'local',
        data: {
          execution_id: 'local-call-1',
          server: 'laptop-git',
          tool: 'status',
          decision: 'allow',
          principal: 'user:dev@example.com',
          actor: `gateway:${gateway.id}`,
          latency_ms: 8,
          // in the current name, as the pool's events say it
          result_bytes: 512,
          occurred_at: time,
        },
      });
      expect(end.data).not.toHaveProperty('result_size');
      expect(delivered.find((e) => e.type === 'execution.started')!.data).toMatchObject({ rules: ['git-reads'] });

      const streamed = await eventually('both records on the live stream', () =>
        stream.events.length >= 2 ? stream.events : undefined,
      );
      expect(streamed.map((e) => e.data.id).sort()).toEqual(delivered.map((e) => e.id).sort());
      expect(streamed.every((e) => e.data.execution_mode === 'local')).toBe(true);

      // the same batch again stores nothing and announces nothing: the next new call is the next to arrive
      expect(await ingest(gateway.token, [started, succeeded])).toMatchObject({ accepted: 0, duplicates: 2 });
      const next = { ...succeeded, id: randomUUID(), execution_id: 'local-call-2' };
      expect(await ingest(gateway.token, [next])).toMatchObject({ accepted: 1 });
      await eventually('the next call at the webhook', () => receiver.accepted().length >= 3);
      await eventually('the next call on the stream', () => stream.events.length >= 3);
      const executions = receiver.accepted().map((r) => (JSON.parse(r.raw) as Envelope).data.execution_id);
      expect(executions).toEqual(['local-call-1', 'local-call-1', 'local-call-2']);
      expect(stream.events.map((e) => e.data.data.execution_id)).toEqual(executions);
    } finally {
      stream.close();
      await receiver.close();
    }
  });

  it('records a remote call and a local one of the same tool and decision in one shape, field by field', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: {
        rules: [
          { id: 'echo-ok', effect: 'allow', tools: ['echo'] },
          { id: 'sums-need-a-look', effect: 'approval', tools: ['get-sum'] },
          { id: 'no-images', effect: 'deny', tools: ['get-tiny-image'] },
        ],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    const version = policy.body.version as number;
    const server = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything);
    // the gateway reaches the remote server through the pool and reports its local calls: the same caller for both
    const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    const receiver = await aReceiver([]);
    try {
      await aWebhook(receiver, ws.slug);

      // remote: allowed, denied, and let through by a person
      const { client } = await connect(cp, gateway.token, `/mcp/${ws.slug}/${server}`);
      try {
        expect((await client.callTool({ name: 'echo', arguments: { message: 'hi' } })).isError).toBeFalsy();
        expect(textOf(await client.callTool({ name: 'get-tiny-image', arguments: {} }))).toContain('POLICY_DENIED');
        const pending = await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } });
        const approvalId = /Approval ([0-9a-f-]{36}) is pending/.exec(textOf(pending))?.[1];
        expect(approvalId, textOf(pending)).toBeDefined();
        const approved = await cp.request('POST', `/v1/approvals/${approvalId}/approve`, { body: {} });
        expect(approved.status, approved.text).toBe(200);
        expect((await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })).isError).toBeFalsy();
      } finally {
        await client.close();
      }
      const remote = await eventually('the pool to write its records', async () => {
        const records = await search(ws.slug, `server=${server}&execution_mode=remote`);
        return records.length >= 5 ? records : undefined;
      });
      const remoteOf = (type: string, tool: string) => remote.find((r) => r.type === type && r.tool === tool)!;

      // local: the same calls as an older gateway reports them, in its names
      const asked = await cp.request('POST', '/v1/gateway/approvals', {
        token: gateway.token,
        body: {
          server,
          tool: 'get-sum',
          arguments: { a: 1, b: 2 },
          session: 'laptop-session',
          principal: `gateway:${gateway.id}`,
        },
      });
      expect(asked.status, asked.text).toBe(201);
      expect((await cp.request('POST', `/v1/approvals/${asked.body.id}/approve`, { body: {} })).status).toBe(200);
      const time = new Date().toISOString();
      const local = (fields: Record<string, unknown>) => ({
        id: randomUUID(),
        time,
        execution_mode: 'local',
        server,
        session: 'laptop-session',
        ...fields,
      });
      const echo = { tool: 'echo', execution_id: 'echo-1', data: { version: '1.0.0' } };
      const sum = { tool: 'get-sum', execution_id: 'sum-1', approval_id: asked.body.id, data: { version: '1.0.0' } };
      const localEvents = [
        local({
          ...echo,
          type: 'execution.started',
          decision: 'allow',
          rule: 'echo-ok',
          policy_version: version,
          arguments: { message: 'hi' },
        }),
        local({
          ...echo,
          type: 'execution.succeeded',
          decision: 'allow',
          latency_ms: 2,
          result_size: remoteOf('execution.succeeded', 'echo').data.result_bytes,
        }),
        local({
          tool: 'get-tiny-image',
          type: 'execution.denied',
          decision: 'deny',
          rule: 'no-images',
          policy_version: version,
          arguments: {},
          error: 'denied by policy',
        }),
        local({
          ...sum,
          type: 'execution.started',
          decision: 'approval',
          rule: 'sums-need-a-look',
          policy_version: version,
          arguments: { a: 1, b: 2 },
        }),
        local({
          ...sum,
          type: 'execution.succeeded',
          decision: 'approval',
          latency_ms: 3,
          result_size: remoteOf('execution.succeeded', 'get-sum').data.result_bytes,
        }),
      ];
      expect(await ingest(gateway.token, localEvents)).toEqual({ accepted: 5, duplicates: 0, rejected: [] });
      const locals = await search(ws.slug, `server=${server}&execution_mode=local`);
      const localOf = (type: string, tool: string) => locals.find((r) => r.type === type && r.tool === tool)!;

      const pairs = [
        ['execution.started', 'echo', 'allow'],
        ['execution.succeeded', 'echo', 'allow'],
        ['execution.failed', 'get-tiny-image', 'deny'],
        ['execution.started', 'get-sum', 'approved'],
        ['execution.succeeded', 'get-sum', 'approved'],
      ] as const;
      for (const [type, tool, decision] of pairs) {
        const r = remoteOf(type, tool);
        const l = localOf(type, tool);
        expect(r, `the remote ${type} of ${tool}`).toBeDefined();
        expect(l, `the local ${type} of ${tool}`).toBeDefined();
        expect([r.decision, l.decision]).toEqual([decision, decision]);
        expect(differences(r, l, ALLOWED_TO_DIFFER), `${type} of ${tool}`).toEqual([]);
        // what the allowed differences say, they say as intended
        expect([r.source, l.source, r.execution_mode, l.execution_mode]).toEqual([
          'pool',
          'gateway',
          'remote',
          'local',
        ]);
      }
      // each call's start and end share its execution id
      expect(localOf('execution.started', 'echo').data.execution_id).toBe('echo-1');
      expect(remoteOf('execution.started', 'echo').data.execution_id).toBe(
        remoteOf('execution.succeeded', 'echo').data.execution_id,
      );

      // and their events, as a webhook subscriber receives them
      const events = await eventually('the ten events at the webhook', () => {
        const received = receiver.accepted().map((x) => JSON.parse(x.raw) as Envelope);
        return received.length >= 10 ? received : undefined;
      });
      for (const [type, tool] of pairs) {
        const of = (mode: string) =>
          events.find((e) => e.type === type && e.data.tool === tool && e.execution_mode === mode)!;
        expect(differences(of('remote'), of('local'), EVENT_ALLOWED_TO_DIFFER), `the ${type} event of ${tool}`).toEqual(
          [],
        );
      }
    } finally {
      await receiver.close();
    }
  });
});
