import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aUser } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { expectProblem, LocalIdp, sql } from './local-idp';

describe('which identity-provider tokens sign people in, and as whom', () => {
  let cp: TestControlPlane;
  const idp = new LocalIdp();
  let next = 0;
  const subject = () => `person-${++next}`;

  /**
   * The organisation's IdP as an owner sets it. An IdP with neither an
   * audience nor the opt-out can no longer be saved; it exists only as a row
   * stored before audiences were required, which the database stands in for.
   */
  async function trust(settings: {
    audience?: string;
    allowAnyAudience?: boolean;
    trustUnverifiedEmail?: boolean;
  }): Promise<void> {
    const legacy = settings.audience === undefined && !settings.allowAnyAudience;
    await idp.trustedBy(cp, {
      audience: settings.audience,
      allow_any_audience: legacy || (settings.allowAnyAudience ?? false),
      trust_unverified_email: settings.trustUnverifiedEmail ?? false,
    });
    if (legacy) await sql(cp, 'UPDATE identity_providers SET allow_any_audience = false');
  }

  it('an owner must name an audience or opt out explicitly, and the choices show when the IdP is read', async () => {
    const missing = await cp.request('PUT', '/v1/organization/identity-provider', {
      body: { issuer: idp.issuer, jwks_url: idp.jwksUrl },
    });
    expectProblem(missing, 400, 'VALIDATION_FAILED');
    expect(JSON.stringify(missing.body.errors)).toContain('allow_any_audience');
    await trust({ allowAnyAudience: true, trustUnverifiedEmail: true });
    expect((await cp.request('GET', '/v1/organization/identity-provider')).body).toMatchObject({
      audience: null,
      allow_any_audience: true,
      trust_unverified_email: true,
    });
    await trust({ audience: 'aileron' });
    expect((await cp.request('GET', '/v1/organization/identity-provider')).body).toMatchObject({
      audience: 'aileron',
      allow_any_audience: false,
      trust_unverified_email: false,
    });
  });

  beforeAll(async () => {
    await idp.start();
    cp = await startApiControlPlane();
    await trust({ audience: 'aileron' });
  });
  afterAll(async () => {
    await cp?.close();
    await idp.stop();
  });

  it('links a sign-in to a pre-added user by e-mail only when the IdP says it verified the e-mail', async () => {
    const user = await aUser(cp, cp.ownerToken, 'admin');
    for (const verified of [false, undefined, 'yes', 1]) {
      const token = idp.token({
        sub: subject(),
        email: user.email,
        ...(verified === undefined ? {} : { email_verified: verified }),
      });
      const res = await cp.request('GET', '/v1/me', { token });
      expectProblem(res, 403, 'IDP_EMAIL_NOT_VERIFIED');
    }
    const users = await cp.request('GET', '/v1/users');
    expect(users.body.users).toContainEqual(expect.objectContaining({ id: user.id, linked: false }));

    const verified = await cp.request('GET', '/v1/me', {
      token: idp.token({ sub: subject(), email: user.email, email_verified: true }),
    });
    expect(verified.status, verified.text).toBe(200);
    expect(verified.body).toMatchObject({ principal: { kind: 'user', id: user.id }, role: 'admin' });

    // the owner's explicit choice: the IdP's e-mails are trusted as they are
    await trust({ audience: 'aileron', trustUnverifiedEmail: true });
    try {
      const another = await aUser(cp, cp.ownerToken, 'auditor');
      const me = await cp.request('GET', '/v1/me', { token: idp.token({ sub: subject(), email: another.email }) });
      expect(me.status, me.text).toBe(200);
      expect(me.body.principal.id).toBe(another.id);
    } finally {
      await trust({ audience: 'aileron' });
    }
  });

  it('does not record an e-mail the IdP did not verify on a person it signs in for the first time', async () => {
    const email = `unverified-${next}@example.com`;
    const me = await cp.request('GET', '/v1/me', {
      token: idp.token({ sub: subject(), email, email_verified: false }),
    });
    expect(me.status, me.text).toBe(200);
    const users = await cp.request('GET', '/v1/users');
    expect(users.body.users).toContainEqual(expect.objectContaining({ id: me.body.principal.id, email: null }));
    // the address stays free: an admin can add the person it belongs to
    expect((await cp.request('POST', '/v1/users', { body: { email } })).status).toBe(201);
  });

  it('refuses the tokens of an identity provider with no audience, with a reason the owner can act on, unless the owner accepts any audience', async () => {
    await trust({});
    try {
      const fetchesBefore = idp.count('/jwks');
      for (const audience of ['some-other-app', null]) {
        const res = await cp.request('GET', '/v1/me', { token: idp.token({ sub: subject() }, { audience }) });
        expectProblem(res, 401, 'IDP_AUDIENCE_REQUIRED');
        expect(res.body.detail).toContain('allow_any_audience');
      }
      // refused before anything is fetched for it
      expect(idp.count('/jwks')).toBe(fetchesBefore);

      await trust({ allowAnyAudience: true });
      const accepted = await cp.request('GET', '/v1/me', {
        token: idp.token({ sub: subject() }, { audience: 'some-other-app' }),
      });
      expect(accepted.status, accepted.text).toBe(200);
    } finally {
      await trust({ audience: 'aileron' });
    }
  });
});
