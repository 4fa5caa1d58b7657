import { createHash, KeyObject, randomBytes } from 'node:crypto';
import { createServer, IncomingMessage, Server } from 'node:http';
import { sign } from 'jsonwebtoken';
import { Browser } from 'playwright-core';
import { launchChromium } from '../support/chromium';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, aUser, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';
import { rsaKeyPair } from '../support/rsa-keys';

/** Who the local IdP signs in next: it consents on their behalf at once. */
interface IdpUser {
  sub: string;
  email: string;
  name: string;
  groups: string[];
}

/** Ways the local IdP can misbehave, to see the control plane refuse the result. */
interface Misbehaviour {
  /** an ID token naming another sign-in's nonce */
  nonce?: string;
  /** an ID token that expired this many seconds ago */
  expiredSecondsAgo?: number;
  /** an ID token signed by a key that is not in the JWKS (under the JWKS key's id) */
  signWith?: KeyObject;
}

const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');

/**
 * A local OpenID Connect provider on node:http: discovery, an authorization
 * endpoint that consents for the configured user and redirects back with a
 * code, a token endpoint that checks the client secret and the PKCE verifier
 * and issues an RS256 ID token with the nonce and the user's groups, and its JWKS.
 */
class LocalIdp {
  readonly clientId = 'aileron-review-page';
  readonly clientSecret = `idp-secret-${randomBytes(12).toString('hex')}`;
  private readonly key: KeyObject;
  private readonly jwk: Record<string, unknown>;
  private readonly kid = 'review-idp-key';
  private readonly codes = new Map<
    string,
    { challenge: string; nonce: string; redirectUri: string; user: IdpUser; used: boolean }
  >();
  private server: Server | undefined;
  issuer = '';
  user: IdpUser | undefined;
  misbehave: Misbehaviour = {};
  /** why the token endpoint refused, for each refusal */
  readonly refusals: string[] = [];
  /** the PKCE verifiers the token endpoint accepted */
  readonly verified: string[] = [];

  constructor() {
    const { privateKey, publicKey } = rsaKeyPair();
    this.key = privateKey;
    this.jwk = publicKey.export({ format: 'jwk' }) as Record<string, unknown>;
  }

