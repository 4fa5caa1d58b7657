import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aCatalogServer, aGateway, aWorkspace } from '../support/builders';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';

describe('two control-plane replicas on one PostgreSQL and Redis', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  let ws: string;
  beforeAll(async () => {
    a = await startTestControlPlane('postgres');
    b = await aReplicaOf(a);
    ws = (await aWorkspace(a, a.ownerToken)).slug;
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('serve the same bytes and ETags, so a gateway behind a load balancer still gets 304', async () => {
    const server = await aCatalogServer(a, a.ownerToken);
    await a.request('PUT', `/v1/workspaces/${ws}/servers/${server.name}`, { body: { version: '1.0.0' } });
    const gateway = await aGateway(a, a.ownerToken, ws);
    for (const path of ['/v1/gateway/catalog', '/v1/gateway/policy']) {
      const fromA = await a.request('GET', path, { token: gateway.token });
      const fromB = await b.request('GET', path, { token: gateway.token });
      expect(fromB.headers.get('etag'), path).toBe(fromA.headers.get('etag'));
      expect(fromB.text).toBe(fromA.text);
      expect(
        (
          await b.request('GET', path, {
            token: gateway.token,
            headers: { 'if-none-match': fromA.headers.get('etag')! },
          })
        ).status,
      ).toBe(304);
    }
  });

  it('a policy change on one replica reaches the other through Redis, not after a cache timeout', async () => {
    const gateway = await aGateway(a, a.ownerToken, ws);
    const before = await b.request('GET', '/v1/gateway/policy', { token: gateway.token });
    expect(
      (
        await b.request('POST', `/v1/workspaces/${ws}/policy/evaluate`, {
          token: a.ownerToken,
          body: { server: 's', tool: 't' },
        })
      ).body.decision,
    ).toBe('deny');

    await a.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
    // the caches' own timeout is 30 s: a bound of 10 s fails the test if only that timeout brought the change
    await eventually(
      'the new policy on the other replica',
      async () => {
        const res = await b.request('GET', '/v1/gateway/policy', {
          token: gateway.token,
          headers: { 'if-none-match': before.headers.get('etag')! },
        });
        return res.status === 200 && res.body.payload.version > before.body.payload.version;
      },
      { timeoutMs: 10_000 },
    );
    expect(
      (
        await b.request('POST', `/v1/workspaces/${ws}/policy/evaluate`, {
          token: a.ownerToken,
          body: { server: 's', tool: 't' },
        })
      ).body.decision,
    ).toBe('allow');
  });

  it('a gateway revoked on one replica is refused by the other', async () => {
    const gateway = await aGateway(a, a.ownerToken, ws);
    expect((await b.request('GET', '/v1/gateway/catalog', { token: gateway.token })).status).toBe(200);
    await a.request('DELETE', `/v1/workspaces/${ws}/gateways/${gateway.id}`);
    // under the credentials cache's own 10 s: only the bus can bring the revocation in time
    await eventually(
      'the revocation on the other replica',
      async () => (await b.request('GET', '/v1/gateway/catalog', { token: gateway.token })).status === 401,
      { timeoutMs: 5_000 },
    );
    expect((await b.request('GET', '/v1/gateway/catalog', { token: gateway.token })).body.code).toBe('GATEWAY_REVOKED');
  });
});
