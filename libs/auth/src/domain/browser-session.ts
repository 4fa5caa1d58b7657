import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { hashToken } from './api-token';
import { plainHttpProblem } from './identity-provider';

/**
 * The rules of a browser session made by signing in through the organisation's
 * identity provider: what its cookies look like, where a sign-in may return
 * to, and the CSRF token that binds a page's changes to its session.
 */
export const BROWSER_SESSION_COOKIE = 'aileron_session';
/** the pending sign-in (state, nonce, PKCE verifier), sealed, between the redirect out and the callback */
export const LOGIN_COOKIE = 'aileron_signin';
export const BROWSER_SESSION_PREFIX = 'ail_ses_';
/** the review pages and the web console, which calls the API under /v1 with it (changes carry the CSRF token) */
export const BROWSER_SESSION_PATH = '/';
export const LOGIN_PATH = '/v1/auth/oidc';
export const BROWSER_SESSION_TTL_SECONDS = 3600;
export const LOGIN_TTL_SECONDS = 600;
export const CSRF_HEADER = 'x-aileron-csrf';

export function mintBrowserSessionToken(): { token: string; hash: string } {
  const token = `${BROWSER_SESSION_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { token, hash: hashToken(token) };
}

export function looksLikeBrowserSessionToken(value: string): boolean {
  return /^ail_ses_[A-Za-z0-9_-]{43}$/.test(value);
}

/**
 * Where a sign-in may send the browser back to: a review page or a page of
 * the web console of this control plane, as a path. Anything else (another
 * host, `//evil`, `/\evil`, the API) would make the callback an open redirect.
 */
export function safeReturnPath(value: string): string | null {
  const review = /^\/review\/[0-9a-fA-F-]{36}(\?[A-Za-z0-9_.~%&=-]*)?$/.test(value);
  // a console page: plain segments, none of them `..`, never the API's or the server's own paths
  const consolePage =
    /^\/(?:[a-z][a-z0-9-]*(?:\/[A-Za-z0-9_~-][A-Za-z0-9_.~-]*)*)?(\?[A-Za-z0-9_.~%&=-]*)?$/.test(value) &&
    !/^\/(v1|mcp|docs|review|assets)(\/|\?|$)/.test(value);
  if (!review && !consolePage) return null;
  const parsed = new URL(value, 'http://control-plane.invalid');
  return parsed.host === 'control-plane.invalid' ? parsed.pathname + parsed.search : null;
}

/** The CSRF token of a session: only someone holding the session cookie (and the server's key) can make it. */
export function csrfToken(key: Buffer, sessionToken: string): string {
  return createHmac('sha256', key).update('aileron-csrf\0').update(hashToken(sessionToken)).digest('base64url');
}

export function csrfMatches(key: Buffer, sessionToken: string, given: string | undefined): boolean {
  if (!given) return false;
  const expected = Buffer.from(csrfToken(key, sessionToken));
  const actual = Buffer.from(given);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

export function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    // the first one wins, as browsers send the most specific path first
    if (!cookies.has(name)) cookies.set(name, part.slice(eq + 1).trim());
  }
  return cookies;
}

export interface CookieOptions {
  path: string;
  maxAgeSeconds: number;
  secure: boolean;
}

/** HttpOnly and SameSite=Lax always: scripts never read it, and other sites' forms and fetches never carry it. */
export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  return [
    `${name}=${value}`,
    `Path=${options.path}`,
    `Max-Age=${options.maxAgeSeconds}`,
    'HttpOnly',
    'SameSite=Lax',
    ...(options.secure ? ['Secure'] : []),
  ].join('; ');
}

export function clearCookie(name: string, path: string, secure: boolean): string {
  return serializeCookie(name, '', { path, maxAgeSeconds: 0, secure });
}

/**
 * Browser sign-in sends codes and ID tokens over the issuer's endpoints: an
 * http issuer is allowed only on this machine (development and tests).
 */
export function browserSignInIssuerProblem(issuer: string): string | null {
  return plainHttpProblem(issuer) ? 'must be an https URL for browser sign-in (http only on loopback)' : null;
}
