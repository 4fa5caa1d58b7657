import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CreateMessageResultSchema,
  type JSONRPCNotification,
  type JSONRPCRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '@aileron/clock';
import { type BridgeServer, createBridgeServer } from '../bridge';
import { Instance } from '../pool-instances.service';
import { openUpstream } from './shared-upstream';
import type { UpstreamSession } from './upstream';

const EVERYTHING = resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const INIT = {
  protocolVersion: '2025-11-25',
  capabilities: { sampling: {} },
  clientInfo: { name: 'spec', version: '1.0.0' },
};

interface Heard {
  message: JSONRPCRequest | JSONRPCNotification;
  on: string | undefined;
}

/**
 * The Kubernetes driver keeps its bridge: an instance is a pod whose bridge
 * serves Streamable HTTP, one stdio child per upstream session. Shared mode
 * is then one bridge session (one child) for every downstream session, and
 * what the bridge sends on a call's stream finds that call's session.
 */
describe('shared upstream sessions over Streamable HTTP (a pod’s bridge)', () => {
  let bridge: BridgeServer;
  let url: string;
  /** the upstream session ids the bridge was asked about, one per child it runs */
  const upstreamSessions = new Set<string>();

  beforeAll(async () => {
    bridge = createBridgeServer({
      command: process.execPath,
      args: [EVERYTHING, 'stdio'],
      env: { PATH: process.env.PATH ?? '' },
      token: 'bridge-secret',
      log: () => undefined,
    });
    bridge.server.prependListener('request', (req) => {
      const id = req.headers['mcp-session-id'];
      if (typeof id === 'string') upstreamSessions.add(id);
    });
    await new Promise<void>((listening) => bridge.server.listen(0, '127.0.0.1', listening));
    url = `http://127.0.0.1:${(bridge.server.address() as AddressInfo).port}/mcp`;
  });
  afterAll(() => bridge.close());

  function anInstance(sessionMode: 'per_session' | 'shared'): Instance {
    return new Instance(
      `i-${sessionMode}`,
      'everything',
      '1.0.0',
      { url, headers: { authorization: 'Bearer bridge-secret' } },
      new Promise(() => undefined),
      null,
      () => undefined,
      8,
      new Clock(),
      new Map(),
      sessionMode,
    );
  }

  async function aSession(instance: Instance): Promise<{ session: UpstreamSession<string>; heard: Heard[] }> {
    const session = openUpstream<string>('everything', instance, INIT);
    const heard: Heard[] = [];
    session.onServerMessage = (message, on) => heard.push({ message, on });
    await session.start();
    const answer = await session.request('initialize', INIT);
    expect(answer).toMatchObject({ result: { serverInfo: { name: 'mcp-servers/everything' } } });
    await session.notify('notifications/initialized');
    return { session, heard };
  }

  it('one child for both sessions; each hears its own progress and the sampling request its call caused', async () => {
    const instance = anInstance('shared');
    upstreamSessions.clear();
    const a = await aSession(instance);
    const b = await aSession(instance);
    expect(instance.upstreamSessions).toBe(2);

    const long = (session: UpstreamSession<string>, on: string, steps: number) =>
      session.request(
        'tools/call',
        { name: 'trigger-long-running-operation', arguments: { duration: 0.5, steps }, _meta: { progressToken: 1 } },
        undefined,
        on,
      );
    const [doneA, doneB] = await Promise.all([long(a.session, 'call of a', 2), long(b.session, 'call of b', 3)]);
    expect(JSON.stringify(doneA)).toContain('Steps: 2.');
    expect(JSON.stringify(doneB)).toContain('Steps: 3.');
    const progress = (heard: Heard[]) =>
      heard.filter((h) => h.message.method === 'notifications/progress').map((h) => h.message.params);
    expect(progress(a.heard)).toEqual([1, 2].map((n) => ({ progressToken: 1, progress: n, total: 2 })));
    expect(progress(b.heard)).toEqual([1, 2, 3].map((n) => ({ progressToken: 1, progress: n, total: 3 })));

    // b answers the server's request the way a client would: through the session it reached
    b.session.onServerMessage = (message, on) => {
      b.heard.push({ message, on });
      if ('id' in message)
        void b.session.respond(message.id, {
          result: { role: 'assistant', content: { type: 'text', text: 'sampled for b' }, model: 'm' },
        });
    };
    const sampled = await b.session.request(
      'tools/call',
      { name: 'trigger-sampling-request', arguments: { prompt: 'hello' } },
      undefined,
      'sampling call of b',
    );
    expect(JSON.stringify(sampled)).toContain('sampled for b');
    expect(b.heard.filter((h) => h.message.method === 'sampling/createMessage').map((h) => h.on)).toEqual([
      'sampling call of b',
    ]);
    expect(a.heard.some((h) => h.message.method === 'sampling/createMessage')).toBe(false);
    expect(upstreamSessions.size).toBe(1);

    // a leaving leaves b's session as it was
    await a.session.close();
    expect(instance.upstreamSessions).toBe(1);
    expect(await b.session.request('ping', undefined)).toEqual({ result: {} });
    await b.session.close();
  });

  it('lets go of the sessions that leave, with what they asked for: a shared session serving for days keeps none', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const instance = anInstance('shared');
    const stays = await aSession(instance);
    const openUseAndClose = async (n: number): Promise<WeakRef<UpstreamSession<string>>> => {
      const { session } = await aSession(instance);
      await session.request('logging/setLevel', { level: 'debug' });
      await session.request('resources/subscribe', { uri: `demo://resource/dynamic/text/${n}` });
      await session.request(
        'tools/call',
        { name: 'echo', arguments: { message: `${n}` }, _meta: { progressToken: n } },
        undefined,
        `call ${n}`,
      );
      await session.close();
      return new WeakRef(session);
    };
    const closed: WeakRef<UpstreamSession<string>>[] = [];
    for (let n = 0; n < 20; n++) closed.push(await openUseAndClose(n));
    // what their leaving sent upstream (unsubscriptions, the level) has been answered
    expect(await stays.session.request('ping', undefined)).toEqual({ result: {} });
    gc();
    expect(closed.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
    expect(instance.upstreamSessions).toBe(1);
    await stays.session.close();
  });

  it('per session: an upstream session (a child) each, as before', async () => {
    const instance = anInstance('per_session');
    upstreamSessions.clear();
    const a = await aSession(instance);
    const b = await aSession(instance);
    expect(await a.session.request('ping', undefined)).toEqual({ result: {} });
    expect(await b.session.request('ping', undefined)).toEqual({ result: {} });
    expect(upstreamSessions.size).toBe(2);
    await Promise.all([a.session.close(), b.session.close()]);
  });
});