  get jwksUrl(): string {
    return `${this.issuer}/jwks`;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      void this.handle(req).then(
        ({ status, headers, body }) => res.writeHead(status, headers).end(body),
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.issuer = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/idp`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** An IdP JWT for API calls (a bearer token), as the organisation's other tools would get one. */
  bearerToken(user: IdpUser): string {
    return sign(
      { sub: user.sub, email: user.email, email_verified: true, name: user.name, groups: user.groups },
      this.key,
      {
        algorithm: 'RS256',
        keyid: this.kid,
        issuer: this.issuer,
        audience: 'aileron',
        expiresIn: 600,
      },
    );
  }

  private async handle(
    req: IncomingMessage,
  ): Promise<{ status: number; headers?: Record<string, string>; body?: string }> {
    const url = new URL(req.url ?? '/', this.issuer);
    const json = (status: number, value: unknown) => ({
      status,
      headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
      body: JSON.stringify(value),
    });
    switch (`${req.method} ${url.pathname}`) {
      case 'GET /idp/.well-known/openid-configuration':
        return json(200, {
          issuer: this.issuer,
          authorization_endpoint: `${this.issuer}/authorize`,
          token_endpoint: `${this.issuer}/token`,
          jwks_uri: this.jwksUrl,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['client_secret_basic'],
          scopes_supported: ['openid', 'email', 'profile'],
        });
      case 'GET /idp/jwks':
        return json(200, { keys: [{ ...this.jwk, kid: this.kid, use: 'sig', alg: 'RS256' }] });
      case 'GET /idp/authorize': {
        const q = url.searchParams;
        const redirectUri = q.get('redirect_uri') ?? '';
        if (
          q.get('client_id') !== this.clientId ||
          q.get('response_type') !== 'code' ||
          q.get('code_challenge_method') !== 'S256' ||
          !q.get('code_challenge')
        ) {
          return json(400, { error: 'invalid_request' });
        }
        if (!q.get('scope')?.split(' ').includes('openid') || !q.get('nonce') || !this.user)
          return json(400, { error: 'invalid_request' });
        const code = randomBytes(16).toString('base64url');
        this.codes.set(code, {
          challenge: q.get('code_challenge')!,
          nonce: q.get('nonce')!,
          redirectUri,
          user: this.user,
          used: false,
        });
        const back = new URL(redirectUri);
        back.searchParams.set('code', code);
        back.searchParams.set('state', q.get('state') ?? '');
        return { status: 302, headers: { location: back.href } };
      }
      case 'POST /idp/token': {
        const form = new URLSearchParams(
          await new Promise<string>((resolve) => {
            let text = '';
            req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
            req.on('end', () => resolve(text));
          }),
        );
        const refuse = (status: number, error: string, why: string) => (
          this.refusals.push(why), json(status, { error })
        );
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        const [id, secret] = basic
          ? Buffer.from(basic, 'base64').toString('utf8').split(':').map(decodeURIComponent)
          : [];
        if (id !== this.clientId || secret !== this.clientSecret)
          return refuse(401, 'invalid_client', 'client authentication');
        const grant = this.codes.get(form.get('code') ?? '');
        if (form.get('grant_type') !== 'authorization_code' || !grant || grant.used)
          return refuse(400, 'invalid_grant', 'unknown or used code');
        if (form.get('redirect_uri') !== grant.redirectUri) return refuse(400, 'invalid_grant', 'redirect_uri');
        const verifier = form.get('code_verifier') ?? '';
        if (b64url(createHash('sha256').update(verifier).digest()) !== grant.challenge)
          return refuse(400, 'invalid_grant', 'pkce');
        grant.used = true;
        this.verified.push(verifier);
        const now = Math.floor(Date.now() / 1000);
        const iat = this.misbehave.expiredSecondsAgo ? now - this.misbehave.expiredSecondsAgo - 300 : now;
        const idToken = sign(
          {
            sub: grant.user.sub,
            email: grant.user.email,
            email_verified: true,
            name: grant.user.name,
            groups: grant.user.groups,
            nonce: this.misbehave.nonce ?? grant.nonce,
            iat,
            exp: this.misbehave.expiredSecondsAgo ? now - this.misbehave.expiredSecondsAgo : now + 300,
          },
          this.misbehave.signWith ?? this.key,
          { algorithm: 'RS256', keyid: this.kid, issuer: this.issuer, audience: this.clientId },
        );
        return json(200, {
          access_token: randomBytes(16).toString('hex'),
          token_type: 'Bearer',
          expires_in: 300,
          id_token: idToken,
        });
      }
      default:
        return { status: 404 };
    }
  }
}

const GROUP = 'release-managers';
const CALL = {
  server: 'deploy',
  tool: 'release',
  arguments: { service: 'payments', version: '3.0.0' },
  session: 'sess-idp',
};

function expectRefused(res: TestResponse, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type'), res.text).toContain('application/problem+json');
  expect(res.body.code, res.text).toBe(code);
}

/**
 * The review page with the organisation's own sign-in: an approver who is in
 * the approval route only through a group their identity provider names signs
 * in through the real authorization-code flow (PKCE, state, nonce) and
 * decides with the session cookie it leaves.
 */
describe('the review page signed in through the identity provider', () => {
  let cp: TestControlPlane;
  let browser: Browser;
  const idp = new LocalIdp();
  let ws: string;
  let gateway: { id: string; token: string };
  /** in the route through the IdP group only: a plain member of the workspace */
  let rita: IdpUser & { id: string };
  /** a member of the workspace whose IdP groups are others */
  let otto: IdpUser & { id: string };
  /** every response the tests saw, to look for the client secret in */
  const seen: string[] = [];
  const pageErrors: string[] = [];

  async function request(
    method: string,
    path: string,
    options: Parameters<TestControlPlane['request']>[2] = {},
  ): Promise<TestResponse> {
    const res = await cp.request(method, path, options);
    seen.push(res.text, JSON.stringify([...res.headers]));
    return res;
  }

  /** A user the admin provisioned as a member of the workspace, as the IdP knows them. */
  async function aPerson(name: string, groups: string[]): Promise<IdpUser & { id: string }> {
    const user = await aUser(cp, cp.ownerToken, 'member');
    expect((await request('PUT', `/v1/workspaces/${ws}/members/${user.id}`, { body: { role: 'member' } })).status).toBe(
      200,
    );
    return { id: user.id, sub: `idp|${user.id}`, email: user.email, name, groups };
  }

  async function ask(
    principal = 'alice@example.com',
    session = `sess-${randomBytes(4).toString('hex')}`,
  ): Promise<{ id: string; review_url: string }> {
    const res = await request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: { ...CALL, principal, session },
    });
    expect(res.status, res.text).toBe(201);
    return res.body;
  }

  /** A fetch that stops at redirects, as a browser's first hop would. */
  async function hop(url: string, cookie?: string): Promise<Response> {
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    seen.push(await res.clone().text(), JSON.stringify([...res.headers]));
    return res;
  }

  const cookieOf = (res: Response, name: string): string | undefined =>
    res.headers
      .getSetCookie()
      .map((c) => c.split(';')[0]!)
      .find((c) => c.startsWith(`${name}=`));

  /** Starts a sign-in for the review page of `id`: the login cookie and the IdP URL it redirects to. */
  async function startSignIn(id: string): Promise<{ loginCookie: string; authorize: string }> {
    const res = await hop(
      `${cp.url}/v1/auth/oidc/login?organization=default&return_to=${encodeURIComponent(`/review/${id}`)}`,
    );
    expect(res.status).toBe(302);
    const authorize = new URL(res.headers.get('location')!);
    expect(authorize.origin + authorize.pathname).toBe(`${idp.issuer}/authorize`);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${cp.url}/v1/auth/oidc/callback`);
    return { loginCookie: cookieOf(res, 'aileron_signin')!, authorize: authorize.href };
  }

