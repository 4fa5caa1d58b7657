import { useQuery } from '@tanstack/react-query';
import { api, setCsrfToken, unwrap } from '../api/client';

const KNOWN_ORGANIZATIONS = 'aileron.organizations';
const AFTER_SIGN_IN = 'aileron.after-sign-in';
/** as long as a one-time sign-in link works: a page asked for longer ago is not where the person is going now */
const AFTER_SIGN_IN_MS = 10 * 60_000;

/** The browser session (who, which organisation) and its CSRF token, which every change the console makes carries. */
export function useSession() {
  return useQuery({
    queryKey: ['session'],
    queryFn: async () => {
      const session = await unwrap(api.GET('/v1/auth/session'));
      setCsrfToken(session.csrf);
      rememberOrganization(session.organization.slug);
      return session;
    },
    retry: false,
    staleTime: 60_000,
  });
}

/** The caller's organisation, role and workspaces. */
export function useMe() {
  return useQuery({ queryKey: ['me'], queryFn: () => unwrap(api.GET('/v1/me')) });
}

/** Organisations this browser has signed in to: a person in several switches between them by signing in to the other. */
export function knownOrganizations(): string[] {
  try {
    const stored = JSON.parse(localStorage.getItem(KNOWN_ORGANIZATIONS) ?? '[]') as unknown;
    return Array.isArray(stored) ? stored.filter((s): s is string => typeof s === 'string') : [];
  } catch {
    return [];
  }
}

function rememberOrganization(slug: string): void {
  const known = knownOrganizations().filter((s) => s !== slug);
  localStorage.setItem(KNOWN_ORGANIZATIONS, JSON.stringify([slug, ...known].slice(0, 20)));
}

/** The browser sign-in through an organisation's identity provider, returning to `returnTo` (a console path). */
export function identityProviderSignIn(organization: string, returnTo: string): string {
  return `/v1/auth/oidc/login?${new URLSearchParams({ organization, return_to: returnTo })}`;
}

/** A path inside the console: never another origin (`//host`, `/\\host`), whatever a query string said. */
export function consolePath(path: string | null | undefined): string | undefined {
  return path && path.startsWith('/') && !path.startsWith('//') && !path.startsWith('/\\') ? path : undefined;
}

/**
 * Where a person who must sign in was going, for the one-time sign-in link
 * to take them there: the link is opened from the terminal, in another tab,
 * which knows nothing of this one's address (localStorage is shared by both).
 */
export function rememberWhereAfterSignIn(path: string): void {
  localStorage.setItem(AFTER_SIGN_IN, JSON.stringify({ path, at: Date.now() }));
}

/** The page to land on after a sign-in link: where the person was going, if they were lately; read once. */
export function takeWhereAfterSignIn(): string {
  let path: string | undefined;
  try {
    const stored = JSON.parse(localStorage.getItem(AFTER_SIGN_IN) ?? 'null') as { path?: unknown; at?: unknown } | null;
    if (
      stored &&
      typeof stored.path === 'string' &&
      typeof stored.at === 'number' &&
      Date.now() - stored.at < AFTER_SIGN_IN_MS
    )
      path = consolePath(stored.path);
  } catch {
    // not ours, or from an older console: the overview
  }
  localStorage.removeItem(AFTER_SIGN_IN);
  return path ?? '/overview';
}
