import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalIdp } from '../auth/local-idp';
import { aWorkspace } from '../support/builders';
import { launchChromium } from '../support/chromium';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { newPkcePair, OauthSweep } from '../../libs/oauth/src';
import { advanceClock, resetClock } from '../support/clock';
import {
  ClientSite,
  connectInBrowser,
  initializeWith,
  MemoryOAuthProvider,
  oauthTransport,
  refreshGrant,
} from '../support/mcp-oauth-client';

/**
 * An MCP client connects to /mcp/{ws} the way Claude or Cursor do: the MCP
 * SDK's own OAuth flow (discovery from the 401, a Client ID Metadata
 * Document, PKCE, the resource indicator), with a headless Chromium as the
 * person's browser signing in to the console through the organisation's
 * identity provider and answering the consent page; then tools through the
 * endpoint, refresh, revocation, the token's bounds and hostile clients.
 */
describe('MCP clients signing in with OAuth', () => {
  let cp: TestControlPlane;
  let idp: LocalIdp;
  let site: ClientSite;
  let browser: Browser;
  let page: Page;
  let server: string;
  let other: string;
  let clientId: string;

  beforeAll(async () => {
    cp = await startApiControlPlane({ AILERON_OAUTH_HTTP_CLIENT_IDS: 'true' });
    // as an operator sets AILERON_PUBLIC_URL: resources, issuer and the IdP's redirect are named by it
    cp.cp.config.publicUrl = cp.url;
    idp = new LocalIdp();
    idp.person = { sub: 'idp-person', email: 'person@example.com', email_verified: true, name: 'Pat Person' };
    await idp.start();
    await idp.trustedBy(cp, { client_id: idp.clientId, default_role: 'member' });
    site = new ClientSite();
    await site.start();
    clientId = site.goodDocument('/mcp-client.json', 'Test MCP client');
    await cp.request('PUT', '/v1/workspaces/default/policy', { body: { default: 'allow', rules: [] } });
    server = await aRemoteServer(cp, cp.ownerToken, 'default', SERVERS.memory);
    other = (await aWorkspace(cp, cp.ownerToken)).slug;
    // the person the IdP signs in is a member of both workspaces: the token still reaches only one
    const person = await cp.request('POST', '/v1/users', { body: { email: 'person@example.com', role: 'member' } });
    expect(person.status, person.text).toBe(201);
    for (const ws of ['default', other]) {
      const added = await cp.request('PUT', `/v1/workspaces/${ws}/members/${person.body.id}`, {
        body: { role: 'member' },
      });
      expect(added.status, added.text).toBe(200);
    }
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await cp?.close();
    await idp?.stop();
    await site?.stop();
  });

  /**
   * The whole first connection: the SDK meets the 401 and asks for the
   * browser; the browser signs in (once per browser) and allows; the SDK
   * exchanges the code. Answers the provider holding the tokens.
   */
  async function connectWithBrowser(id: string | null = clientId, name = 'Test MCP client') {
    const provider = new MemoryOAuthProvider(site, id ?? undefined, name);
    const { authorizationUrl, consent } = await connectInBrowser(cp, page, site, provider, {
      // no console session yet: the console's sign-in, through the organisation's identity provider
      signIn: (p) => p.getByRole('button', { name: 'Continue with your identity provider' }).click(),
    });
    expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(`${cp.url}/oauth/auth`);
    expect(authorizationUrl.searchParams.get('resource')).toBe(`${cp.url}/mcp/default`);
    expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(consent).toContain(`Allow ${name} to use workspace Default?`);
    expect(consent).toContain(`${cp.url}/mcp/default`);
    expect(consent).toMatch(/call the tools of every MCP server of workspace Default .* as you/);
    return provider;
  }

  async function toolsWith(provider: MemoryOAuthProvider, path = '/mcp/default'): Promise<string[]> {
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(oauthTransport(cp, path, provider));
    try {
      return (await client.listTools()).tools.map((t) => t.name);
    } finally {
      await client.close();
    }
  }

  function mcpWith(token: string, path = '/mcp/default') {
    return initializeWith(cp, token, path);
  }

  it('signs in through the browser and calls a tool as the person, the client named in the audit record', async () => {
    const provider = await connectWithBrowser();
    const tokens = provider.tokens()!;
    expect(tokens.token_type).toBe('Bearer');
    expect(tokens.refresh_token).toBeTruthy();
    expect(tokens.expires_in).toBeLessThanOrEqual(900);
    // the document was fetched by the control plane, from the client's own site
    expect(site.fetched).toContain('/mcp-client.json');

    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(oauthTransport(cp, '/mcp/default', provider));
    const result = await client.callTool({ name: `${server}__read_graph`, arguments: {} });
    expect(result.isError, textOf(result)).toBeFalsy();
    await client.close();
    // the same token reaches the workspace's endpoint of one server
    expect(await toolsWith(provider, `/mcp/default/${server}`)).toContain('read_graph');

    const users = await cp.request('GET', '/v1/users?limit=200');
    const person = users.body.items.find((u: { email: string }) => u.email === 'person@example.com');
    const record = await eventually('the execution record', async () => {
      const audit = await cp.request('GET', `/v1/workspaces/default/audit?execution_mode=remote&tool=read_graph`);
      return audit.body.items.find((r: { type: string }) => r.type === 'execution.succeeded');
    });
    expect(record.actor).toBe(`user:${person.id}`);
    expect(record.data.oauth_client).toEqual({ id: clientId, name: 'Test MCP client' });
    // the consent itself is on the record: who allowed which client, for which endpoint
    const connected = await eventually('the connection record', async () => {
      const audit = await cp.request('GET', '/v1/workspaces/default/audit?type=oauth.client_connected');
      return audit.body.items[0];
    });
    expect(connected.actor).toBe(`user:${person.id}`);
    expect(connected.data).toMatchObject({
      client_id: clientId,
      client_name: 'Test MCP client',
      registration: 'metadata_document',
      resource: `${cp.url}/mcp/default`,
    });
  });

  it('decides a call by the workspace’s policy with the person as its principal, as their API token would be', async () => {
    const provider = await connectWithBrowser();
    const users = await cp.request('GET', '/v1/users?limit=200');
    const person = users.body.items.find((u: { email: string }) => u.email === 'person@example.com');
    const policy = await cp.request('PUT', '/v1/workspaces/default/policy', {
      body: {
        default: 'allow',
        rules: [{ id: 'not-pat', effect: 'deny', tools: ['read_graph'], principals: { users: [`user:${person.id}`] } }],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    try {
      const client = new Client({ name: 'oauth-test', version: '1.0.0' });
      await client.connect(oauthTransport(cp, '/mcp/default', provider));
      const denied = await client.callTool({ name: `${server}__read_graph`, arguments: {} });
      await client.close();
      expect(denied.isError).toBe(true);
      expect(textOf(denied)).toContain('not-pat');
      // the rule is about the person, not the endpoint: the owner's API token is allowed the same call
      const { client: owner } = await connect(cp, cp.ownerToken, '/mcp/default');
      const allowed = await owner.callTool({ name: `${server}__read_graph`, arguments: {} });
      await owner.close();
      expect(allowed.isError, textOf(allowed)).toBeFalsy();
      const record = await eventually('the denial record', async () => {
        const audit = await cp.request('GET', `/v1/workspaces/default/audit?decision=deny&tool=read_graph`);
        return audit.body.items.find((r: { actor: string }) => r.actor === `user:${person.id}`);
      });
      expect(record.data.oauth_client).toEqual({ id: clientId, name: 'Test MCP client' });
    } finally {
      await cp.request('PUT', '/v1/workspaces/default/policy', { body: { default: 'allow', rules: [] } });
    }
  });

  it('binds the token to its workspace: another workspace’s endpoint and the REST API refuse it', async () => {
    const provider = await connectWithBrowser();
    const token = provider.tokens()!.access_token;
    expect((await mcpWith(token)).status).toBe(200);
    // every path of the workspace's endpoint is the one resource: the sandbox tools too
    expect((await mcpWith(token, '/mcp/default/sandbox')).status).toBe(200);

    const elsewhere = await mcpWith(token, `/mcp/${other}`);
    expect(elsewhere.status, elsewhere.text).toBe(401);
    expect(elsewhere.body.code).toBe('OAUTH_TOKEN_WRONG_RESOURCE');
    // the challenge sends the client to the other workspace's metadata, to get a token for it
    expect(elsewhere.headers.get('www-authenticate')).toContain(`/.well-known/oauth-protected-resource/mcp/${other}`);
    for (const path of ['/v1/me', '/v1/workspaces/default/audit', `/v1/workspaces/default/oauth/clients`]) {
      const rest = await cp.request('GET', path, { token });
      expect(rest.status, path).toBe(401);
      expect(rest.body.code, path).toBe('OAUTH_TOKEN_WRONG_RESOURCE');
    }
    // API tokens keep working on the same endpoint
    expect((await mcpWith(cp.ownerToken)).status).toBe(200);
  });

  it('refreshes with a new refresh token each time; an old one used again ends the whole grant', async () => {
    const provider = await connectWithBrowser();
    const before = provider.tokens()!;
    expect(await auth(provider, { serverUrl: `${cp.url}/mcp/default` })).toBe('AUTHORIZED');
    const after = provider.tokens()!;
    expect(after.access_token).not.toBe(before.access_token);
    expect(after.refresh_token).not.toBe(before.refresh_token);
    expect(await toolsWith(provider)).toContain(`${server}__read_graph`);

    const replay = await refresh(before.refresh_token!);
    expect(replay.status).toBe(400);
    expect(replay.body.error).toBe('invalid_grant');
    // a refresh token used twice was stolen or copied: everything issued under the grant ends
    expect((await mcpWith(after.access_token)).status).toBe(401);
    expect((await refresh(after.refresh_token!)).body.error).toBe('invalid_grant');
    // and the connected client with it, on the record
    const record = await eventually('the disconnection record', async () => {
      const audit = await cp.request('GET', '/v1/workspaces/default/audit?type=oauth.client_disconnected');
      return audit.body.items.find((r: { data: { reason: string } }) => r.data.reason === 'refresh_token_reused');
    });
    const listed = await cp.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    expect(listed.body.items.map((c: { id: string }) => c.id)).not.toContain(record.data.connection_id);
  });

  it('lets an admin list and disconnect a client: its tokens stop working at once', async () => {
    const provider = await connectWithBrowser();
    const tokens = provider.tokens()!;
    const listed = await cp.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    expect(listed.status, listed.text).toBe(200);
    const mine = listed.body.items.filter((c: { client_id: string }) => c.client_id === clientId);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine[0]).toMatchObject({
      client_name: 'Test MCP client',
      registration: 'metadata_document',
      workspace: 'default',
      resource: `${cp.url}/mcp/default`,
      user: { email: 'person@example.com' },
    });
    expect(JSON.stringify(listed.body)).not.toContain(tokens.access_token);
    expect((await mcpWith(tokens.access_token)).status).toBe(200);

    for (const connection of mine) {
      const revoked = await cp.request('DELETE', `/v1/workspaces/default/oauth/clients/${connection.id}`);
      expect(revoked.status, revoked.text).toBe(200);
    }
    const refused = await mcpWith(tokens.access_token);
    expect(refused.status).toBe(401);
    expect(['TOKEN_INVALID', 'TOKEN_REVOKED']).toContain(refused.body.code);
    expect((await refresh(tokens.refresh_token!)).body.error).toBe('invalid_grant');
    const again = await cp.request('DELETE', `/v1/workspaces/default/oauth/clients/${mine[0].id}`);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('OAUTH_CLIENT_NOT_FOUND');
    const audit = await cp.request('GET', '/v1/workspaces/default/audit?type=oauth.client_disconnected');
    expect(audit.body.items[0].data).toMatchObject({ client_id: clientId, reason: 'revoked_by_admin' });
  });

  it('lets the person disconnect a client of their own from their browser session', async () => {
    const provider = await connectWithBrowser();
    const token = provider.tokens()!.access_token;
    const own = await page.request.get(`${cp.url}/v1/me/oauth/clients`);
    expect(own.status()).toBe(200);
    const items = (await own.json()).items as { id: string; client_id: string; user: { email: string } }[];
    expect(items.length).toBeGreaterThan(0);
    expect(items.every((c) => c.user.email === 'person@example.com')).toBe(true);
    const { csrf } = await (await page.request.get(`${cp.url}/v1/auth/session`)).json();
    for (const connection of items) {
      const gone = await page.request.delete(`${cp.url}/v1/me/oauth/clients/${connection.id}`, {
        headers: { 'x-aileron-csrf': csrf },
      });
      expect(gone.status()).toBe(200);
    }
    expect((await mcpWith(token)).status).toBe(401);
    // a token consented to nothing: it has no clients of its own, and ends nobody's
    const asToken = await cp.request('GET', '/v1/me/oauth/clients');
    expect(asToken.body).toEqual({ items: [], next_cursor: null });
    expect((await cp.request('DELETE', `/v1/me/oauth/clients/${items[0]!.id}`)).status).toBe(404);
  });

  it('ends the connection when the client revokes its own refresh token', async () => {
    const provider = await connectWithBrowser();
    const tokens = provider.tokens()!;
    const revoked = await cp.request('POST', '/oauth/token/revocation', {
      token: null,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        token: tokens.refresh_token!,
        token_type_hint: 'refresh_token',
        client_id: clientId,
      }).toString(),
    });
    expect(revoked.status, revoked.text).toBe(200);
    expect((await mcpWith(tokens.access_token)).status).toBe(401);
    await eventually('the disconnection record', async () => {
      const audit = await cp.request('GET', '/v1/workspaces/default/audit?type=oauth.client_disconnected');
      return audit.body.items.find((r: { data: { reason: string } }) => r.data.reason === 'revoked_by_client');
    });
  });

  it('refuses hostile client metadata documents and malformed requests with a clear error', async () => {
    const hostile = site.document('/hostile.json', (url) => ({
      client_id: url,
      client_name: '<script>window.pwned = 1; alert(1)</script>',
      redirect_uris: [site.redirectUri],
    }));
    const impostor = site.document('/impostor.json', () => ({
      client_id: clientId,
      client_name: 'Not me',
      redirect_uris: [site.redirectUri],
    }));
    const secretive = site.document('/secret.json', (url) => ({
      client_id: url,
      client_secret: 'shared',
      redirect_uris: [site.redirectUri],
    }));
    const pkce = newPkcePair();
    const request = (client: string, changes: Record<string, string | null> = {}) => {
      const params: Record<string, string | null> = {
        response_type: 'code',
        client_id: client,
        redirect_uri: site.redirectUri,
        code_challenge: pkce.challenge,
        code_challenge_method: 'S256',
        scope: 'mcp',
        resource: `${cp.url}/mcp/default`,
        state: 'xyz',
        ...changes,
      };
      const query = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== null));
      return fetch(`${cp.url}/oauth/auth?${query}`, { redirect: 'manual' });
    };
    /** Refused on a page of ours: the client is not trusted enough to be sent anything. */
    async function refusedHere(answer: Response, error: string, description: RegExp): Promise<string> {
      expect(answer.status).toBe(400);
      expect(answer.headers.get('location')).toBeNull();
      expect(answer.headers.get('content-security-policy')).toContain("default-src 'none'");
      const html = await answer.text();
      expect(html).toContain(error);
      expect(html).toMatch(description);
      return html;
    }
    /** Refused back at the client's redirect URI, in OAuth's terms. */
    function refusedThere(answer: Response, error: string, description: RegExp): void {
      expect(answer.status).toBe(303);
      const back = new URL(answer.headers.get('location')!);
      expect(back.origin + back.pathname).toBe(site.redirectUri);
      expect(back.searchParams.get('error')).toBe(error);
      expect(back.searchParams.get('error_description')).toMatch(description);
      expect(back.searchParams.get('code')).toBeNull();
    }

    const script = await refusedHere(await request(hostile), 'invalid_client', /client_name must be plain text/);
    expect(script).not.toContain('<script>window');
    // and in a browser: the page says why, and nothing of the document runs
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => void dialog.dismiss().then(() => dialogs.push(dialog.message())));
    const shown = await page.goto(
      `${cp.url}/oauth/auth?${new URLSearchParams({ response_type: 'code', client_id: hostile, redirect_uri: site.redirectUri, code_challenge: pkce.challenge, code_challenge_method: 'S256', resource: `${cp.url}/mcp/default` })}`,
    );
    expect(shown!.status()).toBe(400);
    expect(await page.locator('main').innerText()).toContain('client_name must be plain text');
    expect(await page.evaluate('typeof window.pwned')).toBe('undefined');
    expect(dialogs).toEqual([]);

    await refusedHere(await request(impostor), 'invalid_client', /another client_id/);
    await refusedHere(await request(secretive), 'invalid_client', /client_secret/);
    await refusedHere(await request(`${clientId.replace('mcp-client', 'missing')}`), 'invalid_client', /HTTP 404/);
    await refusedHere(
      await request(clientId, { redirect_uri: 'http://127.0.0.1:9/steal' }),
      'invalid_redirect_uri',
      /redirect_uri did not match/,
    );
    refusedThere(
      await request(clientId, { code_challenge: null, code_challenge_method: null }),
      'invalid_request',
      /PKCE/,
    );
    refusedThere(
      await request(clientId, { code_challenge: pkce.verifier, code_challenge_method: 'plain' }),
      'invalid_request',
      /code_challenge_method/,
    );
    refusedThere(await request(clientId, { resource: null }), 'invalid_target', /resource parameter is required/);
    refusedThere(
      await request(clientId, { resource: 'https://elsewhere.example.com/mcp/default' }),
      'invalid_target',
      /MCP endpoint of a workspace of this control plane/,
    );
    // nothing was granted to any of them
    const listed = await cp.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    const ids = listed.body.items.map((c: { client_id: string }) => c.client_id);
    for (const refused of [hostile, impostor, secretive]) expect(ids).not.toContain(refused);
  });

  it('takes self-registered clients only once an admin allows them', async () => {
    const closed = await site.register(cp, 'Registered client');
    expect(closed.status, closed.text).toBe(403);
    expect(closed.body).toMatchObject({ code: 'OAUTH_REGISTRATION_DISABLED', error: 'invalid_client_metadata' });

    const allowed = await cp.request('PUT', '/v1/organization/oauth-settings', {
      body: { allow_dynamic_registration: true },
    });
    expect(allowed.status, allowed.text).toBe(200);
    // the SDK registers itself (no metadata document), then the person is asked as for any client
    const provider = await connectWithBrowser(null, 'Registered client');
    expect(provider.clientInformation()!.client_id).not.toMatch(/^http/);
    expect(await toolsWith(provider)).toContain(`${server}__read_graph`);
    const listed = await cp.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    expect(listed.body.items.find((c: { client_name: string }) => c.client_name === 'Registered client')).toMatchObject(
      {
        registration: 'dynamic',
      },
    );
    await cp.request('PUT', '/v1/organization/oauth-settings', { body: { allow_dynamic_registration: false } });
  });

  it('ends a connection whose grant ran out of time, on the record', async () => {
    await connectWithBrowser();
    const listed = await cp.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    const newest = listed.body.items[0];
    try {
      // a year and a day later, the sweep finds the grant over
      advanceClock(cp, 366 * 24 * 3600_000);
      await cp.cp.app.get(OauthSweep).pass();
    } finally {
      resetClock(cp);
    }
    const after = await cp.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    expect(after.body.items.map((c: { id: string }) => c.id)).not.toContain(newest.id);
    const audit = await cp.request('GET', '/v1/workspaces/default/audit?type=oauth.client_disconnected');
    expect(audit.body.items[0].data).toMatchObject({ connection_id: newest.id, reason: 'expired' });
  });

  it('ends a person’s connected clients when they are offboarded', async () => {
    const provider = await connectWithBrowser();
    const tokens = provider.tokens()!;
    const listed = await cp.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    const userId = listed.body.items[0].user.id;
    const deactivated = await cp.request('POST', `/v1/users/${userId}/deactivate`);
    expect(deactivated.status, deactivated.text).toBe(200);
    const refused = await mcpWith(tokens.access_token);
    expect(refused.status).toBe(401);
    expect((await refresh(tokens.refresh_token!)).body.error).toBe('invalid_grant');
    const after = await cp.request('GET', `/v1/workspaces/default/oauth/clients?user=${userId}`);
    expect(after.body.items).toEqual([]);
    const record = await cp.request('GET', '/v1/audit?type=user.deactivated');
    expect(record.body.items[0].data.ended.oauth_clients).toBeGreaterThan(0);
  });

  /** A token request of the refresh grant, as the client makes it. */
  function refresh(refreshToken: string) {
    return refreshGrant(cp, clientId, refreshToken);
  }
});