  /** The IdP consents for `user`: the callback URL it sends the browser to. */
  async function consent(authorize: string, user: IdpUser): Promise<URL> {
    idp.user = user;
    const res = await hop(authorize);
    expect(res.status).toBe(302);
    return new URL(res.headers.get('location')!);
  }

  /** The whole flow without a browser: the session cookie it ends with. */
  async function signIn(id: string, user: IdpUser): Promise<string> {
    const { loginCookie, authorize } = await startSignIn(id);
    const done = await hop((await consent(authorize, user)).href, loginCookie);
    expect(done.status, await done.text()).toBe(302);
    expect(done.headers.get('location')).toBe(`/review/${id}`);
    return cookieOf(done, 'aileron_session')!;
  }

  /** The CSRF token of this session, as the console's pages read it (no other site can). */
  async function csrfOf(session: string): Promise<string> {
    const answer = await request('GET', '/v1/auth/session', { token: null, headers: { cookie: session } });
    expect(answer.status, answer.text).toBe(200);
    return answer.body.csrf;
  }

  const decideAs = (
    id: string,
    session: string,
    csrf: string,
    decision: 'approve' | 'deny',
    headers: Record<string, string> = {},
  ) =>
    request('POST', `/review/${id}/session/decision`, {
      token: null,
      body: { decision },
      headers: { cookie: session, 'x-aileron-csrf': csrf, ...headers },
    });

