import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildOpenApi, HttpModule, routesDeclaredIn } from '../../libs/platform/http/src';
import { DOMAIN_MODULES } from '../../libs/domains/src';
import { SignInLinks } from '../../libs/auth/src';
import { anOrganization } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';

/**
 * The console's browser session over plain HTTP: the one-time sign-in link of
 * the embedded mode, the cookie on /v1 with the CSRF token on every change,
 * signing out; and what the server answers at / beside the API.
 */
describe('the web console session (embedded mode)', () => {
  let cp: TestControlPlane;

  beforeAll(async () => {
    cp = await startTestControlPlane('pglite');
  });
  afterAll(() => cp?.close());
  afterEach(() => resetClock(cp));

  const codeOf = (link: string): string => new URL(link).hash.replace('#code=', '');
  async function newCode(): Promise<string> {
    const res = await cp.request('POST', '/v1/auth/sign-in-links');
    expect(res.status, res.text).toBe(201);
    return codeOf(res.body.url);
  }
  async function redeem(code: string, headers: Record<string, string> = {}) {
    return cp.request('POST', '/v1/auth/sign-in-link', { token: null, body: { code }, headers });
  }
  /** A browser that followed a sign-in link: its cookie and the CSRF token the console reads. */
  async function signedIn(): Promise<{ cookie: string; csrf: string }> {
    const res = await redeem(await newCode());
    expect(res.status, res.text).toBe(204);
    const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
    const session = await cp.request('GET', '/v1/auth/session', { token: null, headers: { cookie } });
    expect(session.status, session.text).toBe(200);
    return { cookie, csrf: session.body.csrf };
  }

  it('prints a link that signs the owner in once: an HttpOnly, SameSite=Lax cookie for the console and the API', async () => {
    expect(cp.cp.signInLink).toMatch(new RegExp(`^${cp.url}/sign-in/link#code=[A-Za-z0-9_-]{43}$`));
    const first = await redeem(codeOf(cp.cp.signInLink!));
    expect(first.status, first.text).toBe(204);
    const setCookie = first.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^aileron_session=ail_ses_/);
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Lax');
    expect(setCookie).toContain('Path=/;');
    expect(setCookie).not.toContain('Secure');
    const cookie = setCookie.split(';')[0]!;
    const me = await cp.request('GET', '/v1/me', { token: null, headers: { cookie } });
    expect(me.status, me.text).toBe(200);
    expect(me.body).toMatchObject({
      principal: { kind: 'user', name: 'Owner (this machine)' },
      role: 'owner',
      organization: { slug: 'default' },
    });

    const again = await redeem(codeOf(cp.cp.signInLink!));
    expect(again.status).toBe(401);
    expect(again.body.code).toBe('SIGN_IN_LINK_INVALID');
    expect(again.headers.get('set-cookie')).toBeNull();
  });

  it('refuses a link after ten minutes, a made-up code, and a sign-in another site starts', async () => {
    const code = await newCode();
    advanceClock(cp, 10 * 60_000 + 1_000);
    const late = await redeem(code);
    expect(late.status).toBe(401);
    expect(late.body.code).toBe('SIGN_IN_LINK_EXPIRED');
    resetClock(cp);
    expect((await redeem('not-a-code')).body.code).toBe('SIGN_IN_LINK_INVALID');
    const forged = await redeem(await newCode(), { origin: 'https://evil.example' });
    expect(forged.status).toBe(403);
    expect(forged.body.code).toBe('CSRF_ORIGIN_MISMATCH');
  });

  it('refuses a change made with the cookie but without the CSRF token, and takes it with the token', async () => {
    const { cookie, csrf } = await signedIn();
    const body = { slug: 'from-the-console', name: 'From the console' };
    const without = await cp.request('POST', '/v1/workspaces', { token: null, body, headers: { cookie } });
    expect(without.status, without.text).toBe(403);
    expect(without.body.code).toBe('CSRF_TOKEN_INVALID');
    const wrong = await cp.request('POST', '/v1/workspaces', {
      token: null,
      body,
      headers: { cookie, 'x-aileron-csrf': csrf.slice(1) + 'x' },
    });
    expect(wrong.body.code).toBe('CSRF_TOKEN_INVALID');
    const elsewhere = await cp.request('POST', '/v1/workspaces', {
      token: null,
      body,
      headers: { cookie, 'x-aileron-csrf': csrf, origin: 'https://evil.example' },
    });
    expect(elsewhere.body.code).toBe('CSRF_ORIGIN_MISMATCH');
    // nothing was made by the refused ones
    expect((await cp.request('GET', '/v1/workspaces/from-the-console')).status).toBe(404);
    const made = await cp.request('POST', '/v1/workspaces', {
      token: null,
      body,
      headers: { cookie, 'x-aileron-csrf': csrf },
    });
    expect(made.status, made.text).toBe(201);
    // API tokens keep working as before, without any CSRF token
    expect((await cp.request('GET', '/v1/workspaces/from-the-console')).status).toBe(200);
  });

  it('signs out this browser, and everywhere', async () => {
    const one = await signedIn();
    const out = await cp.request('POST', '/v1/auth/sign-out', {
      token: null,
      headers: { cookie: one.cookie, 'x-aileron-csrf': one.csrf },
    });
    expect(out.status, out.text).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/^aileron_session=;.*Max-Age=0/);
    expect((await cp.request('GET', '/v1/me', { token: null, headers: { cookie: one.cookie } })).body.code).toBe(
      'SESSION_INVALID',
    );

    const [a, b] = [await signedIn(), await signedIn()];
    const csrfless = await cp.request('POST', '/v1/auth/sign-out-everywhere', {
      token: null,
      headers: { cookie: a.cookie },
    });
    expect(csrfless.body.code).toBe('CSRF_TOKEN_INVALID');
    const everywhere = await cp.request('POST', '/v1/auth/sign-out-everywhere', {
      token: null,
      headers: { cookie: a.cookie, 'x-aileron-csrf': a.csrf },
    });
    expect(everywhere.status, everywhere.text).toBe(200);
    expect(everywhere.body.sessions_ended).toBeGreaterThanOrEqual(2);
    for (const s of [a, b])
      expect((await cp.request('GET', '/v1/me', { token: null, headers: { cookie: s.cookie } })).status).toBe(401);
  });

  it("keeps another organisation's owner out of this one's workspaces, cookie or not", async () => {
    const other = await anOrganization(cp);
    const { cookie } = await signedIn();
    // the other organisation's resources are 404 to this session, as to any caller of this organisation
    const ws = await cp.request('POST', '/v1/workspaces', {
      token: other.token,
      body: { slug: 'theirs', name: 'Theirs' },
    });
    expect(ws.status).toBe(201);
    expect((await cp.request('GET', '/v1/workspaces/theirs', { token: null, headers: { cookie } })).status).toBe(404);
  });

  it('serves the console at / and its sections with a strict CSP, and leaves /v1 and /mcp 404s alone', async () => {
    const page = await fetch(`${cp.url}/workspaces/anything/policy`);
    expect(page.status).toBe(200);
    // the landing page and the organisation's pages reload too
    for (const path of ['/overview', '/overview/default', '/organization/identity-provider'])
      expect((await fetch(cp.url + path)).headers.get('content-type'), path).toContain('text/html');
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('cache-control')).toBe('no-store');
    const nonce = /style-src 'self' 'nonce-([A-Za-z0-9+/=]+)'/.exec(page.headers.get('content-security-policy')!)?.[1];
    expect(nonce).toBeDefined();
    const html = await page.text();
    const script = /<script type="module" crossorigin src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script, html).toBeDefined();
    expect(html).not.toMatch(/<script>|<style>/);
    expect(html).toContain(`<meta name="csp-nonce" content="${nonce}"`);
    // a new nonce for every answer
    expect((await fetch(`${cp.url}/`)).headers.get('content-security-policy')).not.toContain(nonce);
    const asset = await fetch(cp.url + script!, { headers: { 'accept-encoding': 'gzip' } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');

    for (const path of ['/v1/nope', '/mcp-nope', '/nope', '/assets/nope.js']) {
      const res = await fetch(cp.url + path);
      expect(res.status, path).toBe(404);
      expect(res.headers.get('content-type'), path).toContain('application/problem+json');
    }
    expect((await fetch(`${cp.url}/docs`)).headers.get('content-type')).toContain('text/html');
  });

  it('builds the same OpenAPI document from the decorators as the server serves', async () => {
    const served = await cp.request('GET', '/v1/openapi.json', { token: null });
    const built = buildOpenApi(routesDeclaredIn([HttpModule, ...DOMAIN_MODULES]), {
      title: 'Aileron control plane',
      version: 'v1',
      serverUrl: cp.cp.config.publicUrl,
    });
    expect(JSON.parse(JSON.stringify(built))).toEqual(served.body);
    expect(cp.cp.app.get(SignInLinks).available).toBe(true);
  });
});
