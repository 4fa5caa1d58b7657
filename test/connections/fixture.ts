import { expect } from 'vitest';
import type { LocalIdp } from '../auth/local-idp';
import { aUser, uniqueSlug } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { HeadlessBrowser, Step } from './browser';
import type { UpstreamAuthorizationServer } from './upstream';

/** A person of the organisation, a member of `workspace` with `role`, known to the IdP, with a bearer JWT of theirs. */
export interface Person {
  id: string;
  email: string;
  claims: Record<string, unknown>;
  token: string;
}

export async function aPerson(
  cp: TestControlPlane,
  idp: LocalIdp,
  role: string,
  workspace = 'default',
): Promise<Person> {
  const user = await aUser(cp, cp.ownerToken, role);
  const member = await cp.request('PUT', `/v1/workspaces/${workspace}/members/${user.id}`, { body: { role } });
  expect(member.status, member.text).toBe(200);
  const claims = { sub: uniqueSlug('sub'), email: user.email, email_verified: true };
  return { ...user, claims, token: idp.token(claims) };
}

/** Publishes an entry for an upstream that signs in with OAuth and assigns it to `workspace`; its name. */
export async function anOauthServer(
  cp: TestControlPlane,
  url: string,
  oauth: Record<string, unknown> = {},
  workspace = 'default',
): Promise<string> {
  const name = uniqueSlug('up');
  const published = await cp.request('POST', '/v1/catalog/servers', {
    body: {
      name,
      version: '1.0.0',
      mode: 'remote',
      url,
      auth: 'oauth',
      ...(Object.keys(oauth).length ? { oauth } : {}),
    },
  });
  expect(published.status, published.text).toBe(201);
  const assigned = await cp.request('PUT', `/v1/workspaces/${workspace}/servers/${name}`, {
    body: { version: '1.0.0' },
  });
  expect(assigned.status, assigned.text).toBe(200);
  return name;
}

/**
 * The person's browser, signed in to the console, through the connect URL of
 * `server` in `default`, signing in at the upstream as `account`, to the page
 * the callback answers.
 */
export async function connectInBrowser(
  cp: TestControlPlane,
  idp: LocalIdp,
  as: UpstreamAuthorizationServer,
  person: { claims: Record<string, unknown> },
  server: string,
  account: string,
): Promise<{ browser: HeadlessBrowser; steps: Step[] }> {
  const browser = new HeadlessBrowser();
  await browser.signIn(cp, idp, person.claims);
  as.account = account;
  const steps = await browser.open(
    `${cp.url}/oauth/connections/connect?${new URLSearchParams({ workspace: 'default', server })}`,
  );
  return { browser, steps };
}
