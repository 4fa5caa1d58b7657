import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JwtKeys } from '../../libs/auth/src';
import { aToken, aUser, aWorkspace, uniqueSlug } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';

/**
 * Principals and workspace lookups are cached in memory on every replica for
 * the proxy's hot path. Each test first makes both replicas cache the
 * credential, then changes it on one, and expects the very next request on
 * either to see the change: a revoked token or a lowered role must not live on
 * for the cache's 30 s.
 */
describe('cached principals on two replicas', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  let ws: string;
  let organizationId: string;

  beforeAll(async () => {
    a = await startTestControlPlane('postgres');
    b = await aReplicaOf(a);
    ws = (await aWorkspace(a, a.ownerToken)).slug;
    organizationId = (await a.request('GET', '/v1/me')).body.organization.id;
  });
  afterEach(() => {
    resetClock(a);
    resetClock(b);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  /** An admin JWT for a person, as the sign-in flow would issue it. */
  async function userJwt(userId: string): Promise<string> {
    return (await a.cp.app.get(JwtKeys).issue({ sub: `user:${userId}`, org: organizationId })).token;
  }

  async function statusOnBoth(method: string, path: string, token: string, body?: unknown): Promise<[number, number]> {
    const fromA = await a.request(method, path, { token, body });
    const fromB = await b.request(method, path, { token, body });
    return [fromA.status, fromB.status];
  }

  it('a revoked API token is refused by the next request on this replica and the other', async () => {
    const token = await aToken(a, a.ownerToken, { role: 'member', workspace: ws });
    expect(await statusOnBoth('GET', `/v1/workspaces/${ws}`, token.token)).toEqual([200, 200]);

    expect((await a.request('DELETE', `/v1/tokens/${token.id}`)).status).toBe(204);

    const fromA = await a.request('GET', `/v1/workspaces/${ws}`, { token: token.token });
    const fromB = await b.request('GET', `/v1/workspaces/${ws}`, { token: token.token });
    expect([fromA.status, fromA.body.code]).toEqual([401, 'TOKEN_REVOKED']);
    expect([fromB.status, fromB.body.code]).toEqual([401, 'TOKEN_REVOKED']);
  });

  it('a JWT minted from an API token dies with the token on both replicas', async () => {
    const token = await aToken(a, a.ownerToken, { role: 'admin' });
    const jwt = (await a.request('POST', '/v1/auth/token', { token: token.token })).body.token as string;
    expect(await statusOnBoth('GET', '/v1/users', jwt)).toEqual([200, 200]);

    expect((await b.request('DELETE', `/v1/tokens/${token.id}`, { token: a.ownerToken })).status).toBe(204);

    expect(await statusOnBoth('GET', '/v1/users', jwt)).toEqual([401, 401]);
  });

  it('a cached API token is refused once its expiry passes', async () => {
    const token = await aToken(a, a.ownerToken, { role: 'member', workspace: ws, expires_in_seconds: 60 });
    expect(await statusOnBoth('GET', `/v1/workspaces/${ws}`, token.token)).toEqual([200, 200]);

    // the caches (30 s, on the same clock) load it again at 45 s; at 61 s the token's minute has passed and they still hold it
    for (const replica of [a, b]) advanceClock(replica, 45_000);
    expect(await statusOnBoth('GET', `/v1/workspaces/${ws}`, token.token)).toEqual([200, 200]);
    for (const replica of [a, b]) advanceClock(replica, 16_000);

    const fromA = await a.request('GET', `/v1/workspaces/${ws}`, { token: token.token });
    const fromB = await b.request('GET', `/v1/workspaces/${ws}`, { token: token.token });
    expect([fromA.status, fromA.body.code]).toEqual([401, 'TOKEN_EXPIRED']);
    expect([fromB.status, fromB.body.code]).toEqual([401, 'TOKEN_EXPIRED']);
  });

  it('a lowered workspace role forbids the next request; a removed membership hides the workspace', async () => {
    const user = await aUser(a, a.ownerToken, 'member');
    expect(
      (await a.request('PUT', `/v1/workspaces/${ws}/members/${user.id}`, { body: { role: 'admin' } })).status,
    ).toBe(200);
    const jwt = await userJwt(user.id);
    expect(await statusOnBoth('PATCH', `/v1/workspaces/${ws}`, jwt, { name: 'Renamed by a workspace admin' })).toEqual([
      200, 200,
    ]);

    expect(
      (await a.request('PUT', `/v1/workspaces/${ws}/members/${user.id}`, { body: { role: 'member' } })).status,
    ).toBe(200);
    expect(await statusOnBoth('PATCH', `/v1/workspaces/${ws}`, jwt, { name: 'Renamed by a mere member' })).toEqual([
      403, 403,
    ]);
    expect(await statusOnBoth('GET', `/v1/workspaces/${ws}`, jwt)).toEqual([200, 200]);

    expect((await b.request('DELETE', `/v1/workspaces/${ws}/members/${user.id}`, { token: a.ownerToken })).status).toBe(
      204,
    );
    expect(await statusOnBoth('GET', `/v1/workspaces/${ws}`, jwt)).toEqual([404, 404]);
  });

  it('a lowered organisation role forbids the next request', async () => {
    const user = await aUser(a, a.ownerToken, 'admin');
    const jwt = await userJwt(user.id);
    expect(await statusOnBoth('GET', '/v1/users', jwt)).toEqual([200, 200]);

    expect((await a.request('PATCH', `/v1/users/${user.id}`, { body: { role: 'member' } })).status).toBe(200);

    expect(await statusOnBoth('GET', '/v1/users', jwt)).toEqual([403, 403]);
  });

  it('a workspace looked up before it existed is found as soon as it is created', async () => {
    const slug = uniqueSlug('ws');
    expect(await statusOnBoth('GET', `/v1/workspaces/${slug}`, a.ownerToken)).toEqual([404, 404]);

    await aWorkspace(b, a.ownerToken, slug);

    expect(await statusOnBoth('GET', `/v1/workspaces/${slug}`, a.ownerToken)).toEqual([200, 200]);
  });
});
