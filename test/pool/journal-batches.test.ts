import { closeSync, openSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ExecutionJournal } from '@aileron/pool';
import { aWorkspace } from '../support/builders';
import { advanceClock } from '../support/clock';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { HttpUpstream } from './http-upstream';
import { aRemoteServer, connect, textOf } from './mcp-client';

const KEY = 'upstream-key-journal-batches';

/** A control plane whose batches are due after `batchMs`, with an upstream the workspace calls as `greeter`. */
function withGreeter(
  batchMs: number,
  env: Record<string, string> = {},
): {
  cp: () => TestControlPlane;
  records: (name: string) => Promise<string[]>;
  path: () => string;
  upstream: HttpUpstream;
} {
  let cp: TestControlPlane;
  const upstream = new HttpUpstream(KEY);
  let ws: { slug: string; id: string };

  beforeAll(async () => {
    await upstream.start();
    cp = await startTestControlPlane('pglite', { AILERON_POOL_AUDIT_BATCH_MS: String(batchMs), ...env });
    ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      token: cp.ownerToken,
      body: { default: 'allow', rules: [] },
    });
    const put = await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/upstream/authorization`, {
      token: cp.ownerToken,
      body: { value: `Bearer ${KEY}` },
    });
    expect(put.status, put.text).toBe(200);
    await aRemoteServer(
      cp,
      cp.ownerToken,
      ws.slug,
      { transport: 'streamable_http', url: upstream.url, headers: { Authorization: 'vault://upstream/authorization' } },
      'greeter',
    );
  }, 60_000);
  // each test starts with no batch pending
  beforeEach(() => cp.cp.app.get(ExecutionJournal).flush());
  afterAll(async () => {
    await cp?.close();
    await upstream.stop();
  });

  /** the execution records of the call made with `name`: its start, and its end once written (records of an execution share its id) */
  async function records(name: string): Promise<string[]> {
    const res = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?execution_mode=remote&limit=100`, {
      token: cp.ownerToken,
    });
    expect(res.status, res.text).toBe(200);
    const events = res.body.events as { type: string; data: { execution_id: string; arguments?: { name?: string } } }[];
    const started = events.find((e) => e.type === 'execution.started' && e.data.arguments?.name === name);
    return started
      ? events
          .filter((e) => e.data.execution_id === started.data.execution_id)
          .map((e) => e.type)
          .sort()
      : [];
  }
  return { cp: () => cp, records, path: () => `/mcp/${ws.slug}/greeter`, upstream };
}

/**
 * When execution records reach the audit log. The embedded database's
 * statements block the thread, and an answer arriving meanwhile waits for
 * them: a batch that is due is written once no call waits for its answer
 * (after the last one's end) and no call came for a moment
 * (`AILERON_POOL_AUDIT_QUIET_MS`); while calls keep overlapping, once it is
 * an interval overdue, right after the next call's request is out (written
 * then, they fill the wait for the answer); at the latest two intervals
 * after its first record.
 */
