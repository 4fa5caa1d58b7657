import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ExecutionJournal } from '@aileron/pool';
import { aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { HttpUpstream } from './http-upstream';
import { aRemoteServer, connect, textOf } from './mcp-client';

const KEY = 'upstream-key-journal-batches';
const BATCH_MS = 1000;

/**
 * When execution records reach the audit log. A batch that is due waits for
 * the next call to start and is written once that call's request is out (the
 * embedded database's statements block the thread; written then, they fill
 * the wait for the answer); with no call it is written half an interval later.
 */
describe('execution record batches', () => {
  let cp: TestControlPlane;
  const upstream = new HttpUpstream(KEY);
  let ws: { slug: string; id: string };

  beforeAll(async () => {
    await upstream.start();
    cp = await startTestControlPlane('pglite', { AILERON_POOL_AUDIT_BATCH_MS: String(BATCH_MS) });
    ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { token: cp.ownerToken, body: { default: 'allow', rules: [] } });
    const put = await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/upstream/authorization`, { token: cp.ownerToken, body: { value: `Bearer ${KEY}` } });
    expect(put.status, put.text).toBe(200);
    await aRemoteServer(cp, cp.ownerToken, ws.slug, { transport: 'streamable_http', url: upstream.url, headers: { Authorization: 'vault://upstream/authorization' } }, 'greeter');
  }, 60_000);
  // each test starts with no batch pending
  beforeEach(() => cp.cp.app.get(ExecutionJournal).flush());
  afterAll(async () => {
    await cp?.close();
    await upstream.stop();
  });

  /** the execution records of the call made with `name`: its start, and its end once written (records of an execution share its id) */
  async function recordsOf(name: string): Promise<string[]> {
    const res = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?execution_mode=remote&limit=100`, { token: cp.ownerToken });
    expect(res.status, res.text).toBe(200);
    const events = res.body.events as { type: string; data: { execution_id: string; arguments?: { name?: string } } }[];
    const started = events.find((e) => e.type === 'execution.started' && e.data.arguments?.name === name);
    return started ? events.filter((e) => e.data.execution_id === started.data.execution_id).map((e) => e.type).sort() : [];
  }

  async function within(ms: number, probe: () => Promise<boolean>): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (await probe()) return true;
      await new Promise((r) => setTimeout(r, 20));
    }
    return probe();
  }

  it('writes a due batch as soon as the next call has gone out, that call’s start included', async () => {
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws.slug}/greeter`);
    try {
      expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'first' } }))).toBe('Hello, first');
      // the batch is due after BATCH_MS and written by BATCH_MS * 1.5 at the latest; the next call comes in between
      await new Promise((r) => setTimeout(r, BATCH_MS * 1.2));
      expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'second' } }))).toBe('Hello, second');
      // the second call's start went into that batch: in the log long before another interval has passed
      expect(await within(BATCH_MS / 4, async () => (await recordsOf('second')).includes('execution.started'))).toBe(true);
      expect(await recordsOf('first')).toEqual(['execution.started', 'execution.succeeded']);
    } finally {
      await client.close();
    }
  });

  it('writes a batch without a next call half an interval after it was due', async () => {
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws.slug}/greeter`);
    try {
      const asked = Date.now();
      expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'alone' } }))).toBe('Hello, alone');
      expect(await within(BATCH_MS * 3, async () => (await recordsOf('alone')).length === 2)).toBe(true);
      expect(Date.now() - asked).toBeGreaterThanOrEqual(BATCH_MS);
    } finally {
      await client.close();
    }
  });
});
