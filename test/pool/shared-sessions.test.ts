import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, ClientCapabilities, Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { aWorkspace, uniqueSlug } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { shared } from '../support/shared-control-plane';
import { call, collect, open, rawSession, SAMPLED, type Seen } from './everything-client';
import { aRemoteServer, SERVERS, textOf } from './mcp-client';

/** clients that answer sampling, forms and roots: server-everything lists its tools that ask them things */
const ANSWERING: ClientCapabilities = { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } };

/** server-everything keeps what a session makes (gzip-file-as-resource) in its process: who sees it tells who shares it */
async function makesAResource(client: Client, name: string): Promise<string> {
  const made = await call(client, 'gzip-file-as-resource', {
    name,
    data: `data:text/plain;base64,${Buffer.from('shared or not').toString('base64')}`,
    outputType: 'resourceLink',
  });
  return (made.content[0] as { uri: string }).uri;
}

async function listed(client: Client): Promise<string[]> {
  return (await client.listResources()).resources.map((r) => r.uri);
}

/** The workspace's running instances of `server` and the MCP sessions each serves. */
async function instancesOf(cp: TestControlPlane, ws: string, server: string): Promise<number[]> {
  const answer = await cp.request('GET', `/v1/workspaces/${ws}/pool/instances`);
  expect(answer.status, answer.text).toBe(200);
  return (answer.body as { items: { server: string; sessions: number }[] }).items
    .filter((i) => i.server === server)
    .map((i) => i.sessions);
}

/** A workspace with server-everything assigned (`sessions` as given, or left out) and a policy that allows everything. */
async function everythingIn(
  cp: TestControlPlane,
  sessions?: 'shared',
): Promise<{ ws: string; server: string; path: string }> {
  const ws = (await aWorkspace(cp, cp.ownerToken)).slug;
  const policy = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
  expect(policy.status, policy.text).toBe(200);
  const server = await aRemoteServer(
    cp,
    cp.ownerToken,
    ws,
    { ...SERVERS.everything, ...(sessions ? { sessions } : {}) },
    uniqueSlug('everything'),
  );
  return { ws, server, path: `/mcp/${ws}/${server}` };
}

