import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, LocalIdp } from '../auth/local-idp';
import { anOrganization, uniqueSlug } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { advanceClock, resetClock } from '../support/clock';
import { HeadlessBrowser, last } from './browser';
import {
  aPerson as aWorkspacePerson,
  anOauthServer as aServer,
  connectInBrowser as connectThroughBrowser,
  Person,
} from './fixture';
import { secretsIn, ProtectedMcpServer, UpstreamAuthorizationServer } from './upstream';

/**
 * Connecting the pool to an upstream MCP server that signs in with OAuth: the
 * catalog entry, the connect URL, the person's sign-in at the upstream's own
 * authorization server (a real one), the callback, the list and the end of a
 * connection; and what is refused on the way.
 */
describe('OAuth connections to upstream MCP servers', () => {
  let cp: TestControlPlane;
  let idp: LocalIdp;
  let as: UpstreamAuthorizationServer;
  let mcp: ProtectedMcpServer;
  let server: string;
  let ann: Person;
  let bob: Person;

  const anOauthServer = (oauth: Record<string, unknown> = {}, url = mcp.url) => aServer(cp, url, oauth);
  const aPerson = (role: string) => aWorkspacePerson(cp, idp, role);
  const connectInBrowser = (person: Person, name: string, account: string) =>
    connectThroughBrowser(cp, idp, as, person, name, account);

  beforeAll(async () => {
    cp = await startApiControlPlane();
    cp.cp.config.publicUrl = cp.url;
    idp = new LocalIdp();
    await idp.start();
    await idp.trustedBy(cp, { client_id: idp.clientId, default_role: 'member' });
    as = new UpstreamAuthorizationServer();
    mcp = new ProtectedMcpServer(as);
    await mcp.start();
    await as.start(() => mcp.resource);
    server = await anOauthServer();
    ann = await aPerson('member');
    bob = await aPerson('member');
  });
  afterAll(async () => {
    await cp?.close();
    await idp?.stop();
    await as?.stop();
    await mcp?.stop();
  });

  it('answers where to connect, having discovered the upstream and registered the pool there', async () => {
    const answer = await cp.request('POST', '/v1/workspaces/default/connections', {
      token: ann.token,
      body: { server },
    });
    expect(answer.status, answer.text).toBe(201);
    expect(answer.body).toEqual({
      server,
      connections: 'per_person',
      authorization_url: `${cp.url}/oauth/connections/connect?workspace=default&server=${server}`,
      authorization_server: as.issuer,
      registration: 'dynamic',
    });
    // registered once, as a client whose one redirect URI is the callback, and reused after
    expect(as.registrations).toHaveLength(1);
    expect(as.registrations[0]).toMatchObject({
      redirect_uris: [`${cp.url}/oauth/connections/callback`],
      grant_types: ['authorization_code', 'refresh_token'],
      client_name: 'Aileron',
      application_type: 'web',
    });
    await cp.request('POST', '/v1/workspaces/default/connections', { token: ann.token, body: { server } });
    expect(as.registrations).toHaveLength(1);
  });

  it('says in the workspace’s servers which sign in with OAuth, and whose connections they use', async () => {
    const shared = await anOauthServer({ connections: 'per_workspace' });
    const listed = await cp.request('GET', '/v1/workspaces/default/servers?limit=200', { token: ann.token });
    const byName = new Map(listed.body.items.map((a: { server: string }) => [a.server, a]));
    expect(byName.get(server)).toMatchObject({ auth: 'oauth', connections: 'per_person' });
    expect(byName.get(shared)).toMatchObject({ auth: 'oauth', connections: 'per_workspace' });
  });

  it('refuses what cannot be connected, with a stable code', async () => {
    const plain = uniqueSlug('plain');
    await cp.request('POST', '/v1/catalog/servers', {
      body: { name: plain, version: '1.0.0', mode: 'remote', url: mcp.url },
    });
    await cp.request('PUT', `/v1/workspaces/default/servers/${plain}`, { body: { version: '1.0.0' } });
    const post = (body: unknown, token = ann.token) =>
      cp.request('POST', '/v1/workspaces/default/connections', { token, body });
    expectProblem(await post({ server: plain }), 409, 'CONNECTION_NOT_OAUTH');
    expectProblem(await post({ server: 'nowhere' }), 404, 'MCP_SERVER_NOT_FOUND');
    expectProblem(await post({ server: 'Not A Name' }), 400, 'VALIDATION_FAILED');
    expectProblem(await post({ server, extra: 1 }), 400, 'VALIDATION_FAILED');
    // a workspace's own connection is an admin's to make
    const shared = await anOauthServer({ connections: 'per_workspace' });
    expectProblem(await post({ server: shared }), 403, 'FORBIDDEN');
    expect((await post({ server: shared }, cp.ownerToken)).status).toBe(201);
    // an upstream whose authorization cannot be found
    const lost = await anOauthServer({}, `http://127.0.0.1:1/mcp`);
    expectProblem(await post({ server: lost }), 502, 'UPSTREAM_OAUTH_UNAVAILABLE');
    // another organisation sees no such workspace
    const other = await anOrganization(cp);
    expectProblem(await post({ server }, other.token), 404, 'WORKSPACE_NOT_FOUND');
  });

  it('connects a person in their browser: console sign-in, the upstream’s sign-in, the callback; tokens sealed, never shown', async () => {
    // without a console session the browser is sent to sign in first, and comes back
    const anonymous = await new HeadlessBrowser().open(
      `${cp.url}/oauth/connections/connect?workspace=default&server=${server}`,
    );
    expect(anonymous[0]!.status).toBe(303);
    expect(anonymous[0]!.location).toBe(
      `/sign-in?${new URLSearchParams({ return_to: `/oauth/connections/connect?workspace=default&server=${server}` })}`,
    );

    const { steps } = await connectInBrowser(ann, server, 'ann-upstream');
    const authorize = new URL(steps[1]!.url);
    expect(authorize.origin).toBe(as.issuer);
    // PKCE S256, the state, the RFC 8707 resource, the scopes the upstream asked for
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorize.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorize.searchParams.get('resource')).toBe(mcp.resource);
    expect(authorize.searchParams.get('scope')).toBe('mcp:tools offline_access');
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${cp.url}/oauth/connections/callback`);
    const done = last(steps);
    expect(new URL(done.url).pathname).toBe('/oauth/connections/callback');
    expect(done.status, done.text).toBe(200);
    expect(done.text).toContain(`${server} is connected`);
    expect(as.grants).toContain('authorization_code');

    const listed = await cp.request('GET', '/v1/workspaces/default/connections', { token: ann.token });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.items).toHaveLength(1);
    expect(listed.body.items[0]).toMatchObject({
      server,
      connections: 'per_person',
      user: { id: ann.id, email: ann.email },
      state: 'connected',
      refreshable: true,
      registration: 'dynamic',
      authorization_server: as.issuer,
      scope: expect.stringContaining('mcp:tools'),
      connected_by: `user:${ann.id}`,
    });
    // nothing token-like in the answer, and the database holds the tokens only sealed
    expect(secretsIn(as, listed.text)).toEqual([]);
    const rows = await cp.cp.database.client.$queryRawUnsafe<{ ciphertext: string }[]>(
      `SELECT ciphertext FROM vault_sealed_values WHERE id = 'connection:${listed.body.items[0].id}'`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.ciphertext).not.toContain('"access_token"');

    // the audit record names the person and the server, never a token
    const audit = await eventually('the connection.connected record', async () => {
      const found = await cp.request('GET', '/v1/workspaces/default/audit?type=connection.connected');
      return found.body.items.find((r: { data: { server: string } }) => r.data.server === server);
    });
    expect(audit.actor).toBe(`user:${ann.id}`);
    expect(secretsIn(as, JSON.stringify(audit))).toEqual([]);
  });

  it('lets nobody else see or end a person’s connection; the person and admins end it, revoked upstream too', async () => {
    const mine = (await cp.request('GET', '/v1/workspaces/default/connections', { token: ann.token })).body.items[0];
    // Bob sees only his own (none) and the workspace's; ending Ann's is a 404 to him
    const bobs = await cp.request('GET', '/v1/workspaces/default/connections', { token: bob.token });
    expect(bobs.body.items.map((c: { id: string }) => c.id)).not.toContain(mine.id);
    expectProblem(
      await cp.request('DELETE', `/v1/workspaces/default/connections/${mine.id}`, { token: bob.token }),
      404,
      'CONNECTION_NOT_FOUND',
    );
    // admins and auditors see everyone's
    const all = await cp.request('GET', '/v1/workspaces/default/connections');
    expect(all.body.items.map((c: { id: string }) => c.id)).toContain(mine.id);
    // another organisation reaches nothing
    const other = await anOrganization(cp);
    expectProblem(
      await cp.request('DELETE', `/v1/workspaces/default/connections/${mine.id}`, { token: other.token }),
      404,
      'WORKSPACE_NOT_FOUND',
    );

    const grantsBefore = as.grants.length;
    const ended = await cp.request('DELETE', `/v1/workspaces/default/connections/${mine.id}`, { token: ann.token });
    expect(ended.status, ended.text).toBe(200);
    expect(ended.body).toMatchObject({ id: mine.id, upstream_revoked: true });
    expect(as.grants.length).toBe(grantsBefore);
    expect((await cp.request('GET', '/v1/workspaces/default/connections', { token: ann.token })).body.items).toEqual(
      [],
    );
    const sealed = await cp.cp.database.client.$queryRawUnsafe<unknown[]>(
      `SELECT 1 FROM vault_sealed_values WHERE id = 'connection:${mine.id}'`,
    );
    expect(sealed).toEqual([]);
    const audit = await eventually('the connection.revoked record', async () => {
      const found = await cp.request('GET', '/v1/workspaces/default/audit?type=connection.revoked');
      return found.body.items.find((r: { data: { connection_id: string } }) => r.data.connection_id === mine.id);
    });
    expect(audit.data).toMatchObject({ reason: 'revoked_by_person', upstream_revoked: true, server });
  });

  it('takes a callback once, only in the browser that began it, and for the person signed in there', async () => {
    // Bob begins; his browser is sent to the upstream's authorization URL, and stops there
    const bobs = new HeadlessBrowser();
    await bobs.signIn(cp, idp, bob.claims);
    const begun = await bobs.open(
      `${cp.url}/oauth/connections/connect?workspace=default&server=${server}`,
      (url) => url.origin === as.issuer,
    );
    const upstreamAuthorization = last(begun).url;
    expect(new URL(upstreamAuthorization).origin).toBe(as.issuer);

    // Ann is lured to Bob's authorization URL: her upstream account would become Bob's connection
    const anns = new HeadlessBrowser();
    await anns.signIn(cp, idp, ann.claims);
    as.account = 'ann-upstream';
    const lured = await anns.open(upstreamAuthorization);
    expect(last(lured).status).toBe(400);
    expect(last(lured).text).toContain('This connection request is over');
    const listed = await cp.request('GET', '/v1/workspaces/default/connections');
    expect(listed.body.items.filter((c: { server: string }) => c.server === server)).toEqual([]);

    // the state went with the refused attempt: Bob's own browser cannot finish it afterwards either
    const callback = lured.find((step) => step.url.startsWith(`${cp.url}/oauth/connections/callback`))!.url;
    const replayed = await bobs.open(callback);
    expect(last(replayed).status).toBe(400);

    // a finished callback, replayed in the same browser, does nothing more
    const { browser, steps } = await connectInBrowser(bob, server, 'bob-upstream');
    expect(last(steps).status).toBe(200);
    const again = await browser.open(last(steps).url);
    expect(last(again).status).toBe(400);
    expect(last(again).text).toContain('This connection request is over');
    const bobsNow = await cp.request('GET', '/v1/workspaces/default/connections', { token: bob.token });
    expect(bobsNow.body.items.filter((c: { server: string }) => c.server === server)).toHaveLength(1);
  });

  it('refuses a callback that comes after the start’s ten minutes', async () => {
    const frank = await aPerson('member');
    const browser = new HeadlessBrowser();
    await browser.signIn(cp, idp, frank.claims);
    const begun = await browser.open(
      `${cp.url}/oauth/connections/connect?workspace=default&server=${server}`,
      (url) => url.origin === as.issuer,
    );
    advanceClock(cp, 601_000);
    try {
      as.account = 'frank-upstream';
      const late = await browser.open(last(begun).url);
      expect(last(late).status).toBe(400);
      expect(last(late).text).toContain('This connection request is over');
    } finally {
      resetClock(cp);
    }
    const listed = await cp.request('GET', '/v1/workspaces/default/connections', { token: frank.token });
    expect(listed.body.items.filter((c: { user: { id: string } | null }) => c.user?.id === frank.id)).toEqual([]);
  });

  it('says so when the person refuses at the upstream, and stores nothing', async () => {
    const carol = await aPerson('member');
    const browser = new HeadlessBrowser();
    await browser.signIn(cp, idp, carol.claims);
    const begun = await browser.open(
      `${cp.url}/oauth/connections/connect?workspace=default&server=${server}`,
      (url) => url.origin === as.issuer,
    );
    const state = new URL(last(begun).url).searchParams.get('state')!;
    const refused = await browser.open(
      `${cp.url}/oauth/connections/callback?${new URLSearchParams({ error: 'access_denied', state, error_description: '<script>x</script>' })}`,
    );
    expect(last(refused).status).toBe(400);
    expect(last(refused).text).toContain('did not give access (access_denied)');
    expect(last(refused).text).not.toContain('<script>');
    const listed = await cp.request('GET', '/v1/workspaces/default/connections', { token: carol.token });
    expect(listed.body.items.filter((c: { user: { id: string } | null }) => c.user?.id === carol.id)).toEqual([]);
  });

  it('ends a person’s connections when they are offboarded, and revokes them upstream', async () => {
    const erin = await aPerson('member');
    const { steps } = await connectInBrowser(erin, server, 'erin-upstream');
    expect(last(steps).status).toBe(200);
    const [connection] = (await cp.request('GET', '/v1/workspaces/default/connections', { token: erin.token })).body
      .items;
    expect(connection.user.id).toBe(erin.id);
    const deactivated = await cp.request('POST', `/v1/users/${erin.id}/deactivate`, { body: {} });
    expect(deactivated.status, deactivated.text).toBe(200);
    const listed = await cp.request('GET', '/v1/workspaces/default/connections');
    expect(listed.body.items.map((c: { id: string }) => c.id)).not.toContain(connection.id);
    const sealed = await cp.cp.database.client.$queryRawUnsafe<unknown[]>(
      `SELECT 1 FROM vault_sealed_values WHERE id = 'connection:${connection.id}'`,
    );
    expect(sealed).toEqual([]);
    const audit = await eventually('the connection.revoked record', async () => {
      const found = await cp.request('GET', '/v1/workspaces/default/audit?type=connection.revoked');
      return found.body.items.find((r: { data: { connection_id: string } }) => r.data.connection_id === connection.id);
    });
    expect(audit.data.user_id).toBe(erin.id);
    const offboarded = await eventually('the user.deactivated record', async () => {
      const found = await cp.request('GET', '/v1/audit?type=user.deactivated&limit=200');
      return found.body.items.find((r: { data: { user_id: string } }) => r.data.user_id === erin.id);
    });
    expect(offboarded.data.ended.upstream_connections).toBe(1);
    // the upstream heard of it after the commit: Erin's refresh token no longer works there
    const erinsTokens = as.secrets.slice(-3);
    await expect
      .poll(async () => Promise.all(erinsTokens.map(async (t) => (await as.introspect(t)).active)))
      .toEqual([false, false, false]);
  });

  it('serves the pool’s Client ID Metadata Document at a stable public URL', async () => {
    const document = await cp.request('GET', '/oauth/connections/client-metadata.json', { token: null });
    expect(document.status).toBe(200);
    expect(document.body).toEqual({
      client_id: `${cp.url}/oauth/connections/client-metadata.json`,
      client_name: 'Aileron',
      client_uri: cp.url,
      application_type: 'web',
      redirect_uris: [`${cp.url}/oauth/connections/callback`],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
  });
});
