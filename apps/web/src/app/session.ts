import { useQuery } from '@tanstack/react-query';
import { api, setCsrfToken, unwrap } from '../api/client';

const KNOWN_ORGANIZATIONS = 'aileron.organizations';

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
