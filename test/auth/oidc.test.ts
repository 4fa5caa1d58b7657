import { createHmac, createPublicKey, KeyObject } from 'node:crypto';
import { createServer, Server } from 'node:http';
import { sign } from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aToken, aUser, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { rsaKeyPair } from '../support/rsa-keys';

const ISSUER = 'https://login.example.test/';
const AUDIENCE = 'aileron';

/** A local identity provider: an RSA key the test makes, served as a JWKS. */
function identityProvider(): { key: KeyObject; kid: string; start(): Promise<string>; stop(): Promise<void> } {
  const { privateKey, publicKey } = rsaKeyPair();
  const kid = 'test-key-1';
  let server: Server;
  return {
    key: privateKey,
    kid,
    async start() {
      server = createServer((req, res) => {
        if (req.url !== '/jwks') return void res.writeHead(404).end();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' }] }));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const address = server.address();
      return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/jwks`;
    },
    stop: () => new Promise((r) => server.close(() => r())),
  };
}

describe('admin JWTs: the organisation identity provider and our own', () => {
  let cp: TestControlPlane;
  const idp = identityProvider();

  function idpToken(
    claims: Record<string, unknown>,
    options: {
      key?: KeyObject | string;
      kid?: string;
      expiresIn?: number;
      audience?: string;
      algorithm?: 'RS256' | 'HS256';
    } = {},
  ): string {
    // the IdP verified the e-mail unless a test says otherwise: only then may it link a pre-added user
    return sign({ email_verified: true, ...claims }, options.key ?? idp.key, {
      algorithm: options.algorithm ?? 'RS256',
      keyid: options.kid ?? idp.kid,
      issuer: ISSUER,
      audience: options.audience ?? AUDIENCE,
      expiresIn: options.expiresIn ?? 300,
    });
  }

  beforeAll(async () => {
    const jwksUrl = await idp.start();
    cp = await startApiControlPlane();
    const put = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: {
        issuer: ISSUER,
        jwks_url: jwksUrl,
        audience: AUDIENCE,
        claims: { role: 'groups' },
        role_mapping: { 'sec-team': 'admin', auditors: 'auditor' },
      },
    });
    expect(put.status, put.text).toBe(200);
  });
  afterAll(async () => {
    await cp?.close();
    await idp.stop();
  });

  it('signs a person in from the IdP token, mapping claims to a user and role', async () => {
    const token = idpToken({
      sub: 'alice-123',
      email: 'alice@example.com',
      name: 'Alice',
      groups: ['engineering', 'sec-team'],
    });
    const me = await cp.request('GET', '/v1/me', { token });
    expect(me.status, me.text).toBe(200);
    expect(me.body).toMatchObject({
      principal: { kind: 'user', name: 'Alice' },
      organization: { slug: 'default' },
      role: 'admin',
    });
    // admins reach every workspace
    expect(me.body.workspaces.map((w: { slug: string }) => w.slug)).toContain('default');
    const users = await cp.request('GET', '/v1/users');
    expect(users.body.users).toContainEqual(
      expect.objectContaining({ email: 'alice@example.com', role: 'admin', linked: true }),
    );
  });

  it('gives the default role when no mapped group is present, and workspace access only through membership', async () => {
    const token = idpToken({ sub: 'bob-1', email: 'bob@example.com', groups: ['engineering'] });
    const me = await cp.request('GET', '/v1/me', { token });
    expect(me.body).toMatchObject({ role: 'member', workspaces: [] });
    const ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/${me.body.principal.id}`, {
      body: { role: 'approver' },
    });
    const after = await cp.request('GET', '/v1/me', { token });
    expect(after.body.workspaces).toEqual([expect.objectContaining({ slug: ws.slug, role: 'approver' })]);
    expect((await cp.request('POST', '/v1/workspaces', { token, body: { slug: 'nope', name: 'x' } })).status).toBe(403);
  });

  it('links the first sign-in to a user an admin pre-provisioned by e-mail', async () => {
    const user = await aUser(cp, cp.ownerToken, 'auditor');
    const token = idpToken({ sub: 'carol-9', email: user.email, groups: [] });
    const me = await cp.request('GET', '/v1/me', { token });
    expect(me.body.principal.id).toBe(user.id);
    expect(me.body.role).toBe('member'); // the IdP decides roles when a role claim is configured
  });

  /** The classic forgery: an HS256 token whose HMAC key is the IdP's public key. */
  function confused(): string {
    const publicPem = createPublicKey(idp.key).export({ format: 'pem', type: 'spki' }).toString();
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const body = `${part({ alg: 'HS256', typ: 'JWT', kid: idp.kid })}.${part({ sub: 'mallory', iss: ISSUER, aud: AUDIENCE, iat: now, exp: now + 300 })}`;
    return `${body}.${createHmac('sha256', publicPem).update(body).digest('base64url')}`;
  }

  it('refuses forged, expired, mis-addressed and algorithm-confused tokens', async () => {
    const stranger = rsaKeyPair().privateKey;
    const cases: Record<string, string> = {
      'signed by another key': idpToken({ sub: 'x' }, { key: stranger }),
      'unknown key id': idpToken({ sub: 'x' }, { kid: 'other' }),
      expired: idpToken({ sub: 'x' }, { expiresIn: -10 }),
      'other audience': idpToken({ sub: 'x' }, { audience: 'someone-else' }),
      'HS256 keyed with the public key (algorithm confusion)': confused(),
      'unknown issuer': sign({ sub: 'x' }, idp.key, {
        algorithm: 'RS256',
        keyid: idp.kid,
        issuer: 'https://evil.test/',
        audience: AUDIENCE,
      }),
      'no subject': idpToken({ email: 'x@example.com' }),
    };
    for (const [label, token] of Object.entries(cases)) {
      const res = await cp.request('GET', '/v1/me', { token });
      expect(res.status, label).toBe(401);
      expect(res.body.code, label).toMatch(/^(TOKEN_INVALID|UNAUTHENTICATED)$/);
    }
  });

  it('issues its own short-lived JWT that carries the same rights and dies with the API token it came from', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const api = await aToken(cp, cp.ownerToken, { role: 'admin', workspace: ws.slug });
    const issued = await cp.request('POST', '/v1/auth/token', { token: api.token });
    expect(issued.status).toBe(201);
    expect(issued.body.token.split('.')).toHaveLength(3);
    const me = await cp.request('GET', '/v1/me', { token: issued.body.token });
    expect(me.body).toMatchObject({
      principal: { kind: 'api_token', id: api.id },
      workspaces: [{ slug: ws.slug, role: 'admin' }],
    });
    await cp.request('DELETE', `/v1/tokens/${api.id}`);
    const after = await cp.request('GET', '/v1/me', { token: issued.body.token });
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('TOKEN_REVOKED');

    const user = idpToken({ sub: 'dave', email: 'dave@example.com', groups: ['auditors'] });
    const ours = await cp.request('POST', '/v1/auth/token', { token: user });
    const viaOurs = await cp.request('GET', '/v1/me', { token: ours.body.token });
    expect(viaOurs.body).toMatchObject({ principal: { kind: 'user' }, role: 'auditor' });
  });

  it('names the IdP groups of the person, from the groups claim, and records them for credentials without claims', async () => {
    const withGroups = idpToken({ sub: 'gina-5', email: 'gina@example.com', groups: ['release-managers', 'sec-team'] });
    expect((await cp.request('GET', '/v1/me', { token: withGroups })).body.idp_groups).toEqual([
      'release-managers',
      'sec-team',
    ]);
    // Aileron's own JWT for her carries no IdP claims: the groups recorded at her sign-in apply
    const ours = await cp.request('POST', '/v1/auth/token', { token: withGroups });
    expect((await cp.request('GET', '/v1/me', { token: ours.body.token })).body.idp_groups).toEqual([
      'release-managers',
      'sec-team',
    ]);
    // a later sign-in without the group (the IdP removed her) replaces them
    const later = idpToken({
      sub: 'gina-5',
      email: 'gina@example.com',
      groups: ['sec-team'],
      iat: Math.floor(Date.now() / 1000) + 2,
    });
    expect((await cp.request('GET', '/v1/me', { token: later })).body.idp_groups).toEqual(['sec-team']);
    expect((await cp.request('GET', '/v1/me', { token: ours.body.token })).body.idp_groups).toEqual(['sec-team']);
    // an API token is nobody's sign-in
    expect((await cp.request('GET', '/v1/me')).body.idp_groups).toEqual([]);
  });

  it('takes browser sign-in settings: the client secret is write-only and needs a client; an http issuer only on loopback', async () => {
    const current = (await cp.request('GET', '/v1/organization/identity-provider')).body;
    expect(current).toMatchObject({
      client_id: null,
      client_secret_set: false,
      scopes: [],
      claims: { groups: 'groups' },
    });
    // what GET shows, PUT takes back unchanged
    const { client_secret_set: _set, updated_at: _at, ...asShown } = current;
    const roundTrip = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: Object.fromEntries(Object.entries(asShown).filter(([, v]) => v !== null)),
    });
    expect(roundTrip.status, roundTrip.text).toBe(200);
    expect(roundTrip.body.claims).toEqual(current.claims);
    const base = {
      issuer: current.issuer,
      jwks_url: current.jwks_url,
      audience: AUDIENCE,
      claims: { role: 'groups' },
      role_mapping: current.role_mapping,
    };
    const orphan = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { ...base, client_secret: 'shh-orphan-secret' },
    });
    expect(orphan.status).toBe(400);
    expect(orphan.body.errors).toEqual([expect.objectContaining({ path: 'body.client_secret' })]);
    const plainHttp = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { ...base, issuer: 'http://login.example.test/', client_id: 'aileron' },
    });
    expect(plainHttp.status).toBe(400);
    expect(plainHttp.body.errors).toEqual([
      expect.objectContaining({ path: 'body.issuer', message: expect.stringContaining('https') }),
    ]);
    const set = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { ...base, client_id: 'aileron', client_secret: 'shh-client-secret', scopes: ['email', 'groups'] },
    });
    expect(set.status, set.text).toBe(200);
    expect(set.body).toMatchObject({ client_id: 'aileron', client_secret_set: true, scopes: ['email', 'groups'] });
    // the same client at another issuer drops the secret too: it was given to the first IdP, never to be presented to another
    const moved = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { ...base, issuer: 'https://elsewhere.example.test/', client_id: 'aileron' },
    });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body).toMatchObject({
      issuer: 'https://elsewhere.example.test/',
      client_id: 'aileron',
      client_secret_set: false,
    });
    const back = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { ...base, client_id: 'aileron', client_secret: 'shh-client-secret', scopes: ['email', 'groups'] },
    });
    expect(back.body).toMatchObject({ client_secret_set: true });
    // another client drops the old client's secret rather than sending it to someone else's token endpoint
    const other = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { ...base, client_id: 'another-client' },
    });
    expect(other.body).toMatchObject({ client_id: 'another-client', client_secret_set: false });
    for (const res of [orphan, plainHttp, set, other]) expect(res.text).not.toContain('shh-');
    // back as it was, for the other tests
    expect((await cp.request('PUT', '/v1/organization/identity-provider', { body: base })).status).toBe(200);
  });

  it('validates the identity-provider settings with errors that name the field', async () => {
    const res = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { issuer: 'not a url', jwks_url: 'ftp://x', role_mapping: { a: 'boss' } },
    });
    expect(res.status).toBe(400);
    expect(res.body.errors.map((e: { path: string }) => e.path)).toEqual(
      expect.arrayContaining(['body.issuer', 'body.jwks_url', 'body.role_mapping.a']),
    );
  });
});
