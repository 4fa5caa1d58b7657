import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { TestControlPlane } from './control-plane';

/** Small builders for test data, made through the public API. */
export function uniqueSlug(prefix = 't'): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export async function anOrganization(cp: TestControlPlane, slug = uniqueSlug('org')): Promise<{ slug: string; token: string; id: string }> {
  const res = await cp.request('POST', '/v1/organizations', { body: { slug, name: `Org ${slug}` } });
  expect(res.status, res.text).toBe(201);
  return { slug, token: res.body.owner_token.token, id: res.body.organization.id };
}

export async function aWorkspace(cp: TestControlPlane, token: string, slug = uniqueSlug('ws')): Promise<{ slug: string; id: string }> {
  const res = await cp.request('POST', '/v1/workspaces', { token, body: { slug, name: `Workspace ${slug}` } });
  expect(res.status, res.text).toBe(201);
  return { slug, id: res.body.id };
}

export async function aToken(
  cp: TestControlPlane,
  token: string,
  body: { name?: string; role: string; workspace?: string; expires_in_seconds?: number },
): Promise<{ id: string; token: string }> {
  const res = await cp.request('POST', '/v1/tokens', { token, body: { name: 'test', ...body } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, token: res.body.token };
}

export async function aUser(cp: TestControlPlane, token: string, role = 'member'): Promise<{ id: string; email: string }> {
  const email = `${uniqueSlug('user')}@example.com`;
  const res = await cp.request('POST', '/v1/users', { token, body: { email, role } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, email };
}
