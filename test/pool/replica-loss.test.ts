import { ChildProcess, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { TEST_ROOT_KEY } from '../support/control-plane';
import { createPostgresDatabase } from '../support/databases';
import { freePort } from '../support/services';
import { CLI, requireBuild, startControlPlaneProcess, stopProcess } from '../support/control-plane-process';
import { EVERYTHING_ENTRY, textOf } from './mcp-client';

const LONG_CALL = 'trigger-long-running-operation';

interface AuditEvent {
  type: string;
  tool: string;
  data: { execution_id?: string; error?: string };
}

/**
 * Two replicas, real processes sharing PostgreSQL, Redis and a data directory.
 * A session opened on A is served through B; A dies (SIGKILL) while a call of
 * that session runs. The MCP protocol's answer for a session the server no
 * longer has is 404, which tells a client to initialize again.
 */
describe('a replica killed mid-session and mid-call', () => {
  const started: ChildProcess[] = [];
  let shared: string;
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let env: Record<string, string>;
  let token: string;

  beforeAll(async () => {
    requireBuild();
    shared = mkdtempSync(join(tmpdir(), 'aileron-replica-loss-'));
    database = await createPostgresDatabase();
    env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      AILERON_ROOT_KEY: TEST_ROOT_KEY,
      AILERON_QUEUE_PREFIX: `replica-loss-${Date.now()}`,
      // the call's start reaches the audit log before A dies: its journal must still know the call runs
      AILERON_POOL_AUDIT_BATCH_MS: '50',
    };
    token = execFileSync(process.execPath, [CLI, 'bootstrap'], {
      env: { ...process.env, ...env, AILERON_DATA_DIR: shared },
      encoding: 'utf8',
    }).trim();
  });
  afterAll(async () => {
    for (const child of started) await stopProcess(child);
    await database?.drop();
    rmSync(shared, { recursive: true, force: true });
  });

  it('answers the session 404 on the survivor at once, drops its directory entry, serves a new session, and the running call ends as execution.failed', async () => {
    const a = await startControlPlaneProcess(shared, await freePort(), env);
    started.push(a.child);
    const b = await startControlPlaneProcess(shared, await freePort(), env);
    started.push(b.child);
    const api = async (base: string, method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
    };
    expect(
      (await api(a.url, 'POST', '/v1/workspaces', { slug: 'replicas', name: 'Replicas', policy_default: 'allow' }))
        .status,
    ).toBe(201);
    expect((await api(a.url, 'POST', '/v1/catalog/servers', EVERYTHING_ENTRY)).status).toBe(201);
    expect((await api(a.url, 'PUT', '/v1/workspaces/replicas/servers/everything', { version: '1.0.0' })).status).toBe(
      200,
    );
    const path = '/mcp/replicas/everything';

    // initialize lands on A; everything after it goes through B
    const transport = new StreamableHTTPClientTransport(new URL(`${a.url}${path}`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: (url, init) => {
        const initialize = typeof init?.body === 'string' && init.body.includes('"method":"initialize"');
        return fetch(initialize ? url : String(url).replace(a.url, b.url), init);
      },
    });
    const client = new Client({ name: 'behind-a-balancer', version: '1.0.0' });
    await client.connect(transport);
    const sessionId = transport.sessionId!;
    expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'via B' } }))).toContain('via B');

    // a call that runs on A for a minute, its answer streaming back through B
    const headers = {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-11-25',
    };
    const call = await fetch(`${b.url}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 50,
        method: 'tools/call',
        params: { name: LONG_CALL, arguments: { duration: 60, steps: 60 }, _meta: { progressToken: 'p' } },
      }),
    });
    expect(call.status).toBe(200);
    const stream = call.body!.getReader();
    // the priming event first, then the call's progress: it runs on A
    let heard = '';
    while (!heard.includes('notifications/progress')) heard += new TextDecoder().decode((await stream.read()).value);
    const audit = async (): Promise<AuditEvent[]> =>
      (await api(b.url, 'GET', `/v1/workspaces/replicas/audit?tool=${LONG_CALL}&limit=50`)).body.events;
    await expect
      .poll(async () => (await audit()).map((e) => e.type), { timeout: 10_000 })
      .toContain('execution.started');

    a.child.kill('SIGKILL');
    await new Promise((resolve) => a.child.once('exit', resolve));
    // the answer being streamed ends with A, not when the client gives up
    const ending = await Promise.race([
      (async () => {
        try {
          while (!(await stream.read()).done);
          return 'ended';
        } catch {
          return 'cut off';
        }
      })(),
      new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 5_000)),
    ]);
    expect.soft(ending).not.toBe('still open');
    void stream.cancel().catch(() => undefined);

    // the session's next request, through B: the protocol's 404, at once
    const asked = Date.now();
    const next = await fetch(`${b.url}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list' }),
    });
    const problem = (await next.json()) as { code: string; status: number };
    expect(next.status).toBe(404);
    expect(problem.code).toBe('MCP_SESSION_NOT_FOUND');
    expect(Date.now() - asked).toBeLessThan(5_000); // a hang guard: a dead replica refuses the connection at once
    const redis = new IORedis(inject('redisUrl'));
    try {
      expect(await redis.exists(`${env.AILERON_QUEUE_PREFIX}:mcp-session:${sessionId}`)).toBe(0);
    } finally {
      redis.disconnect();
    }
    await client.close().catch(() => undefined);

    // a new session on the survivor works at once
    const again = new Client({ name: 'after-the-loss', version: '1.0.0' });
    await again.connect(
      new StreamableHTTPClientTransport(new URL(`${b.url}${path}`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    expect(textOf(await again.callTool({ name: 'echo', arguments: { message: 'still here' } }))).toContain(
      'still here',
    );
    await again.close();

    // the call A was running is in the audit log as failed, recovered from A's journal by B
    await expect
      .poll(async () => (await audit()).map((e) => e.type), { timeout: 15_000 })
      .toContain('execution.failed');
    const events = await audit();
    const start = events.find((e) => e.type === 'execution.started')!;
    const failed = events.filter((e) => e.type === 'execution.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data.execution_id).toBe(start.data.execution_id);
    expect(failed[0]!.data.error).toContain('stopped');
    // (verify reads the head before the records: an append in between reads as a bad chain until the next look)
    await expect
      .poll(async () => (await api(b.url, 'GET', '/v1/workspaces/replicas/audit/verify')).body.ok, { timeout: 10_000 })
      .toBe(true);
  }, 240_000);
});