describe('sessions: shared — one server-everything for every MCP session of the workspace', () => {
  let cp: TestControlPlane;
  let ws: string;
  let server: string;
  let path: string;
  const clients: Client[] = [];

  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
    ({ ws, server, path } = await everythingIn(cp, 'shared'));
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) {
      await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  async function aClient(): Promise<{ client: Client; seen: Seen; roots: { uri: string; name: string }[] }> {
    const opened = await open(cp, path, ANSWERING);
    clients.push(opened.client);
    return opened;
  }

  it('sessions share the server: one instance counts both, and what one makes the other sees; one leaving ends nothing', async () => {
    const { client: a } = await aClient();
    const { client: b } = await aClient();
    const uri = await makesAResource(a, 'made-by-a.gz');
    expect(await listed(b)).toContain(uri);
    expect(await instancesOf(cp, ws, server)).toEqual([2]);

    await (a.transport as StreamableHTTPClientTransport).terminateSession();
    await eventually(
      'the instance to count one session',
      async () => (await instancesOf(cp, ws, server)).join() === '1',
    );
    // the same server process answers: the shared upstream session outlived the session that opened it
    expect(textOf(await call(b, 'echo', { message: 'still here' }))).toBe('Echo: still here');
    expect(await listed(b)).toContain(uri);
  });

  it('two sessions sending the same request id at once each get their own answer and their own progress', async () => {
    const sessions = [rawSession(cp, path), rawSession(cp, path)];
    await Promise.all(sessions.map((s) => s.initialize()));
    const runs = [
      { duration: 1, steps: 2 },
      { duration: 1.5, steps: 3 },
    ];
    const seen = await Promise.all(
      sessions.map(async (session, i) => {
        const stream = await session.post({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: {
            name: 'trigger-long-running-operation',
            arguments: runs[i],
            _meta: { progressToken: 'same-token' },
          },
        });
        const messages: { id?: number; method?: string; params?: Record<string, unknown>; result?: unknown }[] = [];
        while (!messages.some((m) => m.id === 7))
          messages.push(JSON.parse((await stream.next((e) => e.data !== '')).data));
        return messages;
      }),
    );
    for (const [i, messages] of seen.entries()) {
      const { duration, steps } = runs[i]!;
      expect(messages.at(-1)).toMatchObject({
        id: 7,
        result: {
          content: [
            { type: 'text', text: `Long running operation completed. Duration: ${duration} seconds, Steps: ${steps}.` },
          ],
        },
      });
      const progress = messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params);
      expect(progress.length).toBeGreaterThan(0);
      expect(progress).toEqual(
        progress.map((_, n) => ({ progressToken: 'same-token', progress: n + 1, total: steps })),
      );
    }
    await Promise.all(sessions.map((s) => s.terminate()));
  });

  it('a cancelled call ends for its session alone; neither session hears the other’s progress', async () => {
    const a = await aClient();
    const b = await aClient();
    const controller = new AbortController();
    const progressA: Progress[] = [];
    const progressB: Progress[] = [];
    // the SDK's clients number their requests alike and use the id as the progress token: both send the same token
    const cancelled = a.client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 3, steps: 6 } },
      undefined,
      { signal: controller.signal, onprogress: (p) => progressA.push(p) },
    );
    const running = b.client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 4, steps: 4 } },
      undefined,
      { onprogress: (p) => progressB.push(p) },
    );
    await eventually('the first progress of the call to cancel', () => progressA.length > 0);
    controller.abort('the user pressed stop');
    await expect(cancelled).rejects.toThrow(/the user pressed stop|abort/i);
    const heardByA = progressA.length;

    // it outlasts the cancelled call, which the server runs to its end anyway, reporting progress nobody may hear
    expect(textOf((await running) as CallToolResult)).toBe(
      'Long running operation completed. Duration: 4 seconds, Steps: 4.',
    );
    expect(progressB.length).toBeGreaterThanOrEqual(3);
    expect(progressB).toEqual(progressB.map((_, i) => ({ progress: i + 1, total: 4 })));
    expect(progressA.length).toBe(heardByA);
    expect(progressA.every((p) => p.total === 6)).toBe(true);
    expect([...a.seen.errors, ...b.seen.errors]).toEqual([]);
  }, 30_000);

  it('a sampling or elicitation request reaches the session whose call asked for it', async () => {
    const a = await aClient();
    const b = await aClient();
    // a call of b's in flight meanwhile: the server's requests must still find a's
    const busy = b.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 2, steps: 2 } });
    const sampled = await call(a.client, 'trigger-sampling-request', { prompt: 'Why is the sky blue?', maxTokens: 50 });
    expect(textOf(sampled)).toContain(SAMPLED);
    expect(a.seen.sampling).toHaveLength(1);
    expect(b.seen.sampling).toEqual([]);

    const elicited = await call(b.client, 'trigger-elicitation-request');
    expect(textOf(elicited)).toContain('- Name: Ada Lovelace');
    expect(b.seen.elicitations).toHaveLength(1);
    expect(a.seen.elicitations).toEqual([]);
    await busy;
  });

  it('what no call caused goes to every session: list changes, and log lines at each session’s own level', async () => {
    const a = await aClient();
    const b = await aClient();
    const before = [a.seen.listChanged, b.seen.listChanged];
    await makesAResource(a.client, 'announced.gz');
    await eventually(
      'both sessions to hear the list changed',
      () => a.seen.listChanged > before[0]! && b.seen.listChanged > before[1]!,
    );

    await a.client.setLoggingLevel('error');
    await b.client.setLoggingLevel('info');
    const asked = a.seen.rootsRequests;
    const rootsLine = (n: number) => (l: { data: unknown }) => String(l.data).includes(`${n} root(s) received`);
    // the server asks the session that told it its roots changed, and says so in an info line tied to no call
    b.roots.push({ uri: 'file:///home/ada/notes', name: 'Notes' });
    await b.client.sendRootsListChanged();
    await eventually('b to hear the info line', () => b.seen.logs.some(rootsLine(2)));
    expect(a.seen.rootsRequests).toBe(asked);

    await a.client.setLoggingLevel('info');
    b.roots.push({ uri: 'file:///home/ada/docs', name: 'Docs' });
    await b.client.sendRootsListChanged();
    await eventually('a to hear the next info line, now at its level', () => a.seen.logs.some(rootsLine(3)));
    await eventually('b to hear it too', () => b.seen.logs.some(rootsLine(3)));
    // the earlier line came first on the same stream: a, at error then, was not given it
    expect(a.seen.logs.some(rootsLine(2))).toBe(false);
  });

  it('resource updates reach the sessions subscribed to the URI, and the subscription lasts while any of them is', async () => {
    const a = await aClient();
    const b = await aClient();
    const [first, second, third] = [
      'demo://resource/dynamic/text/1',
      'demo://resource/dynamic/text/2',
      'demo://resource/dynamic/text/3',
    ];
    await a.client.subscribeResource({ uri: first });
    await b.client.subscribeResource({ uri: first });
    await b.client.subscribeResource({ uri: second });
    expect(textOf(await call(a.client, 'toggle-subscriber-updates'))).toContain(
      'Started simulated resource updated notifications',
    );
    await eventually('a round of updates', () => a.seen.updated.includes(first) && b.seen.updated.includes(second));
    expect(a.seen.updated).not.toContain(second);

    // a leaves the first URI, b stays on it; a takes the third, whose update comes after the first's in the round
    await a.client.unsubscribeResource({ uri: first });
    await a.client.subscribeResource({ uri: third });
    const heard = {
      a: a.seen.updated.filter((u) => u === first).length,
      b: b.seen.updated.filter((u) => u === first).length,
    };
    await call(a.client, 'toggle-subscriber-updates');
    await call(a.client, 'toggle-subscriber-updates');
    await eventually('a to hear the third URI', () => a.seen.updated.includes(third));
    await eventually('b to hear the first URI again', () => b.seen.updated.filter((u) => u === first).length > heard.b);
    expect(a.seen.updated.filter((u) => u === first).length).toBe(heard.a);
    expect(b.seen.updated).not.toContain(third);
    await call(a.client, 'toggle-subscriber-updates');
  });

  it('a session sees and reads only the tasks it started', async () => {
    const a = await aClient();
    const b = await aClient();
    const run = await collect(
      a.client.experimental.tasks.callToolStream(
        { name: 'simulate-research-query', arguments: { topic: 'gliders' } },
        undefined,
        { task: { ttl: 60_000 } },
      ),
    );
    const created = run.find((m) => m.type === 'taskCreated') as unknown as { task: { taskId: string } };
    const taskId = created.task.taskId;
    expect((await a.client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toContain(taskId);
    expect((await b.client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).not.toContain(taskId);
    await expect(b.client.experimental.tasks.getTask(taskId)).rejects.toThrow(/Task not found/);
    expect((await a.client.experimental.tasks.getTask(taskId)).status).toBe('completed');
  }, 30_000);
});

describe('sessions left out (per_session): each MCP session its own server-everything, as before', () => {
  let cp: TestControlPlane;
  let ws: string;
  let server: string;
  let path: string;

  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
    ({ ws, server, path } = await everythingIn(cp));
  });

  it('what one session makes the other does not see, and the instance counts an upstream session for each', async () => {
    const { client: a } = await open(cp, path, ANSWERING);
    const { client: b } = await open(cp, path, ANSWERING);
    try {
      const uri = await makesAResource(a, 'made-by-a.gz');
      expect(await listed(a)).toContain(uri);
      expect(await listed(b)).not.toContain(uri);
      expect(await instancesOf(cp, ws, server)).toEqual([2]);
    } finally {
      for (const client of [a, b]) {
        await (client.transport as StreamableHTTPClientTransport).terminateSession();
        await client.close();
      }
    }
  });
});
