import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { HeadlessBrowser } from './browser';
import { anOauthServer } from './fixture';

/**
 * Both halves of OAuth against each other: one control plane's pool connects
 * to another control plane's /mcp/{ws}, which is an authorization server of
 * its own. The pool is known there by its Client ID Metadata Document, which
 * the upstream fetches and checks as it does any client's (so the document we
 * serve is one an authorization server that takes them accepts); the person
 * signs in to the upstream's console and allows "Aileron" on its consent page;
 * the pool's calls reach the upstream as that person, the client named.
 */
describe('the pool connected to another Aileron’s MCP endpoint', () => {
  let upstream: TestControlPlane;
  let pool: TestControlPlane;
  let tools: string;
  let server: string;

  beforeAll(async () => {
    // two installations on one machine: metadata documents on loopback are taken, over plain http
    const env = { AILERON_OAUTH_HTTP_CLIENT_IDS: 'true' };
    [upstream, pool] = await Promise.all([startTestControlPlane('pglite', env), startTestControlPlane('pglite', env)]);
    for (const cp of [upstream, pool]) {
      cp.cp.config.publicUrl = cp.url;
      const policy = await cp.request('PUT', '/v1/workspaces/default/policy', {
        body: { default: 'allow', rules: [] },
      });
      expect(policy.status, policy.text).toBe(200);
    }
    tools = await aRemoteServer(upstream, upstream.ownerToken, 'default', SERVERS.memory);
    server = await anOauthServer(pool, `${upstream.url}/mcp/default`, { connections: 'per_workspace' });
  });
  afterAll(async () => {
    await Promise.all([upstream?.close(), pool?.close()]);
  });

  it('signs in with its metadata document, and calls the upstream’s tools as the person who allowed it', async () => {
    const prepared = await pool.request('POST', '/v1/workspaces/default/connections', { body: { server } });
    expect(prepared.status, prepared.text).toBe(201);
    expect(prepared.body).toMatchObject({ authorization_server: upstream.url, registration: 'metadata_document' });

    const browser = new HeadlessBrowser();
    await browser.signInWithLink(pool.url, pool.ownerToken);
    await browser.signInWithLink(upstream.url, upstream.ownerToken);
    // the pool sends the browser to the upstream, which fetched the pool's document and asks its person
    const consent = await browser.browse(prepared.body.authorization_url);
    expect(consent.status, consent.text).toBe(200);
    expect(new URL(consent.url).origin).toBe(upstream.url);
    expect(consent.text).toContain('Allow <span class="client">Aileron</span> to use workspace Default?');
    expect(consent.text).toContain(`${pool.url}/oauth/connections/client-metadata.json`);
    const connected = await browser.allow(consent);
    expect(new URL(connected.url).origin).toBe(pool.url);
    expect(connected.text).toContain('is connected');

    const { client } = await connect(pool, pool.ownerToken, '/mcp/default');
    try {
      const listed = (await client.listTools()).tools.map((tool) => tool.name);
      // the upstream's own aggregate names its tools server__tool; the pool puts its server's name in front
      const name = `${server}__${tools}__read_graph`;
      expect(listed).toContain(name);
      const result = await client.callTool({ name, arguments: {} });
      expect(result.isError, textOf(result)).toBeFalsy();
    } finally {
      await client.close();
    }

    // the upstream saw its own person, through the client it knows by the pool's document
    const [owner] = (await upstream.request('GET', '/v1/users?limit=1')).body.items;
    const record = await eventually('the upstream’s execution record', async () => {
      const audit = await upstream.request('GET', '/v1/workspaces/default/audit?execution_mode=remote&tool=read_graph');
      return audit.body.items.find((r: { type: string }) => r.type === 'execution.succeeded');
    });
    expect(record.actor).toBe(`user:${owner.id}`);
    expect(record.data.oauth_client).toEqual({
      id: `${pool.url}/oauth/connections/client-metadata.json`,
      name: 'Aileron',
    });
    const clients = await upstream.request('GET', '/v1/workspaces/default/oauth/clients');
    expect(clients.body.items).toEqual([
      expect.objectContaining({
        client_id: `${pool.url}/oauth/connections/client-metadata.json`,
        registration: 'metadata_document',
        resource: `${upstream.url}/mcp/default`,
      }),
    ]);
    // and the pool keeps a refreshable connection, its tokens never shown
    const connections = await pool.request('GET', '/v1/workspaces/default/connections');
    expect(connections.body.items).toEqual([
      expect.objectContaining({ server, state: 'connected', registration: 'metadata_document', refreshable: true }),
    ]);
  });
});
