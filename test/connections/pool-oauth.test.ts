import { ElicitationCompleteNotificationSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalIdp } from '../auth/local-idp';
import { aGateway, aToken } from '../support/builders';
import { CapturedOutput, captureOutput } from '../support/captured-output';
import { advanceClock, resetClock } from '../support/clock';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { connect, textOf } from '../pool/mcp-client';
import { last } from './browser';
import { aPerson as aWorkspacePerson, anOauthServer as aServer, connectInBrowser, Person } from './fixture';
import { ProtectedMcpServer, secretsIn, UpstreamAuthorizationServer } from './upstream';

/** The refusal a tool error carries (toolError): its code and details. */
function refusalOf(result: unknown): { code: string; message: string; connect_url?: string } | undefined {
  return (result as { _meta?: Record<string, never> })._meta?.['aileron/refusal'];
}

/**
 * The pool calling an upstream MCP server that signs in with OAuth, end to
 * end with real parts: the upstream's own authorization server (oidc-provider)
 * and an SDK MCP server that checks every bearer by introspection, reached
 * through `/mcp/{ws}` by an SDK client as a person. Their tokens are injected
 * per person, renewed before they expire and once on a 401, and when that
 * cannot be, the call says who must reconnect and where.
 */
describe('the pool as an OAuth client of upstream MCP servers', () => {
  let output: CapturedOutput;
  let cp: TestControlPlane;
  let idp: LocalIdp;
  let as: UpstreamAuthorizationServer;
  let mcp: ProtectedMcpServer;
  let server: string;
  let ann: Person;
  let bob: Person;

  const aPerson = (role: string) => aWorkspacePerson(cp, idp, role);
  const anOauthServer = (oauth: Record<string, unknown> = {}) => aServer(cp, mcp.url, oauth);
  /** The person connects `name` in their browser, signing in upstream as `account`. */
  async function connectAs(person: Person, name: string, account: string): Promise<void> {
    const { steps } = await connectInBrowser(cp, idp, as, person, name, account);
    expect(last(steps).status, last(steps).text).toBe(200);
  }

  /**
   * Moves the pool's clock to just before the access token of `userId`'s
   * connection runs out: due for renewal. Each test starts on the real clock
   * again (afterEach), and a caller's bearer is minted for the test
   * (`idp.token`), so no moved clock outlives an IdP token of the caller.
   */
  async function makeDue(userId: string): Promise<void> {
    const expires = Date.parse((await connectionOf(server, userId)).access_expires_at as string);
    advanceClock(cp, expires - Date.now() - 5_000);
  }

  function whoami(client: Awaited<ReturnType<typeof connect>>['client'], name = server) {
    return client.callTool({ name: `${name}__whoami`, arguments: {} });
  }

  /** The connection of `person` (or the workspace's) to `name`, as the API lists it. */
  async function connectionOf(name: string, userId: string | null) {
    const listed = await cp.request('GET', `/v1/workspaces/default/connections?server=${name}`);
    return listed.body.items.find((c: { user: { id: string } | null }) => (c.user?.id ?? null) === userId);
  }

  beforeAll(async () => {
    output = captureOutput();
    cp = await startApiControlPlane({ LOG_LEVEL: 'debug' });
    cp.cp.config.publicUrl = cp.url;
    idp = new LocalIdp();
    await idp.start();
    await idp.trustedBy(cp, { client_id: idp.clientId, default_role: 'member' });
    as = new UpstreamAuthorizationServer({ accessTokenTtl: 120 });
    mcp = new ProtectedMcpServer(as);
    await mcp.start();
    await as.start(() => mcp.resource);
    await cp.request('PUT', '/v1/workspaces/default/policy', { body: { default: 'allow', rules: [] } });
    server = await anOauthServer();
    ann = await aPerson('member');
    bob = await aPerson('member');
  });
  afterEach(() => resetClock(cp));
  afterAll(async () => {
    await cp?.close();
    await idp?.stop();
    await as?.stop();
    await mcp?.stop();
    output?.restore();
  });

  it('calls the upstream with the person’s own token, never the caller’s credential', async () => {
    await connectAs(ann, server, 'ann-upstream');
    const { client } = await connect(cp, ann.token, '/mcp/default');
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toContain(`${server}__whoami`);
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    // every request the upstream got carried one of its own access tokens, none the MCP client's
    const sent = mcp.seen.filter(Boolean);
    expect(sent.length).toBeGreaterThan(0);
    for (const header of sent) {
      expect(header).not.toContain(ann.token);
      expect(as.secrets).toContain(header.replace(/^Bearer /, ''));
    }
    await client.close();
  });

  it('keeps people apart: another person needs a connection of their own, made while their session is open', async () => {
    const { client } = await connect(cp, bob.token, '/mcp/default');
    // the server cannot be opened for Bob, and initialize says why
    const refused = await whoami(client);
    expect(refused.isError).toBe(true);
    const refusal = refusalOf(refused)!;
    expect(refusal.code).toBe('CONNECTION_REQUIRED');
    expect(refusal.connect_url).toBe(`${cp.url}/oauth/connections/connect?workspace=default&server=${server}`);
    expect(refusal.message).toContain('you');
    expect(refusal.message).toContain(refusal.connect_url);
    expect(textOf(refused)).toMatch(/^CONNECTION_REQUIRED: /);

    // Bob connects in his browser; his open session now reaches the upstream as him
    await connectAs(bob, server, 'bob-upstream');
    expect(textOf(await whoami(client))).toBe('upstream account bob-upstream');
    // and Ann's calls stay hers
    const anns = await connect(cp, ann.token, '/mcp/default');
    expect(textOf(await whoami(anns.client))).toBe('upstream account ann-upstream');
    await anns.client.close();
    await client.close();
  });

  it('uses the person’s connection for their agent sessions, and none for a caller that is no person', async () => {
    const session = await cp.request('POST', '/v1/workspaces/default/sessions', {
      token: ann.token,
      body: { name: 'ann-agent' },
    });
    expect(session.status, session.text).toBe(201);
    const agent = await connect(cp, session.body.caveat_token, '/mcp/default');
    expect(textOf(await whoami(agent.client))).toBe('upstream account ann-upstream');
    await agent.client.close();

    const automation = await aToken(cp, cp.ownerToken, { role: 'member', workspace: 'default' });
    const robot = await connect(cp, automation.token, '/mcp/default');
    const refused = await whoami(robot.client);
    expect(refusalOf(refused)?.code).toBe('CONNECTION_PERSON_REQUIRED');
    expect(refusalOf(refused)?.message).toContain('per_workspace');
    await robot.client.close();
  });

  it('renews the access token before it expires, once, and the upstream sees the new one', async () => {
    const { client } = await connect(cp, idp.token(ann.claims), '/mcp/default');
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    const before = mcp.seen[mcp.seen.length - 1];
    const refreshes = as.grants.filter((g) => g === 'refresh_token').length;
    // the pool's clock says the token is nearly out (its lifetime is 120 s)
    await makeDue(ann.id);
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    expect(as.grants.filter((g) => g === 'refresh_token').length).toBe(refreshes + 1);
    const after = mcp.seen[mcp.seen.length - 1];
    expect(after).not.toBe(before);
    expect((await connectionOf(server, ann.id)).last_refreshed_at).not.toBeNull();
    await client.close();
  });

  it('renews once when the upstream refuses the token, and the call goes through', async () => {
    const { client } = await connect(cp, ann.token, '/mcp/default');
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    const current = mcp.seen[mcp.seen.length - 1]!.replace(/^Bearer /, '');
    await as.revokeAccessToken(current);
    const refused = mcp.refused;
    const refreshes = as.grants.filter((g) => g === 'refresh_token').length;
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    expect(mcp.refused).toBe(refused + 1);
    expect(as.grants.filter((g) => g === 'refresh_token').length).toBe(refreshes + 1);
    await client.close();
  });

  it('says who must reconnect, and where, once the upstream revoked the connection; a reconnect brings it back', async () => {
    const { client } = await connect(cp, ann.token, '/mcp/default');
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    // Ann revokes Aileron's access at the upstream: her refresh and access tokens are void
    await as.revokeEverythingOf('ann-upstream');
    const refused = await whoami(client);
    expect(refused.isError).toBe(true);
    expect(refusalOf(refused)).toMatchObject({
      code: 'CONNECTION_NEEDS_RECONNECT',
      connect_url: `${cp.url}/oauth/connections/connect?workspace=default&server=${server}`,
    });
    expect(refusalOf(refused)!.message).toMatch(/connect your own account again, in a browser/);
    expect((await connectionOf(server, ann.id)).state).toBe('needs_reconnect');
    const audit = await eventually('the refresh failure record', async () => {
      const found = await cp.request('GET', '/v1/workspaces/default/audit?type=connection.refresh_failed');
      return found.body.items.find((r: { data: { user_id: string } }) => r.data.user_id === ann.id);
    });
    expect(audit.data).toMatchObject({ reason: 'refused', oauth_error: 'invalid_grant', server });
    // asked again, it does not present a refresh token the upstream refused: the same answer, no new request
    const refreshes = as.grants.length;
    expect(refusalOf(await whoami(client))?.code).toBe('CONNECTION_NEEDS_RECONNECT');
    expect(as.grants.length).toBe(refreshes);

    await connectAs(ann, server, 'ann-upstream');
    expect((await connectionOf(server, ann.id)).state).toBe('connected');
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    await client.close();
  });

  it('asks a client that can show URLs to send its person to connect, waits for them, and runs the call', async () => {
    const carol = await aPerson('member');
    const { client } = await connect(cp, carol.token, '/mcp/default', { elicitation: { url: {} } });
    const asked: Record<string, unknown>[] = [];
    const completed: unknown[] = [];
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
      completed.push(notification.params.elicitationId);
    });
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params);
      // the person opens the link in their browser while the client says it took it
      void connectAs(carol, server, 'carol-upstream');
      return { action: 'accept' };
    });
    const first = await whoami(client);
    expect(textOf(first)).toBe('upstream account carol-upstream');
    expect(asked).toEqual([
      {
        mode: 'url',
        elicitationId: expect.any(String),
        url: `${cp.url}/oauth/connections/connect?workspace=default&server=${server}`,
        message: expect.stringContaining(`${server} needs an OAuth connection`),
      },
    ]);
    await expect.poll(() => completed).toEqual([asked[0]!.elicitationId]);

    // a person who declines gets the tool error with the link
    const dave = await aPerson('member');
    const declining = await connect(cp, dave.token, '/mcp/default', { elicitation: { url: {} } });
    declining.client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'decline' }));
    expect(refusalOf(await whoami(declining.client))?.code).toBe('CONNECTION_REQUIRED');
    await declining.client.close();
    await client.close();
  });

  it('serves a per-workspace connection to everyone in the workspace, gateways included', async () => {
    const shared = await anOauthServer({ connections: 'per_workspace' });
    const admin = await aPerson('admin');
    await connectAs(admin, shared, 'team-upstream');
    const gateway = await aGateway(cp, cp.ownerToken, 'default');
    for (const token of [ann.token, bob.token, gateway.token]) {
      const { client } = await connect(cp, token, '/mcp/default');
      expect(textOf(await whoami(client, shared))).toBe('upstream account team-upstream');
      await client.close();
    }
    const connection = await connectionOf(shared, null);
    expect(connection).toMatchObject({ connections: 'per_workspace', user: null, connected_by: `user:${admin.id}` });
  });

  it('keeps the sealed tokens usable across a rotation of the workspace’s vault key', async () => {
    const rotated = await cp.request('POST', '/v1/workspaces/default/vault/rotate');
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.rewrapped).toBeGreaterThan(0);
    const keys = await cp.cp.database.client.$queryRawUnsafe<{ key_version: number }[]>(
      `SELECT DISTINCT key_version FROM vault_sealed_values v JOIN workspaces w ON w.id = v.workspace_id WHERE w.slug = 'default'`,
    );
    expect(keys).toEqual([{ key_version: rotated.body.key_version }]);
    // the token is due: renewing it reads the sealed refresh token, now under the new key, and seals the new ones under it
    const { client } = await connect(cp, idp.token(ann.claims), '/mcp/default');
    const id = (await connectionOf(server, ann.id)).id as string;
    const renewals = () => output.lines().filter((l) => l.includes('"connection renewed"') && l.includes(id)).length;
    const before = renewals();
    await makeDue(ann.id);
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    expect(renewals()).toBe(before + 1);
    await client.close();
  });

  it('keeps the connection when its authorization server is down, says to retry, and renews once it is back', async () => {
    const { client } = await connect(cp, idp.token(ann.claims), '/mcp/default');
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    as.tokenEndpointDown = true;
    await makeDue(ann.id);
    const refused = await whoami(client);
    expect(refusalOf(refused)?.code).toBe('CONNECTION_UNAVAILABLE');
    expect(refusalOf(refused)?.message).toMatch(/could not be reached .*Retry shortly/);
    expect((await connectionOf(server, ann.id)).state).toBe('connected');
    const audit = await eventually('the unreachable record', async () => {
      const found = await cp.request('GET', '/v1/workspaces/default/audit?type=connection.refresh_failed');
      return found.body.items.find(
        (r: { data: { user_id: string; reason: string } }) =>
          r.data.user_id === ann.id && r.data.reason === 'unreachable',
      );
    });
    expect(audit.data.detail).toContain('did not renew the token');
    // the server is back: after this replica's short wait the connection renews and the call runs
    as.tokenEndpointDown = false;
    advanceClock(cp, 11_000);
    expect(textOf(await whoami(client))).toBe('upstream account ann-upstream');
    await client.close();
  });

  it('never shows a token or client secret of the upstream: not in answers, logs or audit', async () => {
    const answers = [
      await cp.request('GET', '/v1/workspaces/default/connections'),
      await cp.request('GET', '/v1/workspaces/default/audit?limit=200'),
    ];
    for (const answer of answers) expect(secretsIn(as, answer.text)).toEqual([]);
    // the log saw all of it, at debug level: the refreshes, the refusals, the requests
    expect(output.text()).toContain('/oauth/connections/callback');
    expect(secretsIn(as, output.text())).toEqual([]);
  });
});
