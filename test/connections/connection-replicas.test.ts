import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalIdp } from '../auth/local-idp';
import { advanceClock, resetClock } from '../support/clock';
import { aReplicaOf, startApiControlPlane, TestControlPlane, withOwnerToken } from '../support/control-plane';
import { connect, textOf } from '../pool/mcp-client';
import { last } from './browser';
import { aPerson, anOauthServer, connectInBrowser, Person } from './fixture';
import { ProtectedMcpServer, UpstreamAuthorizationServer } from './upstream';

/**
 * Two control planes on one PostgreSQL, behind one public URL, using one
 * person's connection to an upstream that rotates its refresh tokens: the
 * token one replica renews is the one the other uses, and when both find it
 * due at once only one presents the refresh token (a second presentation of
 * a rotated refresh token is refused upstream, and would end the connection).
 */
describe('OAuth connections across control-plane replicas', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  let idp: LocalIdp;
  let as: UpstreamAuthorizationServer;
  let mcp: ProtectedMcpServer;
  let server: string;
  let ann: Person;

  const refreshes = () => as.grants.filter((g) => g.startsWith('refresh_token')).length;

  beforeAll(async () => {
    a = await startApiControlPlane();
    b = withOwnerToken(await aReplicaOf(a, { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' }), a.ownerToken);
    for (const cp of [a, b]) cp.cp.config.publicUrl = a.url;
    idp = new LocalIdp();
    await idp.start();
    await idp.trustedBy(a, { client_id: idp.clientId, default_role: 'member' });
    as = new UpstreamAuthorizationServer({ accessTokenTtl: 120 });
    mcp = new ProtectedMcpServer(as);
    await mcp.start();
    await as.start(() => mcp.resource);
    await a.request('PUT', '/v1/workspaces/default/policy', { body: { default: 'allow', rules: [] } });
    server = await anOauthServer(a, mcp.url);
    ann = await aPerson(a, idp, 'member');
    // Ann connects, in a browser, through replica A
    const { steps } = await connectInBrowser(a, idp, as, ann, server, 'ann-upstream');
    expect(last(steps).status, last(steps).text).toBe(200);
  });
  afterAll(async () => {
    for (const cp of [a, b]) if (cp) resetClock(cp);
    await b?.close();
    await a?.close();
    await idp?.stop();
    await as?.stop();
    await mcp?.stop();
  });

  it('uses the connection made through one replica on the other', async () => {
    const onB = await connect(b, ann.token, '/mcp/default');
    expect(textOf(await onB.client.callTool({ name: `${server}__whoami`, arguments: {} }))).toBe(
      'upstream account ann-upstream',
    );
    await onB.client.close();
  });

  it('renews a token both replicas find due at once exactly once, and both use the new one', async () => {
    const clients = await Promise.all([a, b, a, b].map((cp) => connect(cp, ann.token, '/mcp/default')));
    for (const { client } of clients)
      expect(textOf(await client.callTool({ name: `${server}__whoami`, arguments: {} }))).toBe(
        'upstream account ann-upstream',
      );
    const before = refreshes();
    const seenBefore = mcp.seen.length;
    // both replicas' clocks say the token is nearly out
    advanceClock(a, 115_000);
    advanceClock(b, 115_000);
    const answers = await Promise.all(
      clients.flatMap(({ client }) =>
        [1, 2, 3].map(() => client.callTool({ name: `${server}__whoami`, arguments: {} })),
      ),
    );
    for (const answer of answers) expect(textOf(answer)).toBe('upstream account ann-upstream');
    // one refresh request, accepted; none refused (a rotated refresh token presented twice would be)
    expect(refreshes()).toBe(before + 1);
    expect(as.grants.filter((g) => g.endsWith('refused'))).toEqual([]);
    // every call after it, on either replica, carried the same new token
    const sentAfter = new Set(mcp.seen.slice(seenBefore).filter(Boolean));
    expect(sentAfter.size).toBe(1);
    for (const { client } of clients) await client.close();
  });

  it('tells the other replica at once when the upstream refuses the connection: no second refresh attempt there', async () => {
    const onA = await connect(a, ann.token, '/mcp/default');
    const onB = await connect(b, ann.token, '/mcp/default');
    for (const { client } of [onA, onB])
      expect(textOf(await client.callTool({ name: `${server}__whoami`, arguments: {} }))).toBe(
        'upstream account ann-upstream',
      );
    await as.revokeEverythingOf('ann-upstream');
    const refusedOnA = await onA.client.callTool({ name: `${server}__whoami`, arguments: {} });
    expect(textOf(refusedOnA)).toMatch(/^CONNECTION_NEEDS_RECONNECT: /);
    const grants = as.grants.length;
    const refusedOnB = await onB.client.callTool({ name: `${server}__whoami`, arguments: {} });
    expect(textOf(refusedOnB)).toMatch(/^CONNECTION_NEEDS_RECONNECT: /);
    // B asked the upstream nothing more: it knew from A (the upstream refused its held token once, and the row said why)
    expect(as.grants.length).toBe(grants);
    for (const { client } of [onA, onB]) await client.close();
  });
});