/**
 * A server in this process says exactly which request each of its messages
 * belongs to (over stdio the latest request in flight stands in for that):
 * the rules of where a shared session's server messages go, without the
 * guess. Its one tool waits until the test lets it go, then logs a line and
 * asks its caller to sample.
 */
describe('a shared upstream session: where what the server sends goes', () => {
  function anAskingServer(): { instance: Instance; release: () => void; server: Promise<McpServer> } {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let connected!: (server: McpServer) => void;
    const server = new Promise<McpServer>((resolve) => (connected = resolve));
    const instance = new Instance(
      'i-asking',
      'asking',
      '1.0.0',
      {
        attach: async (transport) => {
          const mcp = new McpServer({ name: 'asking', version: '1.0.0' }, { capabilities: { logging: {} } });
          mcp.registerTool('ask', {}, async (extra) => {
            await released;
            await extra.sendNotification({
              method: 'notifications/message',
              params: { level: 'info', data: 'asking my caller' },
            });
            const sampled = await extra.sendRequest(
              { method: 'sampling/createMessage', params: { messages: [], maxTokens: 1 } },
              CreateMessageResultSchema,
            );
            return { content: [{ type: 'text', text: JSON.stringify(sampled.content) }] };
          });
          await mcp.connect(transport);
          connected(mcp);
        },
      },
      new Promise(() => undefined),
      null,
      () => undefined,
      8,
      new Clock(),
      new Map(),
      'shared',
    );
    return { instance, release, server };
  }

  async function aSession(instance: Instance): Promise<{ session: UpstreamSession<string>; heard: Heard[] }> {
    const session = openUpstream<string>('asking', instance, INIT);
    const heard: Heard[] = [];
    session.onServerMessage = (message, on) => {
      heard.push({ message, on });
      if ('id' in message)
        void session.respond(message.id, {
          result: { role: 'assistant', content: { type: 'text', text: `sampled by ${on}` }, model: 'm' },
        });
    };
    await session.start();
    await session.request('initialize', INIT);
    await session.notify('notifications/initialized');
    return { session, heard };
  }

  it('a request or log line of a call reaches the session of that call, though another spoke last; one of no call, everyone', async () => {
    const { instance, release, server } = anAskingServer();
    const a = await aSession(instance);
    const b = await aSession(instance);
    const asked = a.session.request('tools/call', { name: 'ask', arguments: {} }, undefined, 'call of a');
    // b is the last the server heard from when its request comes
    expect(await b.session.request('ping', undefined)).toEqual({ result: {} });
    release();
    expect(JSON.stringify(await asked)).toContain('sampled by call of a');
    expect(a.heard.map((h) => [h.message.method, h.on])).toEqual([
      ['notifications/message', 'call of a'],
      ['sampling/createMessage', 'call of a'],
    ]);
    expect(b.heard).toEqual([]);

    await (await server).server.sendLoggingMessage({ level: 'warning', data: 'to whom it may concern' });
    await expect.poll(() => [a.heard.length, b.heard.length]).toEqual([3, 1]);
    expect(b.heard[0]).toMatchObject({ message: { params: { data: 'to whom it may concern' } }, on: undefined });
    await Promise.all([a.session.close(), b.session.close()]);
  });
});
