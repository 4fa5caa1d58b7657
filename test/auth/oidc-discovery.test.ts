import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApiControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';
import { browserSignIn, expectProblem, LocalIdp } from './local-idp';

/** The organisation's IdP with browser sign-in, as an owner sets it. */
async function trustIdp(cp: TestControlPlane, idp: LocalIdp): Promise<void> {
  // as an operator sets AILERON_PUBLIC_URL to where people reach the control plane: the IdP sends browsers back there
  cp.cp.config.publicUrl = cp.url;
  await idp.trustedBy(cp, { client_id: idp.clientId });
}

function expectUnreachable(res: TestResponse): void {
  expectProblem(res, 502, 'IDP_UNREACHABLE');
}

describe('browser sign-in: what the control plane fetches from the identity provider, and what it repeats', () => {
  let cp: TestControlPlane;
  let idp: LocalIdp;

  beforeAll(async () => {
    cp = await startApiControlPlane();
  });
  afterAll(() => cp?.close());
  // a fresh IdP (and so a fresh issuer) per test: the control plane caches what it discovered
  afterEach(() => idp?.stop());
  async function anIdp(): Promise<LocalIdp> {
    idp = new LocalIdp('/idp');
    await idp.start();
    await trustIdp(cp, idp);
    return idp;
  }

  it("does not repeat the token endpoint's error text: only the OAuth error codes the standard defines", async () => {
    await anIdp();
    const good = await browserSignIn(cp);
    expect(good.status, good.text).toBe(302);
    expect(good.headers.get('location')).toMatch(/^\/review\//);
    idp.overrides.set('/token', (req, res) => {
      req.resume();
      res.writeHead(400, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          error: 'call.helpdesk.evil.example',
          error_description: 'Your account is locked: call evil.example now',
        }),
      );
    });
    const done = await browserSignIn(cp);
    expect(done.step).toBe('callback');
    expect(done.status, done.text).toBe(401);
    expect(done.body.code).toBe('SIGN_IN_CODE_REJECTED');
    expect(done.text).not.toContain('evil');
  });

  it('refuses a discovery document larger than 1 MiB', async () => {
    await anIdp();
    idp.overrides.set('/.well-known/openid-configuration', (_req, res) => {
      const document = {
        issuer: idp.issuer,
        authorization_endpoint: `${idp.issuer}/authorize`,
        token_endpoint: `${idp.issuer}/token`,
        jwks_uri: idp.jwksUrl,
        response_types_supported: ['code'],
        padding: 'x'.repeat(1_200_000),
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document));
    });
    const login = await browserSignIn(cp);
    expect(login.step).toBe('login');
    expectUnreachable(login);
  });

  it('holds the endpoints the discovery document names to the same rules: https, no refused address', async () => {
    for (const endpoints of [
      { token_endpoint: 'https://10.1.2.3/token' },
      { jwks_uri: 'http://idp.example.com/jwks' },
    ]) {
      await anIdp();
      const discovered = JSON.parse(
        await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).text(),
      ) as Record<string, unknown>;
      idp.overrides.set('/.well-known/openid-configuration', (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...discovered, ...endpoints })),
      );
      const done = await browserSignIn(cp);
      expect(done.step).toBe('callback');
      expectUnreachable(done);
      expect(done.text).not.toMatch(/10\.1\.2\.3|idp\.example\.com|https URL|private/);
      await idp.stop();
    }
  });
});