  beforeAll(async () => {
    await idp.start();
    cp = await startApiControlPlane();
    // as an operator sets AILERON_PUBLIC_URL to where people reach the control plane; the test's listens on a port chosen at start
    cp.cp.config.publicUrl = cp.url;
    const put = await request('PUT', '/v1/organization/identity-provider', {
      body: {
        issuer: idp.issuer,
        jwks_url: idp.jwksUrl,
        audience: 'aileron',
        client_id: idp.clientId,
        client_secret: idp.clientSecret,
      },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({
      client_id: idp.clientId,
      client_secret_set: true,
      claims: { groups: 'groups' },
      scopes: [],
    });

    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    const policy = await request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: {
        rules: [
          {
            id: 'releases-need-approval',
            effect: 'approval',
            approval_route: 'release',
            servers: ['deploy'],
            tools: ['release'],
          },
        ],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    // the route names the group; the identity provider says who is in it
    const routes = await request('PUT', `/v1/workspaces/${ws}/approval-routes`, {
      body: { routes: { release: { approvers: [{ group: GROUP }] } }, groups: { [GROUP]: [] } },
    });
    expect(routes.status, routes.text).toBe(200);
    gateway = await aGateway(cp, cp.ownerToken, ws);
    rita = await aPerson('Rita Reviewer', ['engineering', GROUP]);
    otto = await aPerson('Otto Other', ['engineering']);

    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await cp?.close();
    await idp.stop();
  });
  afterEach(() => {
    expect(pageErrors.splice(0)).toEqual([]);
    idp.misbehave = {};
  });

  it('in Chromium: an approver in the route only through an IdP group signs in through the IdP, sees the call, approves; the gateway hears it', async () => {
    const asked = await ask();
    expect(asked.review_url).toBe(`${cp.url}/review/${asked.id}`);
    const waiting = request('GET', `/v1/approvals/${asked.id}?wait=60`, { token: gateway.token }).then((res) => ({
      res,
      at: Date.now(),
    }));

    const context = await browser.newContext();
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    idp.user = rita;
    await page.goto(asked.review_url);
    // the console's view of the request, which offers the organisation's identity provider
    const view = `${cp.url}/approvals/${asked.id}`;
    await page.waitForURL(`${view}?organization=default`);
    const button = page.getByRole('link', { name: 'Sign in with your identity provider' });
    await button.waitFor();
    expect(await page.getByLabel('Arguments').count()).toBe(0);

    const verifiedBefore = idp.verified.length;
    await button.click();
    // IdP, callback, and back to the very request, now signed in to the console
    await page.waitForURL(view);
    await expect
      .poll(() => page.getByRole('button', { name: 'Signed in as Rita Reviewer: menu' }).isVisible())
      .toBe(true);
    await expect.poll(() => page.getByLabel(/^Status: pending/).isVisible()).toBe(true);
    expect(await page.getByRole('heading', { name: 'deploy → release' }).isVisible()).toBe(true);
    expect(await page.getByLabel('Arguments').textContent()).toContain('"version": "3.0.0"');
    expect(await page.getByText('Asked by').textContent()).toContain(`alice@example.com via gateway:${gateway.id}`);
    expect(await page.getByText('Held by rule').textContent()).toContain('on route release (1 approval needed)');
    // the token endpoint saw a PKCE verifier that matched the challenge
    expect(idp.verified.length).toBe(verifiedBefore + 1);

    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'aileron_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', secure: false });
    expect(session!.value).toMatch(/^ail_ses_/);
    expect(cookies.find((c) => c.name === 'aileron_signin')).toBeUndefined();
    // the page's script cannot read the session
    expect(
      await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie),
    ).not.toContain('ail_ses_');

    const clickedAt = Date.now();
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByLabel(/^Status: approved/).isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    expect(await page.getByLabel('Decisions').textContent()).toContain(`user:${rita.id}: approve`);
    const heard = await waiting;
    expect(heard.res.status, heard.res.text).toBe(200);
    expect(heard.res.body.status).toBe('approved');
    // a hang guard, not a speed claim: the long-poll would otherwise run its full 60 s
    expect(heard.at - clickedAt).toBeLessThan(10_000);
    expect((await request('GET', `/v1/approvals/${asked.id}`)).body.decisions).toEqual([
      expect.objectContaining({ approver: `user:${rita.id}`, via: 'page' }),
    ]);
    // signed in, the review link opens the request straight away
    await page.goto(asked.review_url);
    await page.waitForURL(view);
    await context.close();
  });

