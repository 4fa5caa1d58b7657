import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';
import { browserSignIn, expectProblem, LocalIdp } from './local-idp';

function expectJwksUnavailable(res: TestResponse): void {
  expectProblem(res, 401, 'IDP_JWKS_UNAVAILABLE');
}

describe("fetching an identity provider's JWKS (embedded mode: loopback allowed)", () => {
  let cp: TestControlPlane;
  const idp = new LocalIdp();
  let next = 0;
  const token = (kid?: string) => idp.token({ sub: `jwks-person-${++next}` }, kid ? { kid } : {});

  beforeAll(async () => {
    await idp.start();
    cp = await startTestControlPlane('pglite');
  });
  afterAll(async () => {
    await cp?.close();
    await idp.stop();
  });
  afterEach(() => idp.overrides.clear());

  it('fetches the key set once for a flood of tokens naming unknown key ids', async () => {
    // each case on a JWKS URL of its own: the control plane has not seen it before
    await idp.trustedBy(cp, { jwks_url: `${idp.jwksUrl}?case=flood` });
    expect((await cp.request('GET', '/v1/me', { token: token() })).status).toBe(200);
    const fetched = idp.count('/jwks');
    const answers = await Promise.all(
      Array.from({ length: 25 }, () =>
        cp.request('GET', '/v1/me', { token: token(`made-up-${randomBytes(4).toString('hex')}`) }),
      ),
    );
    for (const res of answers) {
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('TOKEN_INVALID');
    }
    expect(idp.count('/jwks') - fetched).toBeLessThanOrEqual(1);
    // the known key keeps working from the cache
    expect((await cp.request('GET', '/v1/me', { token: token() })).status).toBe(200);
  });

  it('refuses a key set larger than 1 MiB', async () => {
    await idp.trustedBy(cp, { jwks_url: `${idp.jwksUrl}?case=huge` });
    // a valid JWKS holding the real key, padded past the bound
    idp.overrides.set('/jwks', (_req, res) =>
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ ...idp.jwks(), padding: 'x'.repeat(1_200_000) })),
    );
    expectJwksUnavailable(await cp.request('GET', '/v1/me', { token: token() }));
  });

  it('gives up on an IdP that answers too slowly, even one byte at a time', async () => {
    await idp.trustedBy(cp, { jwks_url: `${idp.jwksUrl}?case=drip` });
    idp.overrides.set('/jwks', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const drip = setInterval(() => (res.destroyed ? clearInterval(drip) : res.write(' ')), 200);
    });
    expectJwksUnavailable(await cp.request('GET', '/v1/me', { token: token() }));
  });

  it('refuses plain http to anything but loopback, and addresses the SSRF rules refuse, without connecting', async () => {
    for (const url of [
      'http://idp.example.com/jwks',
      'https://169.254.169.254/latest/meta-data',
      'https://10.0.0.1/jwks',
    ]) {
      await idp.trustedBy(cp, { jwks_url: url });
      const res = await cp.request('GET', '/v1/me', { token: token() });
      expectJwksUnavailable(res);
      // why is the operator's business (the log has it), not the caller's
      expect(res.text).not.toMatch(/169\.254|10\.0\.0\.1|metadata|private/);
    }
  });
});

describe("fetching an identity provider's JWKS (server mode: loopback only where the operator allows it)", () => {
  const idp = new LocalIdp();
  const running: TestControlPlane[] = [];
  beforeAll(() => idp.start());
  afterAll(async () => {
    for (const cp of running) await cp.close();
    await idp.stop();
  });

  it('does not connect to a loopback IdP (its JWKS, its discovery document) unless UPSTREAM_ALLOW_CIDRS covers it', async () => {
    const strict = await startTestControlPlane('postgres');
    running.push(strict);
    for (const url of [idp.jwksUrl, idp.jwksUrl.replace('127.0.0.1', 'localhost')]) {
      await idp.trustedBy(strict, { jwks_url: url });
      expectJwksUnavailable(await strict.request('GET', '/v1/me', { token: idp.token({ sub: 'server-person' }) }));
    }
    strict.cp.config.publicUrl = strict.url;
    await idp.trustedBy(strict, { client_id: idp.clientId });
    const signIn = await browserSignIn(strict);
    expectProblem(signIn, 502, 'IDP_UNREACHABLE');
    // the issuer's host is the organisation's own setting; why it was refused is for the operator's log
    expect(signIn.text).not.toMatch(/loopback|refused|address/);
    expect(idp.requests).toEqual([]);

    const allowed = await startTestControlPlane('postgres', { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' });
    running.push(allowed);
    allowed.cp.config.publicUrl = allowed.url;
    await idp.trustedBy(allowed, { client_id: idp.clientId });
    const me = await allowed.request('GET', '/v1/me', { token: idp.token({ sub: 'server-person' }) });
    expect(me.status, me.text).toBe(200);
    expect(idp.count('/jwks')).toBe(1);
    const signedIn = await browserSignIn(allowed);
    expect(signedIn.status, signedIn.text).toBe(302);
    expect(signedIn.headers.get('location')).toMatch(/^\/review\//);
  });
});
