import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attenuateCaveatToken } from '../../libs/sessions/src';
import { aWorkspace } from '../support/builders';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { aRemoteServer, connect, SERVERS, textOf } from './mcp-client';

const ACCEPT = 'application/json, text/event-stream';

/**
 * A caveat token reaches only what its own caveats allow on the MCP
 * endpoints: an MCP session answers only the exact credential that opened it
 * (a narrower token of the same agent session is a stranger to it, on either
 * replica), and a `servers` caveat bounds resources, prompts and completions
 * on `/mcp/{ws}` as it bounds tools.
 */
describe('caveat tokens on the MCP endpoints', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  let ws: string;
  let wide: string;

  beforeAll(async () => {
    a = await startTestControlPlane('postgres');
    b = await aReplicaOf(a);
    ws = (await aWorkspace(a, a.ownerToken)).slug;
    expect(
      (await a.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } })).status,
    ).toBe(200);
    await aRemoteServer(a, a.ownerToken, ws, SERVERS.everything, 'alpha');
    await aRemoteServer(a, a.ownerToken, ws, SERVERS.everything, 'beta');
    await aRemoteServer(a, a.ownerToken, ws, SERVERS.memory, 'memo');
    const session = await a.request('POST', '/v1/sessions', { body: { workspace: ws, name: 'wide agent' } });
    expect(session.status, session.text).toBe(201);
    wide = session.body.caveat_token;
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('a token narrowed from the one that opened an MCP session is refused on it, on either replica, and nothing runs', async () => {
    const { client, transport } = await connect(a, wide, `/mcp/${ws}`);
    const sessionId = transport.sessionId!;
    // may only list, and only alpha: on a session of its own it could not create anything
    const narrow = attenuateCaveatToken(wide, [
      { kind: 'caps', caps: ['actions:list'] },
      { kind: 'servers', names: ['alpha'] },
    ]);
    const headers = {
      accept: ACCEPT,
      'mcp-session-id': sessionId,
      'mcp-protocol-version': transport.protocolVersion ?? '2025-11-25',
    };
    const create = (id: number, name: string) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: {
        name: 'memo__create_entities',
        arguments: { entities: [{ name, entityType: 'person', observations: [] }] },
      },
    });

    // on the replica that serves the session (the fast path takes this POST) and through the other one
    for (const [replica, id] of [
      [a, 1],
      [b, 2],
    ] as const) {
      const ridden = await replica.request('POST', `/mcp/${ws}`, {
        token: narrow,
        headers,
        body: create(id, `Rider${id}`),
      });
      expect(ridden.status, ridden.text).toBe(404);
      expect(ridden.body.code).toBe('MCP_SESSION_NOT_FOUND');
    }
    // the framework's routes: the stream of server messages, and ending the session
    const stream = await a.request('GET', `/mcp/${ws}`, { token: narrow, headers });
    expect(stream.status).toBe(404);
    const ended = await b.request('DELETE', `/mcp/${ws}`, { token: narrow, headers });
    expect(ended.status).toBe(404);
    expect(ended.body.code).toBe('MCP_SESSION_NOT_FOUND');

    // the session lives on for its own token, and neither call ran
    const graph = textOf(await client.callTool({ name: 'memo__read_graph', arguments: {} }));
    expect(graph).not.toContain('Rider');
    const viaB = await b.request('POST', `/mcp/${ws}`, {
      token: wide,
      headers,
      body: { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    });
    expect(viaB.status, viaB.text).toBe(200);
    expect(viaB.text).toContain('memo__create_entities');
    await client.close();
  });

  it('a session is bound to the exact credential: another credential of the same caller opens a session of its own', async () => {
    const { client, transport } = await connect(a, a.ownerToken, `/mcp/${ws}`);
    const exchanged = await a.request('POST', '/v1/auth/token');
    expect(exchanged.status, exchanged.text).toBe(201);
    const headers = {
      accept: ACCEPT,
      'mcp-session-id': transport.sessionId!,
      'mcp-protocol-version': transport.protocolVersion ?? '2025-11-25',
    };
    const other = await a.request('POST', `/mcp/${ws}`, {
      token: exchanged.body.token,
      headers,
      body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    expect(other.status, other.text).toBe(404);
    const own = await connect(a, exchanged.body.token, `/mcp/${ws}`);
    expect((await own.client.listTools()).tools.length).toBeGreaterThan(0);
    await own.client.close();
    await client.close();
  });

  it('limited to some servers on /mcp/{ws}, it lists, reads, gets and completes only theirs; asking for another server is refused', async () => {
    const limited = attenuateCaveatToken(wide, [{ kind: 'servers', names: ['alpha'] }]);
    const { client } = await connect(a, limited, `/mcp/${ws}`);
    const servers = (names: string[]) => [...new Set(names.map((n) => n.split(/\+|__/)[0]))];

    expect(servers((await client.listTools()).tools.map((t) => t.name))).toEqual(['alpha']);
    expect(servers((await client.listResources()).resources.map((r) => r.uri))).toEqual(['alpha']);
    expect(servers((await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate))).toEqual([
      'alpha',
    ]);
    expect(servers((await client.listPrompts()).prompts.map((p) => p.name))).toEqual(['alpha']);

    // its own server answers
    const features = await client.readResource({ uri: 'alpha+demo://resource/static/document/features.md' });
    expect(features.contents.length).toBe(1);
    expect((await client.getPrompt({ name: 'alpha__simple-prompt' })).messages.length).toBeGreaterThan(0);
    const departments = await client.complete({
      ref: { type: 'ref/prompt', name: 'alpha__completable-prompt' },
      argument: { name: 'department', value: 'S' },
    });
    expect(departments.completion.values.sort()).toEqual(['Sales', 'Support']);

    // the other one, asked for by name, is refused, saying why
    const refusal = /does not reach the server "beta"/;
    await expect(client.readResource({ uri: 'beta+demo://resource/static/document/features.md' })).rejects.toThrow(
      refusal,
    );
    await expect(client.subscribeResource({ uri: 'beta+demo://resource/static/document/features.md' })).rejects.toThrow(
      refusal,
    );
    await expect(client.getPrompt({ name: 'beta__simple-prompt' })).rejects.toThrow(refusal);
    await expect(
      client.complete({
        ref: { type: 'ref/prompt', name: 'beta__completable-prompt' },
        argument: { name: 'department', value: 'S' },
      }),
    ).rejects.toThrow(refusal);
    await expect(
      client.complete({
        ref: { type: 'ref/resource', uri: 'beta+demo://resource/dynamic/text/{resourceId}' },
        argument: { name: 'resourceId', value: '1' },
      }),
    ).rejects.toThrow(refusal);
    // a tool of it stays a tool result that says why, as before
    const called = await client.callTool({ name: 'beta__echo', arguments: { message: 'x' } });
    expect(called.isError).toBe(true);
    expect((called._meta as Record<string, { code: string }>)['aileron/refusal']!.code).toBe('CAPABILITY_REQUIRED');
    await client.close();

    // the token it was narrowed from still reaches every server
    const all = (await connect(a, wide, `/mcp/${ws}`)).client;
    expect(servers((await all.listResources()).resources.map((r) => r.uri))).toEqual(
      expect.arrayContaining(['alpha', 'beta']),
    );
    expect(servers((await all.listPrompts()).prompts.map((p) => p.name))).toEqual(
      expect.arrayContaining(['alpha', 'beta']),
    );
    await all.close();
  });
});
