import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aCatalogServer, aGateway, anOrganization, aToken, aWorkspace } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
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

  /** Gateway token rotation and expiry, on both replicas behind a load balancer. */
  describe('rotating a gateway token', () => {
    afterEach(() => {
      resetClock(a);
      resetClock(b);
    });

    const poll = (cp: TestControlPlane, token: string, headers: Record<string, string> = {}) =>
      cp.request('GET', '/v1/gateway/catalog', { token, headers });
    const rotate = (id: string, body: Record<string, unknown>, options: { token?: string; workspace?: string } = {}) =>
      a.request('POST', `/v1/workspaces/${options.workspace ?? ws}/gateways/${id}/rotate`, {
        body,
        ...(options.token ? { token: options.token } : {}),
      });
    const refusalOf = async (cp: TestControlPlane, token: string, headers: Record<string, string> = {}) => {
      const res = await poll(cp, token, headers);
      return [res.status, res.body?.code];
    };

    it('answers a new token once; the old one works on every replica until its grace ends, then neither takes it', async () => {
      const gateway = await aGateway(a, a.ownerToken, ws);
      // both replicas hold the old token in their caches, and B a 304 for its poll
      const etag = (await poll(a, gateway.token)).headers.get('etag')!;
      expect((await poll(b, gateway.token, { 'if-none-match': etag })).status).toBe(304);

      const rotated = await rotate(gateway.id, { grace_seconds: 300 });
      expect(rotated.status, rotated.text).toBe(201);
      const fresh = rotated.body.token as string;
      expect(fresh).toMatch(/^ail_gw_/);
      expect(fresh).not.toBe(gateway.token);
      expect(rotated.body).toMatchObject({ id: gateway.id, prefix: fresh.slice(0, 11), token_expires_at: null });
      const graceEnd = Date.parse(rotated.body.previous_token_valid_until);
      expect(graceEnd - Date.now()).toBeGreaterThan(290_000);
      expect(graceEnd - Date.now()).toBeLessThanOrEqual(300_000);

      // the token is shown once: the list has its prefix and the grace, never the token
      const listed = await a.request('GET', `/v1/workspaces/${ws}/gateways`);
      const view = listed.body.items.find((g: { id: string }) => g.id === gateway.id);
      expect(view).toMatchObject({ prefix: fresh.slice(0, 11), previous_token_valid_until: expect.any(String) });
      expect(listed.text).not.toContain(fresh);

      for (const cp of [a, b]) {
        expect((await poll(cp, fresh)).status).toBe(200);
        expect((await poll(cp, gateway.token)).status).toBe(200);
        expect((await poll(cp, gateway.token, { 'if-none-match': etag })).status).toBe(304);
      }

      for (const cp of [a, b]) advanceClock(cp, 301_000);
      for (const cp of [a, b]) {
        expect(await refusalOf(cp, gateway.token)).toEqual([401, 'GATEWAY_TOKEN_ROTATED']);
        // the poll answered from memory in front of the routes refuses it too
        expect(await refusalOf(cp, gateway.token, { 'if-none-match': etag })).toEqual([401, 'GATEWAY_TOKEN_ROTATED']);
        expect((await poll(cp, fresh)).status).toBe(200);
      }

      const [record] = (await a.request('GET', `/v1/workspaces/${ws}/audit?type=gateway.token_rotated`)).body.items;
      expect(record).toMatchObject({
        actor: expect.stringMatching(/^token:/),
        data: {
          gateway_id: gateway.id,
          prefix: fresh.slice(0, 11),
          previous_prefix: gateway.token.slice(0, 11),
          previous_valid_until: rotated.body.previous_token_valid_until,
          expires_at: null,
          grace_seconds: 300,
          ended_earlier_grace: false,
        },
      });
      expect(JSON.stringify(record)).not.toContain(fresh);
    });

    it('with no grace, the other replica refuses the old token at once, through the bus, not after its cache expires', async () => {
      const gateway = await aGateway(a, a.ownerToken, ws);
      expect((await poll(b, gateway.token)).status).toBe(200);
      const rotated = await rotate(gateway.id, { grace_seconds: 0 });
      expect(rotated.body.previous_token_valid_until).toBeNull();
      expect(await refusalOf(a, gateway.token)).toEqual([401, 'TOKEN_INVALID']);
      // under the credentials cache's own 10 s: only the bus can bring the rotation in time
      await eventually('the rotation on the other replica', async () => (await poll(b, gateway.token)).status === 401, {
        timeoutMs: 5_000,
      });
      expect((await poll(b, rotated.body.token)).status).toBe(200);
    });

    it('gives the new token an expiry when asked, enforced on every replica; a second rotation ends the first grace', async () => {
      const gateway = await aGateway(a, a.ownerToken, ws);
      const first = await rotate(gateway.id, { grace_seconds: 3600, expires_in_seconds: 600 });
      expect(first.status, first.text).toBe(201);
      expect(Date.parse(first.body.token_expires_at) - Date.now()).toBeGreaterThan(590_000);
      const second = await rotate(gateway.id, { grace_seconds: 3600 });
      expect(second.status, second.text).toBe(201);
      // the grace of the token it replaces never outlasts that token's own expiry
      expect(second.body.previous_token_valid_until).toBe(first.body.token_expires_at);
      expect(second.body.token_expires_at).toBeNull();
      const [record] = (await a.request('GET', `/v1/workspaces/${ws}/audit?type=gateway.token_rotated`)).body.items;
      expect(record.data).toMatchObject({ gateway_id: gateway.id, ended_earlier_grace: true });

      for (const cp of [a, b]) {
        // the enrolment token's grace ended with the second rotation
        expect(await refusalOf(cp, gateway.token)).toEqual([401, 'TOKEN_INVALID']);
        expect((await poll(cp, first.body.token)).status).toBe(200);
        expect((await poll(cp, second.body.token)).status).toBe(200);
      }

      const expiring = await aGateway(a, a.ownerToken, ws);
      const rotated = await rotate(expiring.id, { grace_seconds: 0, expires_in_seconds: 600 });
      for (const cp of [a, b]) expect((await poll(cp, rotated.body.token)).status).toBe(200);
      for (const cp of [a, b]) advanceClock(cp, 601_000);
      for (const cp of [a, b]) {
        expect(await refusalOf(cp, rotated.body.token)).toEqual([401, 'TOKEN_EXPIRED']);
        expect(await refusalOf(cp, first.body.token)).toEqual([401, 'GATEWAY_TOKEN_ROTATED']);
        expect((await poll(cp, second.body.token)).status).toBe(200);
      }
    });

    it('gives an enrolled token the lifetime its enrolment code names, enforced on every replica until a rotation replaces it', async () => {
      const code = await a.request('POST', `/v1/workspaces/${ws}/enrollment-codes`, {
        body: { token_expires_in_seconds: 600 },
      });
      expect(code.status, code.text).toBe(201);
      expect(code.body.token_expires_in_seconds).toBe(600);
      const enrolled = await a.request('POST', '/v1/gateway/enroll', {
        token: null,
        body: { enrollment_code: code.body.code, name: 'contractor-laptop' },
      });
      expect(enrolled.status, enrolled.text).toBe(201);
      // the lifetime runs from enrolment, not from when the code was made
      const expiresAt = Date.parse(enrolled.body.token_expires_at);
      expect(expiresAt - Date.now()).toBeGreaterThan(590_000);
      expect(expiresAt - Date.now()).toBeLessThanOrEqual(600_000);
      const { gateway_id: id, token } = enrolled.body as { gateway_id: string; token: string };
      const listed = (await a.request('GET', `/v1/workspaces/${ws}/gateways`)).body.items;
      expect(listed.find((g: { id: string }) => g.id === id)).toMatchObject({
        token_expires_at: enrolled.body.token_expires_at,
      });
      const [record] = (await a.request('GET', `/v1/workspaces/${ws}/audit?type=gateway.enrolled`)).body.items;
      expect(record.data).toMatchObject({ gateway_id: id, token_expires_at: enrolled.body.token_expires_at });
      // a code without one gives a token that does not expire, as before
      const lasting = await aGateway(a, a.ownerToken, ws);
      expect((await a.request('GET', `/v1/workspaces/${ws}/gateways`)).body.items).toContainEqual(
        expect.objectContaining({ id: lasting.id, token_expires_at: null }),
      );

      for (const cp of [a, b]) expect((await poll(cp, token)).status).toBe(200);
      for (const cp of [a, b]) advanceClock(cp, 601_000);
      for (const cp of [a, b]) {
        expect(await refusalOf(cp, token)).toEqual([401, 'TOKEN_EXPIRED']);
        expect((await poll(cp, lasting.token)).status).toBe(200);
      }
      // an admin rotates it: the new token lives as the rotation says
      const rotated = await rotate(id, { grace_seconds: 0 });
      expect(rotated.status, rotated.text).toBe(201);
      expect(rotated.body.token_expires_at).toBeNull();
      for (const cp of [a, b]) expect((await poll(cp, rotated.body.token)).status).toBe(200);

      for (const body of [{ token_expires_in_seconds: 59 }, { token_expires_in_seconds: 366 * 24 * 3600 + 1 }]) {
        const refused = await a.request('POST', `/v1/workspaces/${ws}/enrollment-codes`, { body });
        expect([refused.status, refused.body.code, refused.text]).toEqual([
          400,
          'VALIDATION_FAILED',
          expect.stringContaining('body.token_expires_in_seconds'),
        ]);
      }
    });

    it('is for owners and admins of the workspace; another tenant gets 404, a revoked gateway 409, and nothing changes', async () => {
      const gateway = await aGateway(a, a.ownerToken, ws);
      const member = await aToken(a, a.ownerToken, { role: 'member', workspace: ws });
      expect((await rotate(gateway.id, { grace_seconds: 0 }, { token: member.token })).status).toBe(403);
      const other = await anOrganization(a);
      const theirs = await aWorkspace(a, other.token);
      expect((await rotate(gateway.id, {}, { token: other.token })).status).toBe(404);
      const elsewhere = await rotate(gateway.id, {}, { token: other.token, workspace: theirs.slug });
      expect([elsewhere.status, elsewhere.body.code]).toEqual([404, 'GATEWAY_NOT_FOUND']);
      const neighbour = (await aWorkspace(a, a.ownerToken)).slug;
      expect((await rotate(gateway.id, {}, { workspace: neighbour })).body.code).toBe('GATEWAY_NOT_FOUND');
      for (const body of [
        { grace_seconds: -1 },
        { grace_seconds: 8 * 24 * 3600 },
        { expires_in_seconds: 5 },
        { x: 1 },
      ]) {
        const bad = await rotate(gateway.id, body);
        expect([bad.status, bad.body.code], JSON.stringify(body)).toEqual([400, 'VALIDATION_FAILED']);
      }
      // a gateway token is no admin
      expect((await rotate(gateway.id, {}, { token: gateway.token })).body.code).toBe('GATEWAY_TOKEN_NOT_ALLOWED');
      expect((await poll(a, gateway.token)).status).toBe(200);

      await a.request('DELETE', `/v1/workspaces/${ws}/gateways/${gateway.id}`);
      const revoked = await rotate(gateway.id, {});
      expect([revoked.status, revoked.body.code]).toEqual([409, 'GATEWAY_ALREADY_REVOKED']);
      expect(await refusalOf(a, gateway.token)).toEqual([401, 'GATEWAY_REVOKED']);
      const audit = (await a.request('GET', `/v1/workspaces/${ws}/audit?type=gateway.token_rotated&limit=500`)).body
        .items as { data: { gateway_id: string } }[];
      expect(audit.filter((r) => r.data.gateway_id === gateway.id)).toEqual([]);
    });
  });
});
