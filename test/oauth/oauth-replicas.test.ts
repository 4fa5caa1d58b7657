import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newPkcePair } from '../../libs/oauth/src';
import { browserSignIn, LocalIdp } from '../auth/local-idp';
import { aReplicaOf, startApiControlPlane, TestControlPlane, withOwnerToken } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { ClientSite, initializeWith } from '../support/mcp-oauth-client';

/** A browser's cookies, by name; every request of the test's browser carries them all. */
class CookieJar {
  private readonly cookies = new Map<string, string>();

  take(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      const value = pair!.slice(at + 1);
      if (value === '' || /Max-Age=0|expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(pair!.slice(0, at));
      else this.cookies.set(pair!.slice(0, at), value);
    }
  }

  get header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

/**
 * Several replicas behind one public URL are one authorization server: a
 * request begun on one is answered on another (the provider's records and
 * cookie keys are shared, nothing is in a replica's memory), a token issued by
 * one works on every one, and a client disconnected on one stops working on
 * the others at once.
 */
describe('OAuth across control-plane replicas', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  let idp: LocalIdp;
  let site: ClientSite;

  beforeAll(async () => {
    const env = { AILERON_OAUTH_HTTP_CLIENT_IDS: 'true', UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' };
    a = await startApiControlPlane(env);
    b = withOwnerToken(await aReplicaOf(a, env), a.ownerToken);
    // one public URL for the installation, as a load balancer gives it
    for (const cp of [a, b]) cp.cp.config.publicUrl = a.url;
    idp = new LocalIdp();
    idp.person = { sub: 'replica-person', email: 'replica@example.com', email_verified: true };
    await idp.start();
    await idp.trustedBy(a, { client_id: idp.clientId, default_role: 'admin' });
    site = new ClientSite();
    await site.start();
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await idp?.stop();
    await site?.stop();
  });

  it('publishes the same signing keys and metadata from every replica', async () => {
    const [jwksA, jwksB] = await Promise.all([a, b].map((cp) => cp.request('GET', '/oauth/jwks', { token: null })));
    expect(jwksA!.status).toBe(200);
    expect(jwksA!.body.keys).toHaveLength(1);
    expect(jwksB!.body).toEqual(jwksA!.body);
    const [metaA, metaB] = await Promise.all(
      [a, b].map((cp) => cp.request('GET', '/.well-known/oauth-authorization-server', { token: null })),
    );
    expect(metaB!.body).toEqual(metaA!.body);
    expect(metaA!.body.issuer).toBe(a.url);
  });

  /** A token request of the code grant, as the client makes it. */
  function exchange(cp: TestControlPlane, clientId: string, code: string, verifier: string) {
    return cp.request('POST', '/oauth/token', {
      token: null,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        redirect_uri: site.redirectUri,
        client_id: clientId,
        resource: `${a.url}/mcp/default`,
      }).toString(),
    });
  }

  /** A sign-in asked of replica A, shown and allowed on replica B, resumed on A: the code and its verifier. */
  async function consentAcrossReplicas(clientId: string): Promise<{ code: string; verifier: string }> {
    const jar = new CookieJar();
    const signedIn = await browserSignIn(a);
    expect(signedIn.status, signedIn.text).toBe(302);
    jar.take(new Response(null, { headers: signedIn.headers }));
    const pkce = newPkcePair();
    const go = async (url: string, init: RequestInit = {}) => {
      const response = await fetch(url, {
        ...init,
        redirect: 'manual',
        headers: { ...(init.headers as Record<string, string>), cookie: jar.header },
      });
      jar.take(response);
      return response;
    };
    const asked = await go(
      `${a.url}/oauth/auth?${new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: site.redirectUri,
        code_challenge: pkce.challenge,
        code_challenge_method: 'S256',
        scope: 'mcp',
        resource: `${a.url}/mcp/default`,
      })}`,
    );
    expect(asked.status).toBe(303);
    const interaction = new URL(asked.headers.get('location')!, a.url).pathname;
    const page = await go(`${b.url}${interaction}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Replica client');
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)![1]!;
    const allowed = await go(`${b.url}${interaction}/confirm`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, decision: 'allow' }).toString(),
    });
    expect(allowed.status, await allowed.text()).toBe(303);
    // the public URL is A's: the browser comes back to A
    const resumed = await go(new URL(allowed.headers.get('location')!, a.url).href);
    expect(resumed.status).toBe(303);
    const code = new URL(resumed.headers.get('location')!).searchParams.get('code');
    expect(code).toBeTruthy();
    return { code: code!, verifier: pkce.verifier };
  }

  it('answers a sign-in begun on one replica on the other, and honours its token and its revocation everywhere', async () => {
    const clientId = site.goodDocument('/replica-client.json', 'Replica client');
    const { code, verifier } = await consentAcrossReplicas(clientId);
    // the code, issued by A, exchanged on B
    const exchanged = await exchange(b, clientId, code, verifier);
    expect(exchanged.status, exchanged.text).toBe(200);
    const accessToken = exchanged.body.access_token as string;
    // both replicas resolve it, and remember it
    for (const cp of [a, b]) expect((await initializeWith(cp, accessToken)).status).toBe(200);

    const listed = await b.request('GET', '/v1/workspaces/default/oauth/clients?limit=200');
    const connection = listed.body.items.find((c: { client_id: string }) => c.client_id === clientId);
    expect((await b.request('DELETE', `/v1/workspaces/default/oauth/clients/${connection.id}`)).status).toBe(200);
    // A had it cached: the revocation on B reached it before B answered
    const refused = await initializeWith(a, accessToken);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('ends everything of a grant whose code comes a second time, on every replica', async () => {
    const clientId = site.goodDocument('/replica-client-2.json', 'Replica client');
    const { code, verifier } = await consentAcrossReplicas(clientId);
    const first = await exchange(a, clientId, code, verifier);
    expect(first.status, first.text).toBe(200);
    const accessToken = first.body.access_token as string;
    for (const cp of [a, b]) expect((await initializeWith(cp, accessToken)).status).toBe(200);
    // a copy of the code, replayed on the other replica: refused, and the first exchange's tokens with it
    const replayed = await exchange(b, clientId, code, verifier);
    expect(replayed.status).toBe(400);
    expect(replayed.body.error).toBe('invalid_grant');
    for (const cp of [a, b]) expect((await initializeWith(cp, accessToken)).status).toBe(401);
    const audit = await eventually('the disconnection record', async () => {
      const found = await a.request('GET', '/v1/workspaces/default/audit?type=oauth.client_disconnected');
      return found.body.items.find((r: { data: { client_id: string } }) => r.data.client_id === clientId);
    });
    expect(audit.data.reason).toBe('code_reused');
  });
});