  it('refuses a callback with the wrong state, a code issued to another sign-in (PKCE), a wrong nonce, an expired or forged ID token', async () => {
    const { id } = await ask();

    const first = await startSignIn(id);
    const callback = await consent(first.authorize, rita);
    const forgedState = new URL(callback);
    forgedState.searchParams.set('state', 'not-the-state-this-browser-sent');
    const wrongState = await hop(forgedState.href, first.loginCookie);
    expect(wrongState.status).toBe(400);
    expect(await wrongState.json()).toMatchObject({ code: 'SIGN_IN_STATE_MISMATCH' });
    expect(cookieOf(wrongState, 'aileron_session')).toBeUndefined();
    // the callback without the browser that started the sign-in
    const noCookie = await hop(callback.href);
    expect(await noCookie.json()).toMatchObject({ status: 400, code: 'SIGN_IN_EXPIRED' });

    // code injection: the code of sign-in A, with sign-in B's state and cookie; B's verifier does not match A's challenge
    const a = await startSignIn(id);
    const b = await startSignIn(id);
    const codeOfA = (await consent(a.authorize, rita)).searchParams.get('code')!;
    const stateOfB = new URL(b.authorize).searchParams.get('state')!;
    const injected = await hop(`${cp.url}/v1/auth/oidc/callback?code=${codeOfA}&state=${stateOfB}`, b.loginCookie);
    expect(injected.status).toBe(401);
    expect(await injected.json()).toMatchObject({
      code: 'SIGN_IN_CODE_REJECTED',
      detail: expect.stringContaining('invalid_grant'),
    });
    expect(idp.refusals.at(-1)).toBe('pkce');

    idp.misbehave = { nonce: 'a-nonce-from-another-sign-in' };
    const c = await startSignIn(id);
    const wrongNonce = await hop((await consent(c.authorize, rita)).href, c.loginCookie);
    expect(wrongNonce.status).toBe(401);
    expect(await wrongNonce.json()).toMatchObject({ code: 'SIGN_IN_NONCE_MISMATCH' });

    idp.misbehave = { expiredSecondsAgo: 120 };
    const d = await startSignIn(id);
    const expired = await hop((await consent(d.authorize, rita)).href, d.loginCookie);
    expect(expired.status).toBe(401);
    expect(await expired.json()).toMatchObject({ code: 'SIGN_IN_ID_TOKEN_INVALID' });

    idp.misbehave = { signWith: rsaKeyPair().privateKey };
    const e = await startSignIn(id);
    const forged = await hop((await consent(e.authorize, rita)).href, e.loginCookie);
    expect(forged.status).toBe(401);
    expect(await forged.json()).toMatchObject({ code: 'SIGN_IN_ID_TOKEN_INVALID' });

    for (const refused of [wrongState, noCookie, injected, wrongNonce, expired, forged]) {
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
      expect(cookieOf(refused, 'aileron_session')).toBeUndefined();
    }
    // nothing was decided along the way
    expect((await request('GET', `/v1/approvals/${id}`)).body.status).toBe('pending');
  });

