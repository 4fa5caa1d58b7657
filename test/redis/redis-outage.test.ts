import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboxService } from '../../libs/platform/outbox/src';
import { aWorkspace, uniqueSlug } from '../support/builders';
import { aReplicaOf, startTestControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';
import { bounded, BOUND_MS } from '../support/outage';
import { RedisServer, startRedis } from '../support/services';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { everyItem } from '../support/pages';

interface Sample {
  phase: string;
  what: string;
  ms: number;
  ok: boolean;
  detail: string;
}

/**
 * Redis stopped (SIGSTOP: connections stay open, nothing answers) and killed
 * (SIGKILL, then a fresh Redis on the same port) under two replicas with a
 * steady light load: REST writes on both, an MCP session making calls on the
 * replica that owns it, an open event stream. Nothing that can work without
 * Redis waits for it; what needs it says so at once (503 REDIS_UNAVAILABLE);
 * everything recovers without a restart, no acknowledged write is lost and
 * each outbox message reaches its consumer exactly once.
 */
describe('Redis going away under two replicas', () => {
  let redis: RedisServer;
  let a: TestControlPlane;
  let b: TestControlPlane;
  /** a, b, and one started while Redis is away */
  const replicas: TestControlPlane[] = [];
  let ws: string;
  let mcpPath: string;
  let session: { client: Client; transport: StreamableHTTPClientTransport };
  const samples: Sample[] = [];
  let phase = 'Redis up';
  const acknowledged: string[] = [];

  /** One request of the load, timed; `ok` is what the test expects of it whatever Redis does. */
  async function timed(what: string, run: () => Promise<boolean | TestResponse>): Promise<void> {
    const started = performance.now();
    let ok = false;
    let detail = '';
    try {
      const result = await bounded(run());
      ok = typeof result === 'boolean' ? result : result.status < 300;
      if (typeof result !== 'boolean') detail = `${result.status} ${result.status >= 300 ? result.text : ''}`;
    } catch (error) {
      detail = String(error);
    }
    samples.push({ phase, what, ms: performance.now() - started, ok, detail });
  }

  /** REST writes on both replicas and MCP calls on the owner (each bounded), until the returned function is called. */
  function steadyLoad(): () => Promise<void> {
    let running = true;
    const loops = [
      (async () => {
        for (let i = 0; running; i++) {
          const slug = uniqueSlug('load');
          await timed('POST /v1/workspaces', async () => {
            const res = await (i % 2 ? b : a).request('POST', '/v1/workspaces', {
              token: a.ownerToken,
              body: { slug, name: slug },
            });
            if (res.status === 201) acknowledged.push(slug);
            return res;
          });
          await new Promise((r) => setTimeout(r, 150));
        }
      })(),
      (async () => {
        for (let i = 0; running; i++) {
          await timed('MCP tools/call on the owning replica', async () =>
            textOf(await session.client.callTool({ name: 'echo', arguments: { message: `call ${i}` } })).includes(
              `call ${i}`,
            ),
          );
          await new Promise((r) => setTimeout(r, 150));
        }
      })(),
    ];
    return async () => {
      running = false;
      await Promise.all(loops);
    };
  }

  async function answersWithin<T>(what: string, run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const result = await bounded(run());
    const ms = performance.now() - started;
    samples.push({ phase, what, ms, ok: true, detail: '' });
    expect(ms, what).toBeLessThan(BOUND_MS);
    return result;
  }

  /** What needs Redis, asked while it is away: quick, clear refusals; the rest works. */
  async function duringTheOutage(): Promise<void> {
    const ready = await answersWithin('GET /readyz', () => a.request('GET', '/readyz', { token: null }));
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ code: 'NOT_READY', redis: false, database: true });

    // a session of A's, asked for through B: B cannot look up where it lives
    const viaB = await answersWithin('MCP request through the other replica', () =>
      b.request('POST', mcpPath, {
        token: a.ownerToken,
        headers: {
          'mcp-session-id': session.transport.sessionId!,
          'mcp-protocol-version': '2025-11-25',
          accept: 'application/json, text/event-stream',
        },
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      }),
    );
    expect(viaB.status, viaB.text).toBe(503);
    expect(viaB.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(viaB.body.code).toBe('REDIS_UNAVAILABLE');
    expect(Number(viaB.headers.get('retry-after'))).toBeGreaterThan(0);

    const stream = await answersWithin('GET …/events (a new stream)', () =>
      b.request('GET', `/v1/workspaces/${ws}/events`, {
        token: a.ownerToken,
        headers: { accept: 'text/event-stream' },
      }),
    );
    expect(stream.status, stream.text).toBe(503);
    expect(stream.body.code).toBe('REDIS_UNAVAILABLE');
    expect(stream.headers.get('retry-after')).not.toBeNull();
  }

  /** The load goes on while Redis is away: writes commit, the owner's MCP session answers. */
  async function workGoesOn(): Promise<void> {
    for (const what of ['POST /v1/workspaces', 'MCP tools/call on the owning replica']) {
      await expect
        .poll(() => samples.filter((s) => s.phase === phase && s.what === what && s.ok).length, { timeout: 10_000 })
        .toBeGreaterThanOrEqual(3);
    }
  }

  /** Ready again, by itself, and what needed Redis works again. */
  async function recovered(): Promise<void> {
    for (const replica of replicas)
      await expect
        .poll(async () => (await replica.request('GET', '/readyz', { token: null })).status, {
          timeout: 15_000,
          interval: 200,
        })
        .toBe(200);
    const viaB = await b.request('POST', mcpPath, {
      token: a.ownerToken,
      headers: {
        'mcp-session-id': session.transport.sessionId!,
        'mcp-protocol-version': '2025-11-25',
        accept: 'application/json, text/event-stream',
      },
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    });
    // after a restart Redis is empty: A announces its sessions again when Redis is back
    expect(viaB.status, viaB.text).toBe(200);
  }

  /** An open event stream ends with a reason, so its client reconnects with Last-Event-ID. */
  function anEventStream(): { ended: Promise<string>; opened: Promise<void> } {
    let opened!: () => void;
    const openedPromise = new Promise<void>((resolve) => (opened = resolve));
    const ended = (async () => {
      const response = await fetch(`${a.url}/v1/workspaces/${ws}/events`, {
        headers: { authorization: `Bearer ${a.ownerToken}`, accept: 'text/event-stream' },
      });
      expect(response.status).toBe(200);
      let text = '';
      const decoder = new TextDecoder();
      for await (const chunk of response.body!) {
        text += decoder.decode(chunk as Uint8Array, { stream: true });
        if (text.includes(': connected')) opened();
      }
      return text;
    })();
    return { ended, opened: openedPromise };
  }

  /** Redis away under the load, with a stream open, then back. */
  async function anOutage(
    how: string,
    away: () => void,
    back: () => void | Promise<void>,
    meanwhile?: () => Promise<void>,
  ): Promise<void> {
    const stream = anEventStream();
    await stream.opened;
    away();
    phase = `Redis ${how}`;
    try {
      await duringTheOutage();
      await workGoesOn();
      await meanwhile?.();
      const ended = await bounded(stream.ended);
      expect(ended).toContain('event: stream.ended');
      expect(ended).toContain('live events interrupted');
    } finally {
      await back();
      phase = `Redis back after being ${how}`;
    }
    await recovered();
    phase = 'Redis up';
  }

  /** Every replica runs the outbox's jobs: each knows the test's consumer. */
  async function aReplica(env: Record<string, string>): Promise<TestControlPlane> {
    const replica = a ? await aReplicaOf(a, env) : await startTestControlPlane('postgres', env);
    replicas.push(replica);
    replica.cp.app.get(OutboxService).addConsumer({
      name: 'outage-recorder',
      topics: ['workspace.created'],
      handle: async (message, tx) =>
        void (await tx.$executeRaw`INSERT INTO test_effects (message_id, consumer) VALUES (${message.id}, 'outage-recorder')`),
    });
    return replica;
  }

  /** A replica started while Redis is away starts, serves what needs no Redis, and is not ready. */
  async function aReplicaStartsWithoutRedis(): Promise<void> {
    const c = await aReplica({ REDIS_URL: redis.url, AILERON_QUEUE_PREFIX: 'outage' });
    const slug = uniqueSlug('late');
    const created = await answersWithin('POST /v1/workspaces on a replica started without Redis', () =>
      c.request('POST', '/v1/workspaces', { token: a.ownerToken, body: { slug, name: slug } }),
    );
    expect(created.status, created.text).toBe(201);
    acknowledged.push(slug);
    expect((await c.request('GET', '/readyz', { token: null })).status).toBe(503);
  }

  beforeAll(async () => {
    redis = await startRedis();
    const env = { REDIS_URL: redis.url, AILERON_QUEUE_PREFIX: 'outage' };
    a = await aReplica(env);
    await a.cp.database.client.$executeRawUnsafe(
      'CREATE TABLE test_effects (message_id text NOT NULL, consumer text NOT NULL)',
    );
    b = await aReplica(env);
    ws = (await aWorkspace(a, a.ownerToken)).slug;
    await a.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
    const server = await aRemoteServer(a, a.ownerToken, ws, SERVERS.everything);
    mcpPath = `/mcp/${ws}/${server}`;
    session = await connect(a, a.ownerToken, mcpPath);
  });
  afterAll(async () => {
    await session?.client.close().catch(() => undefined);
    for (const replica of replicas.reverse()) await replica.close();
    redis?.stop();
  });

  it('answers at once while Redis is stopped or killed, and recovers without a restart, losing nothing', async () => {
    const stop = steadyLoad();
    try {
      await expect.poll(() => acknowledged.length, { timeout: 10_000 }).toBeGreaterThan(2);

      // stopped: connections stay open and nothing answers
      await anOutage(
        'stopped',
        () => redis.pause(),
        () => redis.resume(),
      );
      // killed: connections refused, then a fresh, empty Redis on the same port
      await anOutage(
        'killed',
        () => redis.kill(),
        () => redis.restart(),
        aReplicaStartsWithoutRedis,
      );
      // a little load after the return: BullMQ and the bus work again
      const before = acknowledged.length;
      await expect.poll(() => acknowledged.length, { timeout: 10_000 }).toBeGreaterThan(before + 2);
    } finally {
      await stop();
    }

    const slow = samples.filter((s) => s.ms >= BOUND_MS);
    expect(slow.map((s) => `${s.phase}, ${s.what}: ${Math.round(s.ms)} ms`)).toEqual([]);
    const failed = samples.filter((s) => !s.ok);
    expect(failed.map((s) => `${s.phase}, ${s.what}: ${s.detail}`)).toEqual([]);

    // every acknowledged write is there, and its message reached the consumer exactly once
    const listed = new Set((await everyItem<{ slug: string }>(a, '/v1/workspaces')).map((w) => w.slug));
    expect(acknowledged.filter((slug) => !listed.has(slug))).toEqual([]);
    const db = a.cp.database.client;
    const messages = async (): Promise<{ id: string; deliveries: number }[]> =>
      db.$queryRaw`SELECT m.id::text AS id, (SELECT count(*)::int FROM test_effects e WHERE e.message_id = m.id::text) AS deliveries
                   FROM outbox_messages m WHERE m.topic = 'workspace.created' AND m.payload->>'workspace' = ANY(${acknowledged}::text[])`;
    await expect
      .poll(async () => (await messages()).filter((m) => m.deliveries === 0).length, { timeout: 30_000, interval: 250 })
      .toBe(0);
    const all = await messages();
    expect(all).toHaveLength(acknowledged.length);
    expect(all.filter((m) => m.deliveries !== 1)).toEqual([]);
  });
});
