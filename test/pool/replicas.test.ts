import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createServer, IncomingHttpHeaders, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import IORedis from 'ioredis';
import { Logger } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { aToken, aWorkspace } from '../support/builders';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { aRemoteServer, SERVERS, textOf } from './mcp-client';

describe('MCP sessions across two control-plane replicas', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;

  beforeAll(async () => {
    a = await startTestControlPlane('postgres');
    b = await aReplicaOf(a);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  /** A workspace that allows everything, with one remote server, and the server's MCP path. */
  async function anEndpoint(): Promise<{ ws: string; path: string }> {
    const { slug } = await aWorkspace(a, a.ownerToken);
    await a.request('PUT', `/v1/workspaces/${slug}/policy`, {
      token: a.ownerToken,
      body: { default: 'allow', rules: [] },
    });
    return { ws: slug, path: `/mcp/${slug}/${await aRemoteServer(a, a.ownerToken, slug, SERVERS.everything)}` };
  }

  /** A session opened on A. */
  async function aSessionOnA(
    name: string,
  ): Promise<{ path: string; transport: StreamableHTTPClientTransport; client: Client; sessionId: string }> {
    const { path } = await anEndpoint();
    const transport = new StreamableHTTPClientTransport(new URL(`${a.url}${path}`), {
      requestInit: { headers: { authorization: `Bearer ${a.ownerToken}` } },
    });
    const client = new Client({ name, version: '1.0.0' });
    await client.connect(transport);
    return { path, transport, client, sessionId: transport.sessionId! };
  }

  it('serves every request of a session opened on one replica when a load balancer sends it to the other', async () => {
    const { ws, path } = await anEndpoint();

    // initialize lands on A; every later request (POSTs, the GET stream, DELETE) on B
    const seenByB: string[] = [];
    const transport = new StreamableHTTPClientTransport(new URL(`${a.url}${path}`), {
      requestInit: { headers: { authorization: `Bearer ${a.ownerToken}` } },
      fetch: (url, init) => {
        const initialize = typeof init?.body === 'string' && init.body.includes('"method":"initialize"');
        if (initialize) return fetch(url, init);
        seenByB.push(init?.method ?? 'GET');
        return fetch(String(url).replace(a.url, b.url), init);
      },
    });
    const client = new Client({ name: 'behind-a-balancer', version: '1.0.0' });
    await client.connect(transport);

    expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo');
    expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'via B' } }))).toContain('via B');
    const progress: number[] = [];
    await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, {
      onprogress: (p) => void progress.push(p.progress),
    });
    expect(progress.length).toBeGreaterThan(0);
    // calls and the client's own stream (its GET) went through B to A, and the progress came back the same way
    expect(seenByB).toContain('POST');
    expect(seenByB).toContain('GET');

    // the session is A's and only its owner's: another caller through B gets the same 404 as on A
    const sessionId = transport.sessionId!;
    const stranger = await aToken(a, a.ownerToken, { role: 'member', workspace: ws });
    const headers = { 'mcp-session-id': sessionId, accept: 'application/json, text/event-stream' };
    const strangerOnB = await b.request('POST', path, {
      token: stranger.token,
      headers,
      body: { jsonrpc: '2.0', id: 9, method: 'tools/list' },
    });
    expect(strangerOnB.status).toBe(404);
    // a request that claims to be forwarded already is not passed on again
    const looping = await b.request('POST', path, {
      token: a.ownerToken,
      headers: { ...headers, 'x-aileron-forwarded': '1' },
      body: { jsonrpc: '2.0', id: 10, method: 'tools/list' },
    });
    expect(looping.status).toBe(404);

    await transport.terminateSession();
    const afterEnd = await b.request('POST', path, {
      token: a.ownerToken,
      headers,
      body: { jsonrpc: '2.0', id: 11, method: 'tools/list' },
    });
    expect(afterEnd.status).toBe(404);
    await client.close();
  });

  it('drops a directory entry naming a replica that no longer has the session (it was restarted), answering 404', async () => {
    const { path, transport, client, sessionId } = await aSessionOnA('stale-entry');
    const key = `${a.cp.config.queuePrefix}:mcp-session:${sessionId}`;
    const redis = new IORedis(inject('redisUrl'));
    try {
      const sealed = await redis.get(key);
      expect(sealed).not.toBeNull();
      // A forgets the session as a restarted A would; its entry, written back, still names A
      await transport.terminateSession();
      await redis.set(key, sealed!, 'EX', 60);
      const headers = {
        'mcp-session-id': sessionId,
        'mcp-protocol-version': '2025-11-25',
        accept: 'application/json, text/event-stream',
      };
      const viaB = await b.request('POST', path, {
        token: a.ownerToken,
        headers,
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      });
      expect(viaB.status, viaB.text).toBe(404);
      expect(viaB.body.code).toBe('MCP_SESSION_NOT_FOUND');
      expect(await redis.exists(key)).toBe(0);
      await redis.set(key, sealed!, 'EX', 60);
      const onA = await a.request('POST', path, {
        token: a.ownerToken,
        headers,
        body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      });
      expect(onA.status, onA.text).toBe(404);
      expect(await redis.exists(key)).toBe(0);
    } finally {
      redis.disconnect();
      await client.close();
    }
  });

  /**
   * A replica passes a request for another replica's session on with the
   * caller's Authorization. Neither the request line nor an entry someone
   * wrote into Redis may choose where it goes.
   */
  it("sends a caller's request to no address but a replica's own sealed directory entry", async () => {
    const { path, client, sessionId } = await aSessionOnA('ssrf-probe');

    const heard: IncomingHttpHeaders[] = [];
    const listener = createServer((req, res) => {
      heard.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"leaked":true}');
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const elsewhere = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
    const redis = new IORedis(inject('redisUrl'));
    try {
      // an absolute-form request target naming the listener, sent to B for A's session
      const raw = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const port = Number(new URL(b.url).port);
        const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: `${elsewhere}${path}`,
            headers: {
              authorization: `Bearer ${a.ownerToken}`,
              'mcp-session-id': sessionId,
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            let text = '';
            res.on('data', (chunk: Buffer) => (text += chunk.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
      expect(raw.status, raw.body).toBe(400);
      expect(JSON.parse(raw.body).code).toBe('REQUEST_TARGET_INVALID');

      // entries written straight into Redis: a plain address, and A's sealed entry copied onto another session's key
      const prefix = a.cp.config.queuePrefix;
      const forged = ['00000000-0000-4000-8000-00000000f0f0', '00000000-0000-4000-8000-00000000f0f1'];
      await redis.set(`${prefix}:mcp-session:${forged[0]}`, elsewhere, 'EX', 60);
      const sealed = await redis.get(`${prefix}:mcp-session:${sessionId}`);
      expect(sealed).not.toBeNull();
      expect(sealed).not.toContain('127.0.0.1');
      await redis.set(`${prefix}:mcp-session:${forged[1]}`, sealed!, 'EX', 60);
      for (const id of forged) {
        const res = await b.request('POST', path, {
          token: a.ownerToken,
          headers: { 'mcp-session-id': id, accept: 'application/json, text/event-stream' },
          body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
        });
        expect(res.status, res.text).toBe(404);
      }
      // the real entry still works through B
      const real = await b.request('POST', path, {
        token: a.ownerToken,
        headers: {
          'mcp-session-id': sessionId,
          'mcp-protocol-version': '2025-11-25',
          accept: 'application/json, text/event-stream',
        },
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      });
      expect(real.status, real.text).toBe(200);
      expect(heard).toEqual([]);
    } finally {
      redis.disconnect();
      await new Promise<void>((resolve) => listener.close(() => resolve()));
      await client.close();
    }
  });

  /**
   * With AILERON_REPLICA_URL set, a replica forwards only to replicas on its own scheme and
   * port: a session held by a replica announced otherwise is a 404 here. That is a
   * misconfiguration an operator must be able to find: it is logged, once.
   */
  it('says once, in the log, that it does not forward to a replica on another scheme or port, and answers 404', async () => {
    // C's own address names port 1: A's sessions (announced at A's listening port) are on another port
    const c = await aReplicaOf(a, { AILERON_REPLICA_URL: 'http://127.0.0.1:1' });
    const warn = vi.spyOn(Logger.prototype, 'warn');
    const { path, client, sessionId } = await aSessionOnA('other-port');
    try {
      const headers = {
        'mcp-session-id': sessionId,
        'mcp-protocol-version': '2025-11-25',
        accept: 'application/json, text/event-stream',
      };
      for (const id of [1, 2]) {
        const viaC = await c.request('POST', path, {
          token: a.ownerToken,
          headers,
          body: { jsonrpc: '2.0', id, method: 'tools/list' },
        });
        expect(viaC.status, viaC.text).toBe(404);
        expect(viaC.body.code).toBe('MCP_SESSION_NOT_FOUND');
      }
      const said = warn.mock.calls
        .map(([message]) => String(message))
        .filter((message) => message.includes('does not forward to'));
      expect(said).toHaveLength(1);
      expect(said[0]).toContain(`the replica at ${a.url}`);
      expect(said[0]).toContain('AILERON_REPLICA_URL');
      expect(said[0]).not.toContain(sessionId);
      // the session itself is fine where it lives
      const onA = await a.request('POST', path, {
        token: a.ownerToken,
        headers,
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      });
      expect(onA.status, onA.text).toBe(200);
    } finally {
      warn.mockRestore();
      await client.close();
      await c.close();
    }
  });
});
