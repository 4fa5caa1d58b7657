import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutionJournal } from '@aileron/pool';
import { attenuateCaveatToken } from '../../libs/sessions/src';
import { aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';

type Refusal = { code: string; approval_id: string; review_url: string };

/**
 * What a leaked session token is worth: with the default caps it lists and
 * calls the workspace's tools and follows its own approvals, as its agent
 * must; nothing an admin holds is reachable, even though the session's
 * creator (the owner here) could reach all of it.
 */
describe('a leaked session caveat token', () => {
  let cp: TestControlPlane;
  let ws: { slug: string; id: string };
  let session: { id: string; caveat_token: string };

  beforeAll(async () => {
    cp = await startApiControlPlane({ AILERON_POOL_APPROVAL_WAIT_SECONDS: '1' });
    ws = await aWorkspace(cp, cp.ownerToken);
    await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything, 'alpha');
    await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.memory, 'beta');
    const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: {
        default: 'deny',
        rules: [
          { id: 'alpha-echo', effect: 'allow', servers: ['alpha'], tools: ['echo'] },
          { id: 'beta-read', effect: 'allow', servers: ['beta'], tools: ['read_graph'] },
          { id: 'beta-writes', effect: 'approval', servers: ['beta'], tools: ['create_entities'] },
        ],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    expect(
      (
        await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/github/token`, {
          body: { value: 'leak-canary-value' },
        })
      ).status,
    ).toBe(200);
    session = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug, name: 'leaky' } })).body;
  });
  afterAll(async () => cp?.close());

  it('lists and calls tools, and polls the approval its own call asked for', async () => {
    const { client } = await connect(cp, session.caveat_token, `/mcp/${ws.slug}`);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      'alpha__echo',
      'beta__create_entities',
      'beta__read_graph',
    ]);
    const echoed = await client.callTool({ name: 'alpha__echo', arguments: { message: 'from the sandbox' } });
    expect(echoed.isError, textOf(echoed)).toBeFalsy();
    expect(textOf(echoed)).toContain('from the sandbox');

    const pending = await client.callTool({
      name: 'beta__create_entities',
      arguments: { entities: [{ name: 'Ada', entityType: 'person', observations: [] }] },
    });
    const refusal = (pending._meta as Record<string, Refusal>)['aileron/refusal']!;
    expect(refusal.code).toBe('APPROVAL_PENDING');
    const polled = await cp.request('GET', `/v1/approvals/${refusal.approval_id}?wait=1`, {
      token: session.caveat_token,
    });
    expect(polled.status, polled.text).toBe(200);
    expect(polled.body).toMatchObject({ id: refusal.approval_id, status: 'pending' });
    await client.close();

    // the records name the agent session, and the MCP session apart
    await cp.cp.app.get(ExecutionJournal).flush();
    const audit = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=execution.succeeded`);
    const ran = (audit.body.events as { session: string | null; actor: string; data: Record<string, unknown> }[]).find(
      (e) => e.data.mcp_session,
    );
    expect(ran).toMatchObject({ session: session.id, actor: expect.stringMatching(/^token:/) });
    expect(ran!.data.mcp_session).not.toBe(session.id);
    const asked = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=approval.requested`);
    expect(asked.body.events[0].data).toMatchObject({ agent_session: session.id });
  });

  it('cannot read a secret, change policy, read audit, create tokens or sessions, or enrol a gateway', async () => {
    const token = session.caveat_token;
    const policyBefore = (await cp.request('GET', `/v1/workspaces/${ws.slug}/policy`)).text;
    const attempts = [
      ['GET', `/v1/workspaces/${ws.slug}/secrets`],
      ['GET', `/v1/workspaces/${ws.slug}/secrets/github/token`],
      ['PUT', `/v1/workspaces/${ws.slug}/policy`, { default: 'allow', rules: [] }],
      ['GET', `/v1/workspaces/${ws.slug}/audit`],
      ['POST', '/v1/tokens', { name: 'mine', role: 'owner' }],
      ['POST', '/v1/sessions', { workspace: ws.slug }],
      ['POST', `/v1/workspaces/${ws.slug}/enrollment-codes`, {}],
    ] as const;
    for (const [method, path, body] of attempts) {
      const res = await cp.request(method, path, { token, ...(body ? { body } : {}) });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.code).toBe('CAPABILITY_REQUIRED');
      expect(res.text).not.toContain('leak-canary-value');
    }
    expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/policy`)).text).toBe(policyBefore);
  });

  it('narrowed to one server and one tool, it sees and calls only those; without actions:run it only lists', async () => {
    const narrow = attenuateCaveatToken(session.caveat_token, [
      { kind: 'servers', names: ['beta'] },
      { kind: 'tools', globs: ['beta__read_*'] },
    ]);
    const { client } = await connect(cp, narrow, `/mcp/${ws.slug}`);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['beta__read_graph']);
    const refused = await client.callTool({ name: 'alpha__echo', arguments: { message: 'x' } });
    expect(refused.isError).toBe(true);
    expect((refused._meta as Record<string, Refusal>)['aileron/refusal']!.code).toBe('CAPABILITY_REQUIRED');
    await client.close();
    // the one-server endpoint of a server outside the caveat is closed at the door
    const door = await fetch(`${cp.url}/mcp/${ws.slug}/alpha`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${narrow}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    expect(door.status).toBe(403);
    expect(((await door.json()) as { code: string }).code).toBe('CAPABILITY_REQUIRED');

    const listOnly = attenuateCaveatToken(session.caveat_token, [{ kind: 'caps', caps: ['actions:list'] }]);
    const lister = (await connect(cp, listOnly, `/mcp/${ws.slug}`)).client;
    expect((await lister.listTools()).tools.length).toBe(3);
    const call = await lister.callTool({ name: 'alpha__echo', arguments: { message: 'x' } });
    expect((call._meta as Record<string, Refusal>)['aileron/refusal']!.code).toBe('CAPABILITY_REQUIRED');
    await lister.close();
  });
});
