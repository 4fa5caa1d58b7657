import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { TestControlPlane } from './control-plane';

/** Small builders for test data, made through the public API. */
export function uniqueSlug(prefix = 't'): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export async function anOrganization(
  cp: TestControlPlane,
  slug = uniqueSlug('org'),
): Promise<{ slug: string; token: string; id: string }> {
  const res = await cp.request('POST', '/v1/organizations', { body: { slug, name: `Org ${slug}` } });
  expect(res.status, res.text).toBe(201);
  return { slug, token: res.body.owner_token.token, id: res.body.organization.id };
}

export async function aWorkspace(
  cp: TestControlPlane,
  token: string,
  slug = uniqueSlug('ws'),
): Promise<{ slug: string; id: string }> {
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

export async function aUser(
  cp: TestControlPlane,
  token: string,
  role = 'member',
): Promise<{ id: string; email: string }> {
  const email = `${uniqueSlug('user')}@example.com`;
  const res = await cp.request('POST', '/v1/users', { token, body: { email, role } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, email };
}

export async function aCatalogServer(
  cp: TestControlPlane,
  token: string,
  overrides: Record<string, unknown> = {},
): Promise<{ name: string; version: string }> {
  const body = {
    name: uniqueSlug('srv'),
    version: '1.0.0',
    mode: 'remote',
    transport: 'stdio',
    command: 'npx',
    args: ['-y', '@modelcontextprotocol/server-memory'],
    ...overrides,
  };
  const res = await cp.request('POST', '/v1/catalog/servers', { token, body });
  expect(res.status, res.text).toBe(201);
  return { name: body.name as string, version: body.version as string };
}

/** An enrolled gateway of a workspace: its id, name and token. */
export async function aGateway(
  cp: TestControlPlane,
  token: string,
  workspace: string,
  options: { name?: string; groups?: string[] } = {},
): Promise<{ id: string; name: string; token: string }> {
  const code = await cp.request('POST', `/v1/workspaces/${workspace}/enrollment-codes`, {
    token,
    body: { groups: options.groups ?? [] },
  });
  expect(code.status, code.text).toBe(201);
  const name = options.name ?? uniqueSlug('gw');
  const enrolled = await cp.request('POST', '/v1/gateway/enroll', {
    token: null,
    body: { enrollment_code: code.body.code, name },
  });
  expect(enrolled.status, enrolled.text).toBe(201);
  return { id: enrolled.body.gateway_id, name, token: enrolled.body.token };
}