  it('refuses a sign-in that would return anywhere but a review page, and an organisation without browser sign-in', async () => {
    const { id } = await ask();
    for (const returnTo of [
      'https://evil.example/review/x',
      '//evil.example/review/' + id,
      '/v1/tokens',
      `/review/${id}/../../v1/me`,
    ]) {
      const res = await hop(
        `${cp.url}/v1/auth/oidc/login?organization=default&return_to=${encodeURIComponent(returnTo)}`,
      );
      expect(res.status, returnTo).toBe(400);
      expect(await res.json(), returnTo).toMatchObject({ code: 'VALIDATION_FAILED' });
    }
    const unknown = await hop(
      `${cp.url}/v1/auth/oidc/login?organization=no-such-org&return_to=${encodeURIComponent(`/review/${id}`)}`,
    );
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'SIGN_IN_NOT_CONFIGURED' });
  });

  it('an IdP user whose groups do not include the route group is not an approver; the requester signed in cannot approve their own request', async () => {
    const asked = await ask();
    const ottoSession = await signIn(asked.id, otto);
    const view = await request('GET', `/review/${asked.id}/session`, { token: null, headers: { cookie: ottoSession } });
    expect(view.status, view.text).toBe(200);
    expect(view.body).toMatchObject({ id: asked.id, status: 'pending' });
    expectRefused(await decideAs(asked.id, ottoSession, await csrfOf(ottoSession), 'approve'), 403, 'NOT_AN_APPROVER');

    // the developer the call runs for is in the group too, and signs in through the IdP
    const dev = await aPerson('Dev Eloper', [GROUP]);
    const own = await ask(dev.email);
    const devSession = await signIn(own.id, dev);
    expectRefused(
      await decideAs(own.id, devSession, await csrfOf(devSession), 'approve'),
      403,
      'SELF_APPROVAL_FORBIDDEN',
    );
    for (const id of [asked.id, own.id])
      expect((await request('GET', `/v1/approvals/${id}`)).body.status).toBe('pending');
  });

  it('refuses forged, tampered and expired session cookies, and changes without the page token or from another origin', async () => {
    const { id } = await ask();
    const forged = `aileron_session=ail_ses_${randomBytes(32).toString('base64url')}`;
    expectRefused(
      await request('GET', `/review/${id}/session`, { token: null, headers: { cookie: forged } }),
      401,
      'SESSION_INVALID',
    );
    expectRefused(await decideAs(id, forged, 'x', 'approve'), 401, 'SESSION_INVALID');
    expectRefused(await request('GET', `/review/${id}/session`, { token: null }), 401, 'SESSION_REQUIRED');

    const session = await signIn(id, rita);
    const csrf = await csrfOf(session);
    const tampered = session.slice(0, -1) + (session.endsWith('A') ? 'B' : 'A');
    expectRefused(
      await request('GET', `/review/${id}/session`, { token: null, headers: { cookie: tampered } }),
      401,
      'SESSION_INVALID',
    );
    // the API takes the session (the web console's) only with its CSRF token: the cookie alone changes nothing
    expectRefused(
      await request('POST', `/v1/approvals/${id}/approve`, { token: null, body: {}, headers: { cookie: session } }),
      403,
      'CSRF_TOKEN_INVALID',
    );

    // CSRF: another site can make the browser send the cookie, not the page's token
    expectRefused(
      await request('POST', `/review/${id}/session/decision`, {
        token: null,
        body: { decision: 'approve' },
        headers: { cookie: session },
      }),
      403,
      'CSRF_TOKEN_INVALID',
    );
    const otherSession = await signIn(id, otto);
    expectRefused(await decideAs(id, session, await csrfOf(otherSession), 'approve'), 403, 'CSRF_TOKEN_INVALID');
    expectRefused(
      await decideAs(id, session, csrf, 'approve', { origin: 'https://evil.example' }),
      403,
      'CSRF_ORIGIN_MISMATCH',
    );
    expect((await request('GET', `/v1/approvals/${id}`)).body.status).toBe('pending');

    // an hour later (the session's lifetime), the same cookie is refused
    const hash = createHash('sha256').update(session.slice('aileron_session='.length)).digest('hex');
    await cp.cp.database.client.$executeRawUnsafe(
      `UPDATE login_sessions SET expires_at = now() - interval '1 second' WHERE token_hash = $1`,
      hash,
    );
    expectRefused(
      await request('GET', `/review/${id}/session`, { token: null, headers: { cookie: session } }),
      401,
      'SESSION_EXPIRED',
    );
    expectRefused(await decideAs(id, session, csrf, 'approve'), 401, 'SESSION_EXPIRED');
    // and the review link offers the sign-in again instead of a dead session
    expect((await hop(`${cp.url}/review/${id}`, session)).headers.get('location')).toBe(
      `/approvals/${id}?organization=default`,
    );
    expect((await request('GET', `/v1/approvals/${id}`)).body.status).toBe('pending');
  });

  it('groups recorded at the last sign-in count for REST decisions; an IdP JWT bearer token brings its own', async () => {
    // Rita's REST credential: Aileron's own JWT for her user, which carries no IdP claims
    const exchanged = await request('POST', '/v1/auth/token', { token: idp.bearerToken(rita) });
    expect(exchanged.status, exchanged.text).toBe(201);
    const ritaJwt = exchanged.body.token as string;
    const first = await ask();
    await signIn(first.id, rita);
    expect((await request('POST', `/v1/approvals/${first.id}/approve`, { token: ritaJwt, body: {} })).body.status).toBe(
      'approved',
    );

    // removed from the group at the IdP: her next sign-in records it, and the same JWT no longer decides
    const second = await ask();
    await signIn(second.id, { ...rita, groups: ['engineering'] });
    expectRefused(
      await request('POST', `/v1/approvals/${second.id}/approve`, { token: ritaJwt, body: {} }),
      403,
      'NOT_AN_APPROVER',
    );

    // an IdP JWT names the groups itself: Otto, never signed in with them, decides with one that has the group
    expectRefused(
      await request('POST', `/v1/approvals/${second.id}/approve`, { token: idp.bearerToken(otto), body: {} }),
      403,
      'NOT_AN_APPROVER',
    );
    const ottoPromoted = idp.bearerToken({ ...otto, groups: [GROUP] });
    expect(
      (await request('POST', `/v1/approvals/${second.id}/approve`, { token: ottoPromoted, body: {} })).body.status,
    ).toBe('approved');
  });

  it('keeps the client secret: sealed at rest, absent from every response, kept across a GET-edit-PUT of the settings', async () => {
    const current = await request('GET', '/v1/organization/identity-provider');
    expect(current.body).toMatchObject({ client_id: idp.clientId, client_secret_set: true });
    expect(current.body).not.toHaveProperty('client_secret');
    // an admin edits the settings they read (which never include the secret) and puts them back
    const edited = {
      issuer: current.body.issuer,
      jwks_url: current.body.jwks_url,
      audience: current.body.audience,
      client_id: current.body.client_id,
      scopes: ['email'],
    };
    const again = await request('PUT', '/v1/organization/identity-provider', { body: edited });
    expect(again.status, again.text).toBe(200);
    expect(again.body).toMatchObject({ client_secret_set: true, scopes: ['email'] });
    // the kept secret still authenticates the client at the token endpoint
    const { id } = await ask();
    await signIn(id, rita);

    const [row] = await cp.cp.database.client.$queryRawUnsafe<{ sealed: string }[]>(
      'SELECT client_secret_sealed AS sealed FROM identity_providers',
    );
    expect(row!.sealed).toMatch(/^rk-[0-9a-f]{16}\./);
    expect(row!.sealed).not.toContain(idp.clientSecret);
    seen.push((await request('GET', '/v1/openapi.json', { token: null })).text);
    expect(seen.length).toBeGreaterThan(40);
    for (const text of seen) expect(text).not.toContain(idp.clientSecret);
  });
});
