import { ChildProcess, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { migratedDataDir, TEST_ROOT_KEY } from '../support/control-plane';
import { createPostgresDatabase } from '../support/databases';
import { eventually } from '../support/eventually';
import { freePort, freePorts } from '../support/services';
import { CLI, requireBuild, startControlPlaneProcess, stopProcess } from '../support/control-plane-process';
import { EVERYTHING_ENTRY, textOf } from './mcp-client';

const CALLS = 40;
/** Records wait ten minutes for their batch, so only the journal has them. */
const NO_BATCH = { AILERON_POOL_AUDIT_BATCH_MS: '600000' };

/** Every journal segment file under the data directory, whichever process wrote it. */
function segmentsUnder(dir: string): string[] {
  return existsSync(dir)
    ? readdirSync(dir, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.jsonl'))
        .map((f) => join(dir, f))
    : [];
}

/**
 * The admin's API on a control plane process, with server-everything assigned
 * to `workspace` there (made first, allowing every call, unless it is the
 * default one), and an MCP client connected to it through the pool.
 */
async function everythingOn(url: string, token: string, workspace = 'default') {
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
  if (workspace !== 'default')
    expect(
      (await api('POST', '/v1/workspaces', { slug: workspace, name: workspace, policy_default: 'allow' })).status,
    ).toBe(201);
  expect((await api('POST', '/v1/catalog/servers', EVERYTHING_ENTRY)).status).toBe(201);
  expect((await api('PUT', `/v1/workspaces/${workspace}/servers/everything`, { version: '1.0.0' })).status).toBe(200);
  const client = new Client({ name: 'journal-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp/${workspace}/everything`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return { api, client };
}

describe('execution records survive a crash between the answer and the audit write', () => {
  let dataDir: string;
  beforeAll(async () => {
    requireBuild();
    // the subject is the restart after a crash, not the first start: the database is migrated already
    dataDir = await migratedDataDir('aileron-journal-');
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('replays the journal at the next start: the call that was answered is in the audit log, chained once', async () => {
    const port = await freePort();
    const first = await startControlPlaneProcess(dataDir, port, NO_BATCH);
    const token = readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
    const { client } = await everythingOn(first.url, token);
    const result = await client.callTool({ name: 'echo', arguments: { message: 'remember me' } });
    expect(textOf(result)).toContain('remember me');
    // many calls in the journal: every one is replayed
    for (let i = 0; i < CALLS - 1; i++) await client.callTool({ name: 'echo', arguments: { message: `and me ${i}` } });

    // the answer is out; the audit write is not: the process dies now
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    const journal = join(dataDir, 'pool', 'journal');
    const left = segmentsUnder(journal)
      .map((f) => readFileSync(f, 'utf8'))
      .join('');
    expect(left).toContain('execution.succeeded');

    const second = await startControlPlaneProcess(dataDir, port, NO_BATCH);
    try {
      const audit = await fetch(`${second.url}/v1/workspaces/default/audit?execution_mode=remote&tool=echo&limit=500`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const events = (
        (await audit.json()) as {
          events: { type: string; tool: string; seq: number; data: { execution_id: string } }[];
        }
      ).events;
      expect(events.filter((e) => e.type === 'execution.started')).toHaveLength(CALLS);
      expect(events.filter((e) => e.type === 'execution.succeeded')).toHaveLength(CALLS);
      // each call's start is chained before its end, as they happened
      const seqOf = (type: string, execution: string) =>
        events.find((e) => e.type === type && e.data.execution_id === execution)!.seq;
      for (const started of events.filter((e) => e.type === 'execution.started')) {
        expect(seqOf('execution.started', started.data.execution_id)).toBeLessThan(
          seqOf('execution.succeeded', started.data.execution_id),
        );
      }
      const verify = await fetch(`${second.url}/v1/workspaces/default/audit/verify`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(((await verify.json()) as { ok: boolean }).ok).toBe(true);
      expect(segmentsUnder(journal)).toEqual([]);
    } finally {
      await stopProcess(second.child);
    }
  }, 180_000);

  it('leaves nothing behind when it stops cleanly after its batches, not even the segment prepared for the next record', async () => {
    const dir = await migratedDataDir('aileron-journal-clean-');
    const port = await freePort();
    // batches every 100 ms: each one prepares the file the next record will go to
    const cp = await startControlPlaneProcess(dir, port, { AILERON_POOL_AUDIT_BATCH_MS: '100' });
    try {
      const token = readFileSync(join(dir, 'admin-token'), 'utf8').trim();
      const { api, client } = await everythingOn(cp.url, token);
      for (let i = 0; i < 5; i++) await client.callTool({ name: 'echo', arguments: { message: `batched ${i}` } });
      // every call written by a batch: the journal has moved on to a segment prepared for records yet to come
      await eventually('the calls in the audit log', async () => {
        const audit = await api('GET', '/v1/workspaces/default/audit?execution_mode=remote&tool=echo&limit=50');
        const events = ((await audit.json()) as { events: { type: string }[] }).events;
        return events.filter((e) => e.type === 'execution.succeeded').length === 5;
      });
      await client.close();
      expect(await stopProcess(cp.child)).toBe(0);
      // nothing for a later start to replay, and no directory of a process that is gone
      const journal = join(dir, 'pool', 'journal');
      expect(segmentsUnder(journal)).toEqual([]);
      expect(existsSync(journal) ? readdirSync(journal) : []).toEqual([]);
    } finally {
      await stopProcess(cp.child);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  /**
   * Replicas on one machine (or a worker beside the control plane, as in
   * docker-compose) share a data directory. A process starting beside a
   * running one must leave its journal alone: before each process had its
   * own, the newcomer replayed and deleted the open segment, so calls
   * journaled after that went to a deleted file and a crash lost them.
   */
  it("a second process sharing the data directory leaves a running one's journal alone; a crash afterwards loses nothing", async () => {
    const shared = mkdtempSync(join(tmpdir(), 'aileron-journal-shared-'));
    const database = await createPostgresDatabase();
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      AILERON_ROOT_KEY: TEST_ROOT_KEY,
      AILERON_QUEUE_PREFIX: `journal-${Date.now()}`,
      UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32',
      ...NO_BATCH,
    };
    const token = execFileSync(process.execPath, [CLI, 'bootstrap'], {
      env: { ...process.env, ...env, AILERON_DATA_DIR: shared },
      encoding: 'utf8',
    }).trim();
    const [portA, portB] = (await freePorts(2)) as [number, number];
    const started: ChildProcess[] = [];
    try {
      const a = await startControlPlaneProcess(shared, portA, env);
      started.push(a.child);
      const { client } = await everythingOn(a.url, token, 'shared');
      for (let i = 0; i < 5; i++) await client.callTool({ name: 'echo', arguments: { message: `before ${i}` } });

      const b = await startControlPlaneProcess(shared, portB, env);
      started.push(b.child);
      for (let i = 0; i < 5; i++) await client.callTool({ name: 'echo', arguments: { message: `after ${i}` } });
      a.child.kill('SIGKILL');
      await new Promise((r) => a.child.once('exit', r));

      // the crashed process starts again on the same data directory and takes over what it left
      const again = await startControlPlaneProcess(shared, portA, env);
      started.push(again.child);
      const audit = await fetch(`${again.url}/v1/workspaces/shared/audit?execution_mode=remote&tool=echo&limit=500`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const events = (
        (await audit.json()) as { events: { type: string; data: { arguments?: { message?: string } } }[] }
      ).events;
      expect(events.filter((e) => e.type === 'execution.started')).toHaveLength(10);
      expect(events.filter((e) => e.type === 'execution.succeeded')).toHaveLength(10);
      expect(segmentsUnder(join(shared, 'pool', 'journal'))).toEqual([]);
    } finally {
      for (const child of started) await stopProcess(child);
      await database.drop();
      rmSync(shared, { recursive: true, force: true });
    }
  }, 180_000);
});
