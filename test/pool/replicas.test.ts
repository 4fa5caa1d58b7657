import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

  it('serves every request of a session opened on one replica when a load balancer sends it to the other', async () => {
    const ws = await aWorkspace(a, a.ownerToken);
    await a.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { token: a.ownerToken, body: { default: 'allow', rules: [] } });
    const name = await aRemoteServer(a, a.ownerToken, ws.slug, SERVERS.everything);
    const path = `/mcp/${ws.slug}/${name}`;

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
    await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, { onprogress: (p) => void progress.push(p.progress) });
    expect(progress.length).toBeGreaterThan(0);
    // calls and the client's own stream (its GET) went through B to A, and the progress came back the same way
    expect(seenByB).toContain('POST');
    expect(seenByB).toContain('GET');

    // the session is A's and only its owner's: another caller through B gets the same 404 as on A
    const sessionId = transport.sessionId!;
    const stranger = await aToken(a, a.ownerToken, { role: 'member', workspace: ws.slug });
    const headers = { 'mcp-session-id': sessionId, accept: 'application/json, text/event-stream' };
    const strangerOnB = await b.request('POST', path, { token: stranger.token, headers, body: { jsonrpc: '2.0', id: 9, method: 'tools/list' } });
    expect(strangerOnB.status).toBe(404);
    // a request that claims to be forwarded already is not passed on again
    const looping = await b.request('POST', path, { token: a.ownerToken, headers: { ...headers, 'x-aileron-forwarded': '1' }, body: { jsonrpc: '2.0', id: 10, method: 'tools/list' } });
    expect(looping.status).toBe(404);

    await transport.terminateSession();
    const afterEnd = await b.request('POST', path, { token: a.ownerToken, headers, body: { jsonrpc: '2.0', id: 11, method: 'tools/list' } });
    expect(afterEnd.status).toBe(404);
    await client.close();
  });
});
