import { describe, expect, it } from 'vitest';
import { mapClaims } from './claims';
import { browserSignInIssuerProblem } from './browser-session';
import { audienceRefusal, keepsClientSecret, plainHttpProblem, trustedEmail } from './identity-provider';

const mapping = {
  subjectClaim: 'sub',
  emailClaim: 'email',
  nameClaim: 'name',
  roleClaim: null,
  roleMapping: {},
  defaultRole: 'member' as const,
  groupsClaim: 'groups',
};

describe('the audience of IdP tokens', () => {
  it('is required: without one every token is refused with a reason the owner can act on, unless the owner accepts any', () => {
    expect(audienceRefusal({ audience: null, allowAnyAudience: false }, 'anything')).toMatchObject({
      code: 'IDP_AUDIENCE_REQUIRED',
    });
    expect(audienceRefusal({ audience: null, allowAnyAudience: false }, undefined)?.detail).toContain(
      'allow_any_audience',
    );
    expect(audienceRefusal({ audience: null, allowAnyAudience: true }, 'anything')).toBeNull();
  });

  it('must be among the token’s audiences when set, whatever the opt-out says', () => {
    expect(audienceRefusal({ audience: 'aileron', allowAnyAudience: false }, ['other', 'aileron'])).toBeNull();
    expect(audienceRefusal({ audience: 'aileron', allowAnyAudience: true }, 'other')).toMatchObject({
      code: 'TOKEN_INVALID',
    });
    expect(audienceRefusal({ audience: 'aileron', allowAnyAudience: false }, undefined)).toMatchObject({
      code: 'TOKEN_INVALID',
    });
  });
});

describe('the e-mail of a sign-in', () => {
  it('counts as verified only when the IdP says so with true', () => {
    expect(mapClaims({ sub: 's', email: 'a@x', email_verified: true }, mapping)?.emailVerified).toBe(true);
    expect(mapClaims({ sub: 's', email: 'a@x', email_verified: 'true' }, mapping)?.emailVerified).toBe(true);
    for (const value of [false, 'false', 1, 'yes', null, undefined])
      expect(mapClaims({ sub: 's', email: 'a@x', email_verified: value }, mapping)?.emailVerified).toBe(false);
  });

  it('links and is recorded only when verified, or when the owner trusts the IdP e-mails', () => {
    expect(trustedEmail({ email: 'a@x', emailVerified: true }, false)).toBe('a@x');
    expect(trustedEmail({ email: 'a@x', emailVerified: false }, false)).toBeNull();
    expect(trustedEmail({ email: 'a@x', emailVerified: false }, true)).toBe('a@x');
    expect(trustedEmail({ email: null, emailVerified: true }, true)).toBeNull();
  });
});

describe('where IdP documents are fetched from', () => {
  it('is https, or plain http to this machine only', () => {
    for (const ok of [
      'https://login.example.com/jwks',
      'http://127.0.0.1:8080/jwks',
      'http://localhost/jwks',
      'http://[::1]:9/jwks',
    ])
      expect(plainHttpProblem(ok), ok).toBeNull();
    for (const bad of [
      'http://login.example.com/jwks',
      'http://10.0.0.1/jwks',
      'ftp://login.example.com/',
      'not a url',
      'http://127.0.0.1.evil.example/',
    ]) {
      expect(plainHttpProblem(bad), bad).not.toBeNull();
    }
    expect(browserSignInIssuerProblem('http://login.example.com/')).toContain('https');
    expect(browserSignInIssuerProblem('http://127.0.0.1:4000/idp')).toBeNull();
  });
});

describe('a stored client secret', () => {
  it('is kept only for the same client of the same issuer', () => {
    const current = { issuer: 'https://a.example/', clientId: 'aileron' };
    expect(keepsClientSecret(current, { issuer: 'https://a.example/', clientId: 'aileron' })).toBe(true);
    expect(keepsClientSecret(current, { issuer: 'https://b.example/', clientId: 'aileron' })).toBe(false);
    expect(keepsClientSecret(current, { issuer: 'https://a.example/', clientId: 'other' })).toBe(false);
    expect(keepsClientSecret(current, { issuer: 'https://a.example/', clientId: null })).toBe(false);
    expect(keepsClientSecret(null, { issuer: 'https://a.example/', clientId: 'aileron' })).toBe(false);
  });
});