describe('execution record batches', () => {
  describe('a due batch and the calls around it', () => {
    // long: no batch is written on its own while a test runs; the test moves the clock instead
    const BATCH_MS = 60_000;
    const { cp, records, path, upstream } = withGreeter(BATCH_MS);

    /** a call of the upstream's `wait` tool, once it waits there for the test's release (its answer, wrapped: not awaited) */
    async function aWaitingCall(client: Awaited<ReturnType<typeof connect>>['client']) {
      const answer = client.callTool({ name: 'wait', arguments: {} });
      await eventually('the call at the upstream', () => upstream.waitingCalls === 1);
      return { answer };
    }

    it('writes a due batch once no call waits for its answer: after the next call’s end, that call included', async () => {
      const { client } = await connect(cp(), cp().ownerToken, path());
      try {
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'first' } }))).toBe('Hello, first');
        expect(await records('first')).toEqual([]);
        // the interval passes with no call; the batch is due but waits for one
        advanceClock(cp(), BATCH_MS + 1);
        expect(await records('first')).toEqual([]);
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'second' } }))).toBe('Hello, second');
        // written with the second call's start and end, not an interval (60 s) later
        await eventually('the batch with the second call', async () => (await records('second')).length === 2, {
          timeoutMs: 10_000,
        });
        expect(await records('first')).toEqual(['execution.started', 'execution.succeeded']);
      } finally {
        await client.close();
      }
    });

    it('holds a due batch while a call waits for its answer, and writes it when that call ends', async () => {
      const { client } = await connect(cp(), cp().ownerToken, path());
      try {
        const waiting = await aWaitingCall(client);
        advanceClock(cp(), BATCH_MS + 1);
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'beside' } }))).toBe('Hello, beside');
        // a round trip after that call ended: a batch it had set going would be written by now
        expect(await records('beside')).toEqual([]);
        upstream.release();
        expect(textOf(await waiting.answer)).toBe('released');
        await eventually('the batch, once nothing waits', async () => (await records('beside')).length === 2, {
          timeoutMs: 10_000,
        });
      } finally {
        upstream.release();
        await client.close();
      }
    });

    it('writes a batch an interval overdue right after the next call has gone out, though a call still waits', async () => {
      const { client } = await connect(cp(), cp().ownerToken, path());
      try {
        const waiting = await aWaitingCall(client);
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'early' } }))).toBe('Hello, early');
        advanceClock(cp(), 2 * BATCH_MS + 1);
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'late' } }))).toBe('Hello, late');
        // the late call's start went into that batch; the waiting call has not ended
        await eventually('the overdue batch', async () => (await records('late')).includes('execution.started'), {
          timeoutMs: 10_000,
        });
        expect(await records('early')).toEqual(['execution.started', 'execution.succeeded']);
        expect(upstream.waitingCalls).toBe(1);
        upstream.release();
        await waiting.answer;
      } finally {
        upstream.release();
        await client.close();
      }
    });
  });

  describe('a call whose records cannot be journaled', () => {
    const BATCH_MS = 60_000;
    // one call at a time on the instance: a refused call that still counted would turn the next one away
    const { cp, records, path, upstream } = withGreeter(BATCH_MS, { AILERON_POOL_MAX_CONCURRENT_CALLS: '1' });

    it('is refused or answered with an error, never with a result the audit log will not hold, and the session goes on', async () => {
      const { client } = await connect(cp(), cp().ownerToken, path());
      // the journal's open segment, swapped for a descriptor every write to fails (a full disk)
      const journal = cp().cp.app.get(ExecutionJournal) as unknown as { fd: number | null };
      const unwritable = openSync('/dev/null', 'r');
      let segment: number | null = null;
      try {
        // a start that cannot be journaled: the call is refused and never reaches the server
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'before' } }))).toBe('Hello, before');
        segment = journal.fd;
        journal.fd = unwritable;
        await expect(client.callTool({ name: 'wait', arguments: {} })).rejects.toThrow(/Internal error/);
        journal.fd = segment;
        segment = null;
        // a round trip to the same server after it: a forwarded call would be waiting there by now
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'between' } }))).toBe('Hello, between');
        expect(upstream.waitingCalls).toBe(0);

        // an end that cannot be journaled: swapped while the call runs
        const answer = client.callTool({ name: 'wait', arguments: {} });
        await eventually('the call at the upstream', () => upstream.waitingCalls === 1);
        segment = journal.fd;
        journal.fd = unwritable;
        upstream.release();
        await expect(answer).rejects.toThrow(/Internal error/);
        journal.fd = segment;
        segment = null;
        // neither left a call that counts as running: a due batch is written after the next call's end
        advanceClock(cp(), BATCH_MS + 1);
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'after' } }))).toBe('Hello, after');
        await eventually('the batch with the next call', async () => (await records('after')).length === 2, {
          timeoutMs: 10_000,
        });
        expect(await records('between')).toEqual(['execution.started', 'execution.succeeded']);
      } finally {
        if (segment !== null) journal.fd = segment;
        closeSync(unwritable);
        upstream.release();
        await client.close();
      }
    });
  });

  describe('calls in a row', () => {
    const BATCH_MS = 60_000;
    // long, so that the calls of the test surely come within it however slow the machine
    const QUIET_MS = 3_000;
    const { cp, records, path } = withGreeter(BATCH_MS, { AILERON_POOL_AUDIT_QUIET_MS: String(QUIET_MS) });

    it('do not meet a due batch: it waits for a pause in them, and is written in it', async () => {
      const { client } = await connect(cp(), cp().ownerToken, path());
      try {
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'one' } }))).toBe('Hello, one');
        advanceClock(cp(), BATCH_MS + 1);
        // due, and no call waits after each of these: without the pause the batch would go after the first
        let lastStarted = 0;
        for (const name of ['two', 'three', 'four']) {
          // the pause runs from the last call's last record, which is after this moment: a bound with no slack
          lastStarted = Date.now();
          expect(textOf(await client.callTool({ name: 'greet', arguments: { name } }))).toBe(`Hello, ${name}`);
        }
        expect(await records('one')).toEqual([]);
        await eventually('the batch, in the pause', async () => (await records('four')).length === 2, {
          timeoutMs: 15_000,
        });
        expect(Date.now() - lastStarted).toBeGreaterThanOrEqual(QUIET_MS);
        expect(await records('one')).toEqual(['execution.started', 'execution.succeeded']);
      } finally {
        await client.close();
      }
    });
  });

  describe('a batch with no next call', () => {
    const BATCH_MS = 1000;
    const { cp, records, path } = withGreeter(BATCH_MS);

    it('writes it when it falls due, an interval after its first record', async () => {
      const { client } = await connect(cp(), cp().ownerToken, path());
      try {
        const asked = Date.now();
        expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'alone' } }))).toBe('Hello, alone');
        await eventually('the batch', async () => (await records('alone')).length === 2, { timeoutMs: 15_000 });
        expect(Date.now() - asked).toBeGreaterThanOrEqual(BATCH_MS);
      } finally {
        await client.close();
      }
    });
  });
});
