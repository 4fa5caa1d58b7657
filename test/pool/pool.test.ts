import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionRecordSchema } from '@aileron/audit';
import { ExecutionJournal, PoolInstances } from '@aileron/pool';
import { People } from '../approvals/people';
import { aGateway, aToken, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aRemoteServer, connect, SERVERS, textOf } from './mcp-client';

const CANARY_A = 'canary-A-7f3e9b1c5d2a4e6f';
const CANARY_B = 'canary-B-0a1b2c3d4e5f6a7b';

/** Everything the control plane prints while `run` runs (pino writes JSON lines to stdout). */
async function capturingLogs<T>(run: () => Promise<T>): Promise<{ value: T; logs: string }> {
  const chunks: string[] = [];
  const out = process.stdout.write.bind(process.stdout);
  const err = process.stderr.write.bind(process.stderr);
  const capture = (write: typeof out) =>
    ((chunk: unknown, ...rest: unknown[]) => {
      chunks.push(String(chunk));
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof out;
  process.stdout.write = capture(out);
  process.stderr.write = capture(err);
  try {
    return { value: await run(), logs: chunks.join('') };
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
}

function environOf(pid: number): Record<string, string> {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

describe('the remote MCP pool', () => {
  let cp: TestControlPlane;
  const people = new People();

  beforeAll(async () => {
    // LOG_LEVEL info so the canary check sees everything an operator would
    cp = await startApiControlPlane({ LOG_LEVEL: 'info', AILERON_POOL_APPROVAL_WAIT_SECONDS: '2' });
    await people.start();
    await people.trustedBy(cp);
  });
  afterAll(async () => {
    await cp?.close();
    await people.stop();
  });

  /** A workspace whose policy allows everything, server-everything assigned, and the owner's MCP session on it. */
  async function everythingAllowed(): Promise<{
    ws: Awaited<ReturnType<typeof aWorkspace>>;
    client: Awaited<ReturnType<typeof connect>>['client'];
  }> {
    const ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      token: cp.ownerToken,
      body: { default: 'allow', rules: [] },
    });
    const name = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything);
    return { ws, client: (await connect(cp, cp.ownerToken, `/mcp/${ws.slug}/${name}`)).client };
  }

  /** Opens a session with raw Streamable HTTP and its stream of server messages; `ended` resolves when that stream closes. */
  async function aSessionStream(path: string, token: string): Promise<{ sessionId: string; ended: Promise<void> }> {
    const headers = {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    const init = await fetch(`${cp.url}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 'revocation-test', version: '1.0.0' },
        },
      }),
    });
    expect(init.status, await init.clone().text()).toBe(200);
    await init.body?.cancel();
    const sessionId = init.headers.get('mcp-session-id')!;
    const session = { ...headers, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
    expect(
      (
        await fetch(`${cp.url}${path}`, {
          method: 'POST',
          headers: session,
          body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
        })
      ).status,
    ).toBe(202);
    const stream = await fetch(`${cp.url}${path}`, { headers: { ...session, accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    const ended = (async () => {
      for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return;
    })();
    return { sessionId, ended };
  }

  it("ends an MCP session and its stream the moment its caller's token or gateway is revoked", async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      token: cp.ownerToken,
      body: { default: 'allow', rules: [] },
    });
    const name = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything);
    const token = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    const asToken = await aSessionStream(`/mcp/${ws.slug}/${name}`, token.token);
    const asGateway = await aSessionStream(`/mcp/${ws.slug}/${name}`, gateway.token);
    const asOwner = await aSessionStream(`/mcp/${ws.slug}/${name}`, cp.ownerToken);

    expect((await cp.request('DELETE', `/v1/tokens/${token.id}`)).status).toBe(204);
    await asToken.ended; // the test's timeout is the hang guard
    expect((await cp.request('DELETE', `/v1/workspaces/${ws.slug}/gateways/${gateway.id}`)).status).toBe(200);
    await asGateway.ended;
    // the owner's session was not touched
    const stillThere = await cp.request('POST', `/mcp/${ws.slug}/${name}`, {
      headers: {
        'mcp-session-id': asOwner.sessionId,
        'mcp-protocol-version': '2025-11-25',
        accept: 'application/json, text/event-stream',
      },
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    });
    expect(stillThere.status, stillThere.text).toBe(200);
  });

  it('aggregates two servers behind /mcp/{ws} and applies allow, deny and approval to each', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const alpha = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything, 'alpha');
    const beta = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.memory, 'beta');
    const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      token: cp.ownerToken,
      body: {
        default: 'deny',
        rules: [
          { id: 'alpha-echo', effect: 'allow', servers: [alpha], tools: ['echo', 'get-sum'] },
          { id: 'alpha-no-sums', effect: 'deny', servers: [alpha], tools: ['get-sum'] },
          { id: 'beta-read', effect: 'allow', servers: [beta], tools: ['read_graph', 'search_nodes'] },
          { id: 'beta-writes-need-approval', effect: 'approval', servers: [beta], tools: ['create_entities'] },
        ],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    const approver = await people.aPerson(cp, ws.slug, 'approver');

    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws.slug}`);
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    // a denied tool is never listed; allowed and approval-gated ones are, namespaced
    expect(names).toEqual(['alpha__echo', 'beta__create_entities', 'beta__read_graph', 'beta__search_nodes']);

    const echoed = await client.callTool({ name: 'alpha__echo', arguments: { message: 'through the aggregate' } });
    expect(echoed.isError).toBeFalsy();
    expect(textOf(echoed)).toContain('through the aggregate');

    const denied = await client.callTool({ name: 'alpha__get-sum', arguments: { a: 1, b: 2 } });
    expect(denied.isError).toBe(true);
    expect(textOf(denied)).toContain('alpha-no-sums');

    const graph = await client.callTool({ name: 'beta__read_graph', arguments: {} });
    expect(graph.isError).toBeFalsy();

    // approval: the call waits (2 s here), then tells the client where to get it approved
    const entities = { entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] };
    const pending = await client.callTool({ name: 'beta__create_entities', arguments: entities });
    expect(pending.isError).toBe(true);
    const refusal = (pending._meta as Record<string, { code: string; approval_id: string; review_url: string }>)[
      'aileron/refusal'
    ]!;
    expect(refusal.code).toBe('APPROVAL_PENDING');
    expect(refusal.review_url).toContain(`/review/${refusal.approval_id}`);
    expect((await client.callTool({ name: 'beta__read_graph', arguments: {} })).content).not.toContain('Ada');

    const decided = await cp.request('POST', `/v1/approvals/${refusal.approval_id}/approve`, {
      token: approver.token,
      body: { reason: 'fine' },
    });
    expect(decided.status, decided.text).toBe(200);

    // a retry with other arguments is a different call and needs its own approval
    const other = await client.callTool({
      name: 'beta__create_entities',
      arguments: { entities: [{ name: 'Grace', entityType: 'person', observations: [] }] },
    });
    expect((other._meta as Record<string, { code: string }>)['aileron/refusal']!.code).toBe('APPROVAL_PENDING');

    // the identical retry runs, once
    const created = await client.callTool({ name: 'beta__create_entities', arguments: entities });
    expect(created.isError, textOf(created)).toBeFalsy();
    expect(textOf(await client.callTool({ name: 'beta__read_graph', arguments: {} }))).toContain('Ada');
    const again = await client.callTool({ name: 'beta__create_entities', arguments: entities });
    expect((again._meta as Record<string, { code: string }>)['aileron/refusal']!.code).toBe('APPROVAL_PENDING');
    await client.close();

    // everything that ran or was refused is in the audit log, as remote executions
    await cp.cp.app.get(ExecutionJournal).flush();
    const audit = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?execution_mode=remote&limit=100`, {
      token: cp.ownerToken,
    });
    expect(audit.status, audit.text).toBe(200);
    const records = audit.body.events as {
      type: string;
      server: string;
      tool: string;
      decision: string;
      session_id?: string;
      data: Record<string, unknown>;
    }[];
    const kinds = records.map((r) => `${r.type} ${r.server}/${r.tool} ${r.decision}`);
    expect(kinds).toContain(`execution.succeeded ${alpha}/echo allow`);
    expect(kinds).toContain(`execution.failed ${alpha}/get-sum deny`);
    expect(kinds).toContain(`execution.started ${beta}/create_entities approved`);
    expect(kinds).toContain(`execution.succeeded ${beta}/create_entities approved`);
    const succeeded = records.find((r) => r.type === 'execution.succeeded' && r.tool === 'echo')!;
    expect(succeeded.data).toMatchObject({ result_bytes: expect.any(Number), latency_ms: expect.any(Number) });
    const verify = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit/verify`, { token: cp.ownerToken });
    expect(verify.body.ok).toBe(true);
  });

  it('records every call whatever its arguments hold, refuses a tool name too long to record, and writes each record in the one execution shape', async () => {
    const { ws, client } = await everythingAllowed();
    // PostgreSQL holds neither NUL nor a lone surrogate: one such call used to fail its whole batch, and keep every
    // call of it (any workspace's) out of the audit log
    for (const args of [
      { message: 'before\u0000after' },
      { message: 'half \ud800 a pair' },
      { message: 'keys', ['k\u0000']: 1, ['\udc00']: 2 },
    ]) {
      const echoed = await client.callTool({ name: 'echo', arguments: args });
      expect(textOf(echoed)).toBe(`Echo: ${args.message}`);
    }
    await expect(client.callTool({ name: 'ec\u0000ho', arguments: {} })).rejects.toThrow(/may not contain NUL/);
    await expect(client.callTool({ name: 'x'.repeat(257), arguments: {} })).rejects.toThrow(
      /A tool name is at most 256 characters; this one has 257/,
    );
    // arguments nested deeper than the audit log walks are refused; a deep but ordinary nesting is recorded
    let deep: unknown = 'bottom';
    for (let i = 0; i < 3_000; i++) deep = { a: deep };
    await expect(client.callTool({ name: 'echo', arguments: { message: 'deep', deep } })).rejects.toThrow(
      /arguments nest deeper than 63 levels/,
    );
    let nested: unknown = 'bottom';
    for (let i = 0; i < 60; i++) nested = [nested];
    expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'nested', nested } }))).toBe(
      'Echo: nested',
    );
    // an upstream's error text as long as the longest name the record holds is recorded whole
    const longest = await client.callTool({ name: 'y'.repeat(256), arguments: {} });
    expect(textOf(longest)).toContain('y'.repeat(256));
    await client.close();

    await cp.cp.app.get(ExecutionJournal).flush();
    const audit = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?execution_mode=remote&limit=100`, {
      token: cp.ownerToken,
    });
    expect(audit.status, audit.text).toBe(200);
    const records = audit.body.events as Record<string, unknown>[];
    const started = records
      .filter((r) => r.type === 'execution.started')
      .map((r) => [r.tool, (r.data as { arguments: unknown }).arguments]);
    expect(started).toEqual(
      expect.arrayContaining([
        ['echo', { message: 'before\uFFFDafter' }],
        ['echo', { message: 'half \uFFFD a pair' }],
        ['echo', { message: 'keys', ['k\uFFFD']: 1, ['\uFFFD']: 2 }],
        ['y'.repeat(256), {}],
        ['echo', { message: 'nested', nested }],
      ]),
    );
    expect(records.filter((r) => r.type !== 'execution.started')).toHaveLength(5);
    // what the pool writes is what a gateway's local calls are checked against
    for (const r of records)
      expect(
        executionRecordSchema.safeParse({
          type: r.type,
          execution_mode: r.execution_mode,
          server: r.server,
          tool: r.tool,
          decision: r.decision,
          principal: r.principal,
          session: r.session,
          data: r.data,
        }).error,
      ).toBeUndefined();
    const verify = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit/verify`, { token: cp.ownerToken });
    expect(verify.body.ok).toBe(true);
  });

  it('gives two workspaces their own instances and credentials, keeps each session to its owner, and never shows the secret', async () => {
    const a = await aWorkspace(cp, cp.ownerToken);
    const b = await aWorkspace(cp, cp.ownerToken);
    for (const [ws, canary] of [
      [a.slug, CANARY_A],
      [b.slug, CANARY_B],
    ] as const) {
      const put = await cp.request('PUT', `/v1/workspaces/${ws}/secrets/upstream/api-key`, {
        token: cp.ownerToken,
        body: { value: canary },
      });
      expect(put.status, put.text).toBe(200);
      await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
        token: cp.ownerToken,
        body: { default: 'allow', rules: [] },
      });
    }
    const published = await cp.request('POST', '/v1/catalog/servers', {
      token: cp.ownerToken,
      body: {
        name: 'shared',
        version: '1.0.0',
        mode: 'remote',
        transport: 'stdio',
        ...SERVERS.everything,
        env: { UPSTREAM_API_KEY: 'vault://upstream/api-key', PLAIN: 'visible' },
      },
    });
    expect(published.status, published.text).toBe(201);
    for (const ws of [a.slug, b.slug]) {
      const assigned = await cp.request('PUT', `/v1/workspaces/${ws}/servers/shared`, {
        token: cp.ownerToken,
        body: { version: '1.0.0' },
      });
      expect(assigned.status, assigned.text).toBe(200);
    }

    const { value, logs } = await capturingLogs(async () => {
      const sessionA = await connect(cp, cp.ownerToken, `/mcp/${a.slug}/shared`);
      const sessionB = await connect(cp, cp.ownerToken, `/mcp/${b.slug}/shared`);
      const listed = JSON.stringify(await sessionA.client.listTools());
      const echoed = JSON.stringify(await sessionA.client.callTool({ name: 'echo', arguments: { message: 'hello' } }));
      JSON.stringify(await sessionB.client.callTool({ name: 'echo', arguments: { message: 'hello' } }));
      return { sessionA, sessionB, seenByClient: listed + echoed };
    });

    const pool = cp.cp.app.get(PoolInstances);
    const [instanceA] = pool.list({ workspaceId: a.id } as never);
    const [instanceB] = pool.list({ workspaceId: b.id } as never);
    expect(instanceA!.id).not.toBe(instanceB!.id);
    expect(instanceA!.pid).not.toBe(instanceB!.pid);
    // the process that starts on the host (bwrap) holds none of it: only our own PATH
    expect(environOf(instanceA!.pid!)).toEqual({ PATH: '/usr/local/bin:/usr/bin:/bin' });
    // each server got its own workspace's secret, and only its own variables
    const envOf = async (client: typeof value.sessionA.client) =>
      JSON.parse(
        ((await client.callTool({ name: 'get-env', arguments: {} })).content as { text: string }[])[0]!.text,
      ) as Record<string, string>;
    const envA = await envOf(value.sessionA.client);
    const envB = await envOf(value.sessionB.client);
    expect(envA.UPSTREAM_API_KEY).toBe(CANARY_A);
    expect(envB.UPSTREAM_API_KEY).toBe(CANARY_B);
    expect(envA.PLAIN).toBe('visible');
    expect(
      Object.keys(envA).filter((k) => !['PATH', 'HOME', 'TMPDIR', 'PWD', 'UPSTREAM_API_KEY', 'PLAIN'].includes(k)),
    ).toEqual([]);
    expect(
      envA.DATABASE_URL ?? envA.AILERON_ROOT_KEY ?? envA.AILERON_DATA_DIR ?? envA.AILERON_BRIDGE_TOKEN,
    ).toBeUndefined();

    // the caller's token never goes upstream, and the secret never comes back, nor reaches logs
    expect(JSON.stringify(envA)).not.toContain(cp.ownerToken);
    expect(value.seenByClient).not.toContain(CANARY_A);
    expect(logs).not.toContain(CANARY_A);
    expect(logs).not.toContain(CANARY_B);
    await cp.cp.app.get(ExecutionJournal).flush();
    for (const ws of [a.slug, b.slug]) {
      const exported = await cp.request('GET', `/v1/workspaces/${ws}/audit/export?format=jsonl`, {
        token: cp.ownerToken,
      });
      expect(exported.status).toBe(200);
      expect(exported.text).toContain('secret.read');
      expect(exported.text).not.toContain(CANARY_A);
      expect(exported.text).not.toContain(CANARY_B);
    }

    // B's session id is no use on A's endpoint, nor to another caller on B's own
    const sessionB = value.sessionB.transport.sessionId!;
    const crossWorkspace = await cp.request('POST', `/mcp/${a.slug}/shared`, {
      token: cp.ownerToken,
      headers: { 'mcp-session-id': sessionB, accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    expect(crossWorkspace.status).toBe(404);
    expect(crossWorkspace.body.code).toBe('MCP_SESSION_NOT_FOUND');
    const member = await people.aPerson(cp, b.slug, 'member');
    const otherCaller = await cp.request('POST', `/mcp/${b.slug}/shared`, {
      token: member.token,
      headers: { 'mcp-session-id': sessionB, accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    expect(otherCaller.status).toBe(404);
    await value.sessionA.client.close();
    await value.sessionB.client.close();
  });

  it('answers a call whose instance is killed with a clear error within a second, and serves the next from a restarted instance', async () => {
    const { ws, client } = await everythingAllowed();
    await client.callTool({ name: 'echo', arguments: { message: 'warm' } });
    const pool = cp.cp.app.get(PoolInstances);
    const [before] = pool.list({ workspaceId: ws.id } as never);

    let progress = 0;
    const call = client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } },
      undefined,
      { timeout: 30_000, onprogress: () => progress++ },
    );
    const outcome = call.then(
      (result) => ({ result, at: Date.now() }),
      (error: unknown) => ({ error: error as Error, at: Date.now() }),
    );
    await eventually('the call to be running', () => progress > 0);
    const killedAt = Date.now();
    process.kill(before!.pid!, 'SIGKILL');
    const settled = await outcome;
    // a hang guard far under the call's 20 s: it ends with the instance, not when the operation would have
    expect(settled.at - killedAt).toBeLessThan(10_000);
    expect('error' in settled ? settled.error.message : textOf(settled.result)).toMatch(/stopped|exited|killed|broke/);

    const next = await client.callTool({ name: 'echo', arguments: { message: 'after the crash' } });
    expect(textOf(next)).toContain('after the crash');
    const [after] = pool.list({ workspaceId: ws.id } as never);
    expect(after!.pid).not.toBe(before!.pid);
    await client.close();
  });

  it('refuses an unknown server, a local server and a request without a session with problem codes', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    const headers = { accept: 'application/json, text/event-stream' };
    const unknown = await cp.request('POST', `/mcp/${ws.slug}/nope`, { token: cp.ownerToken, headers, body: init });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('MCP_SERVER_NOT_FOUND');
    const local = await cp.request('POST', '/v1/catalog/servers', {
      token: cp.ownerToken,
      body: { name: 'laptop-only', version: '1.0.0', mode: 'local', transport: 'stdio', command: 'true' },
    });
    expect(local.status, local.text).toBe(201);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/servers/laptop-only`, {
      token: cp.ownerToken,
      body: { version: '1.0.0' },
    });
    const notRemote = await cp.request('POST', `/mcp/${ws.slug}/laptop-only`, {
      token: cp.ownerToken,
      headers,
      body: init,
    });
    expect(notRemote.body.code).toBe('MCP_SERVER_NOT_REMOTE');
    const noSession = await cp.request('POST', `/mcp/${ws.slug}`, {
      token: cp.ownerToken,
      headers,
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    });
    expect(noSession.status).toBe(400);
    expect(noSession.body.code).toBe('MCP_SESSION_REQUIRED');
    const evilOrigin = await cp.request('POST', `/mcp/${ws.slug}`, {
      token: cp.ownerToken,
      headers: { ...headers, origin: 'https://evil.example' },
      body: init,
    });
    expect(evilOrigin.status).toBe(403);
    expect(evilOrigin.body.code).toBe('ORIGIN_NOT_ALLOWED');
    const anonymous = await cp.request('POST', `/mcp/${ws.slug}`, { token: '', headers, body: init });
    expect(anonymous.status).toBe(401);
  });
});
