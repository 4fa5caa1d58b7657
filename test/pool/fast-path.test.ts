import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aToken, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { HttpUpstream } from './http-upstream';
import { aRemoteServer, connect, textOf } from './mcp-client';

const KEY = 'fast-path-upstream-key';
const PRINCIPAL_PER_MINUTE = 25;
const ACCEPT = 'application/json, text/event-stream';

/**
 * Messages on an open session are served in front of the framework (the MCP
 * fast path); every refusal the routes give must still come, with the same
 * problem codes, and nothing a refusal interrupts may break the session.
 */
describe('MCP requests on an open session', () => {
  let cp: TestControlPlane;
  const upstream = new HttpUpstream(KEY);
  let ws: { slug: string; id: string };
  let server: string;

  beforeAll(async () => {
    cp = await startApiControlPlane({
      AILERON_RATE_LIMIT_PRINCIPAL_PER_MINUTE: String(PRINCIPAL_PER_MINUTE),
    });
    await upstream.start();
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
    server = await aRemoteServer(cp, cp.ownerToken, ws.slug, {
      transport: 'streamable_http',
      url: upstream.url,
      headers: { Authorization: 'vault://upstream/authorization' },
    });
  });
  afterAll(async () => {
    await cp?.close();
    await upstream.stop();
  });

  async function anOpenSession(token: string) {
    const session = await connect(cp, token, `/mcp/${ws.slug}/${server}`);
    const post = (body: unknown, options: { token?: string; headers?: Record<string, string> } = {}) =>
      cp.request('POST', `/mcp/${ws.slug}/${server}`, {
        token: options.token ?? token,
        headers: {
          accept: ACCEPT,
          'mcp-session-id': session.transport.sessionId!,
          'mcp-protocol-version': session.transport.protocolVersion ?? '2025-06-18',
          ...options.headers,
        },
        body,
      });
    return { ...session, post };
  }

  const greet = (id: number) => ({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: 'greet', arguments: { name: 'fast' } },
  });

  it('answers calls with the request id the caller gave, and counts them under the route', async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const { client, post } = await anOpenSession(member.token);
    const answered = await post(greet(7), { headers: { 'x-request-id': 'trace-fast-path-1' } });
    expect(answered.status).toBe(200);
    expect(answered.headers.get('x-request-id')).toBe('trace-fast-path-1');
    expect(answered.text).toContain('Hello, fast');
    const generated = await post(greet(8), { headers: { 'x-request-id': 'not a valid id!' } });
    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);

    // the routes (here: initialize) say it on their answers too
    const opened = await cp.request('POST', `/mcp/${ws.slug}/${server}`, {
      token: member.token,
      headers: { accept: ACCEPT, 'x-request-id': 'trace-route-1' },
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      },
    });
    expect(opened.status).toBe(200);
    expect(opened.headers.get('x-request-id')).toBe('trace-route-1');

    const metrics = (await cp.request('GET', '/metrics', { token: null })).text;
    const line = metrics
      .split('\n')
      .find(
        (l) =>
          l.startsWith('aileron_http_requests_total{') &&
          l.includes('route="/mcp/:ws/:server"') &&
          l.includes('method="POST"') &&
          l.includes('status="200"'),
      );
    expect(Number(line?.split(' ').pop())).toBeGreaterThanOrEqual(2);
    await client.close();
  });

  it('refuses a malformed, empty or oversized body with a problem document, and the session goes on', async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const { client, post } = await anOpenSession(member.token);
    const malformed = await post('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get('content-type')).toContain('application/problem+json');
    expect(malformed.body).toMatchObject({ code: 'MALFORMED_JSON', status: 400 });
    expect(malformed.body.request_id).toBe(malformed.headers.get('x-request-id'));
    expect((await post('')).body.code).toBe('MALFORMED_JSON');
    const poisoned = await post('{"jsonrpc":"2.0","id":2,"method":"tools/list","__proto__":{"admin":true}}');
    expect(poisoned.status).toBe(400);
    const huge = await post({
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'greet', arguments: { name: 'x'.repeat(1024 * 1024 + 10) } },
    });
    expect(huge.status).toBe(413);
    expect(huge.body.code).toBe('PAYLOAD_TOO_LARGE');

    expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'still here' } }))).toContain(
      'Hello, still here',
    );
    await client.close();
  });

  it('answers a bad body with the problem document the routes give for it, REST and MCP alike', async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const { client, post } = await anOpenSession(member.token);
    const bodies = {
      malformed: '{"jsonrpc": "2.0", "id": 1, "method": ',
      empty: '',
      poisoned: '{"jsonrpc":"2.0","id":2,"method":"tools/list","__proto__":{"admin":true}}',
      oversized: JSON.stringify({
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'greet', arguments: { name: 'x'.repeat(1024 * 1024 + 10) } },
      }),
    };
    const shape = (res: { status: number; headers: Headers; body: Record<string, unknown> }) => {
      const { request_id: _id, ...problem } = res.body;
      return { status: res.status, type: res.headers.get('content-type'), problem };
    };
    for (const [what, body] of Object.entries(bodies)) {
      // in front of the framework, on the open session
      const fast = shape(await post(body));
      // through the routes: an MCP request without a session, and a REST write
      const route = shape(
        await cp.request('POST', `/mcp/${ws.slug}/${server}`, {
          token: member.token,
          headers: { accept: ACCEPT },
          body,
        }),
      );
      const rest = shape(await cp.request('POST', '/v1/workspaces', { token: cp.ownerToken, body }));
      expect(fast.type, what).toContain('application/problem+json');
      expect(route, what).toEqual(fast);
      expect(rest, what).toEqual(fast);
    }
    expect(textOf(await client.callTool({ name: 'greet', arguments: { name: 'after all that' } }))).toContain(
      'Hello, after all that',
    );
    await client.close();
  });

  it('checks the credential, the workspace and the Origin on every request, not only when the session opened', async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const { client, post } = await anOpenSession(member.token);
    expect((await post(greet(1))).status).toBe(200);

    const evil = await post(greet(2), { headers: { origin: 'https://evil.example' } });
    expect(evil.status).toBe(403);
    expect(evil.body.code).toBe('ORIGIN_NOT_ALLOWED');

    // a token of another workspace learns nothing about this one
    const elsewhere = await aWorkspace(cp, cp.ownerToken);
    const outsider = await aToken(cp, cp.ownerToken, { role: 'member', workspace: elsewhere.slug });
    const foreign = await post(greet(3), { token: outsider.token });
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).not.toBe('MCP_SESSION_NOT_FOUND');
    // a colleague in the same workspace may not use someone else's session
    const colleague = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const borrowed = await post(greet(4), { token: colleague.token });
    expect(borrowed.status).toBe(404);
    expect(borrowed.body.code).toBe('MCP_SESSION_NOT_FOUND');
    const garbage = await post(greet(5), { token: 'ail_not-a-real-token' });
    expect(garbage.status).toBe(401);

    const revoked = await cp.request('DELETE', `/v1/tokens/${member.id}`, { token: cp.ownerToken });
    expect(revoked.status).toBe(204);
    const after = await post(greet(6));
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('TOKEN_REVOKED');
    await client.close().catch(() => undefined);
  });

  it('counts calls against the caller’s rate limit and answers 429 with Retry-After once it is spent', async () => {
    const busy = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const { post } = await anOpenSession(busy.token);
    const statuses: { status: number; retryAfter: string | null; code?: string }[] = [];
    for (let i = 0; i < PRINCIPAL_PER_MINUTE + 5; i++) {
      const res = await post(greet(100 + i));
      statuses.push({ status: res.status, retryAfter: res.headers.get('retry-after'), code: res.body?.code });
    }
    const limited = statuses.filter((s) => s.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]).toMatchObject({ code: 'RATE_LIMITED' });
    expect(Number(limited[0]!.retryAfter)).toBeGreaterThan(0);
    expect(statuses.filter((s) => s.status === 200).length).toBeLessThanOrEqual(PRINCIPAL_PER_MINUTE);
  });
});
