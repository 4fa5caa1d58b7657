/**
 * The rules an organisation's identity provider is held to: where the control
 * plane may fetch its documents from, which tokens it may sign people in
 * with, and when its e-mail claim may link a sign-in to a pre-added user.
 */

import type { ErrorCodeWithStatus } from '@aileron/errors';

/** What an IdP JWT is checked against, besides its signature. */
export interface AudienceSettings {
  audience: string | null;
  /** the owner's explicit opt-out: tokens the IdP issued for any application are accepted */
  allowAnyAudience: boolean;
}

export interface TokenRefusal {
  code: ErrorCodeWithStatus<401>;
  detail: string;
}

export const AUDIENCE_REQUIRED: TokenRefusal = {
  code: 'IDP_AUDIENCE_REQUIRED',
  detail:
    "The organisation's identity provider names no audience, so its tokens are refused: an owner must set `audience` " +
    '(PUT /v1/organization/identity-provider) to the `aud` its tokens for Aileron carry, or set `allow_any_audience: true` ' +
    'to accept tokens the IdP issued for any application',
};

/**
 * Whether a token with this `aud` claim may sign someone in. Without an
 * audience, a token the IdP issued for any other application would do, so the
 * owner has to say so explicitly.
 */
export function audienceRefusal(settings: AudienceSettings, aud: unknown): TokenRefusal | null {
  if (!settings.audience) return settings.allowAnyAudience ? null : AUDIENCE_REQUIRED;
  const audiences = Array.isArray(aud) ? aud : [aud];
  return audiences.includes(settings.audience)
    ? null
    : { code: 'TOKEN_INVALID', detail: 'The JWT is meant for another audience' };
}

/**
 * The e-mail a sign-in may be linked and recorded by: only one the IdP says
 * it verified (`email_verified: true`), unless the owner chose to trust the
 * IdP's e-mails as they are. Anyone can put any address on an account at many
 * IdPs; linking by it would hand them the pre-added user's role.
 */
export function trustedEmail(
  identity: { email: string | null; emailVerified: boolean },
  trustUnverifiedEmail: boolean,
): string | null {
  return identity.email && (identity.emailVerified || trustUnverifiedEmail) ? identity.email : null;
}

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * The IdP's JWKS, discovery document and token endpoint decide who signs in:
 * they are read over https, plain http only from this machine (development
 * and tests; the installation's outbound policy must allow loopback too).
 */
export function plainHttpProblem(url: string): string | null {
  if (!URL.canParse(url)) return 'is not a valid URL';
  const parsed = new URL(url);
  if (parsed.protocol === 'https:') return null;
  if (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname)) return null;
  return 'must be an https URL (plain http only to a loopback address)';
}

/**
 * A stored client secret is kept when the settings are saved without one only
 * for the same client of the same IdP: a new issuer's token endpoint must
 * never receive the secret given for another.
 */
export function keepsClientSecret(
  current: { issuer: string; clientId: string | null } | null,
  next: { issuer: string; clientId: string | null },
): boolean {
  return (
    current !== null && next.clientId !== null && current.clientId === next.clientId && current.issuer === next.issuer
  );
}
