import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aToken, aUser, aWorkspace, anOrganization, uniqueSlug } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';

// the HTTP contract, on the embedded database: every repository query it makes runs on PGlite and PostgreSQL alike in test/database/repository-parity.test.ts
describe('organisations, workspaces, members and tokens', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startApiControlPlane();
  });
  afterEach(() => resetClock(cp));
  afterAll(async () => cp?.close());

  it('GET /v1/me describes the owner token of the first organisation', async () => {
    const res = await cp.request('GET', '/v1/me');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      principal: { kind: 'api_token', name: 'owner' },
      organization: { slug: 'default' },
      role: 'owner',
      platform_operator: true,
      workspaces: [{ slug: 'default', role: 'owner' }],
    });
  });

  it('creates, lists and reads workspaces; a taken slug is a 409 with a stable code', async () => {
    const slug = uniqueSlug('ws');
    const created = await cp.request('POST', '/v1/workspaces', { body: { slug, name: 'Payments' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ slug, name: 'Payments' });

    const again = await cp.request('POST', '/v1/workspaces', { body: { slug, name: 'Other' } });
    expect(again.status).toBe(409);
    expect(again.headers.get('content-type')).toContain('application/problem+json');
    expect(again.body.code).toBe('WORKSPACE_SLUG_TAKEN');

    const list = await cp.request('GET', '/v1/workspaces');
    expect(list.body.workspaces.map((w: { slug: string }) => w.slug)).toContain(slug);

    const one = await cp.request('GET', `/v1/workspaces/${slug}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ slug, name: 'Payments', role: 'owner' });
  });

  it('rejects bad input with VALIDATION_FAILED naming each field, and malformed JSON with MALFORMED_JSON', async () => {
    const bad = await cp.request('POST', '/v1/workspaces', { body: { slug: 'Not A Slug', extra: 1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('VALIDATION_FAILED');
    const paths = bad.body.errors.map((e: { path: string }) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['body.slug', 'body.name']));

    const malformed = await cp.request('POST', '/v1/workspaces', { body: '{"slug": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('MALFORMED_JSON');

    const notJson = await cp.request('POST', '/v1/workspaces', {
      body: 'slug=x',
      headers: { 'content-type': 'text/plain' },
    });
    expect(notJson.status).toBe(415);
    expect(notJson.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it('requires a token everywhere but the public routes', async () => {
    for (const path of ['/v1/me', '/v1/workspaces', '/v1/tokens']) {
      const res = await cp.request('GET', path, { token: null });
      expect(res.status, path).toBe(401);
      expect(res.body.code).toBe('UNAUTHENTICATED');
    }
    const bogus = await cp.request('GET', '/v1/me', { token: 'ail_api_' + 'x'.repeat(43) });
    expect(bogus.status).toBe(401);
    expect(bogus.body.code).toBe('TOKEN_INVALID');
    expect((await cp.request('GET', '/healthz', { token: null })).status).toBe(200);
    expect((await cp.request('GET', '/readyz', { token: null })).body).toMatchObject({
      status: 'ok',
      database: true,
      queue: true,
    });
  });

  it('API tokens: shown once, stored as a hash, listed with metadata, revoked at once, expiring', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const made = await cp.request('POST', '/v1/tokens', { body: { name: 'ci', role: 'member', workspace: ws.slug } });
    expect(made.status).toBe(201);
    expect(made.body.token).toMatch(/^ail_api_[A-Za-z0-9_-]{43}$/);
    expect(made.body).toMatchObject({ name: 'ci', role: 'member', workspace: ws.slug, revoked_at: null });

    const rows = await cp.cp.database.client.apiToken.findMany({ where: { id: made.body.id } });
    expect(rows[0]!.tokenHash).not.toContain(made.body.token);
    expect(JSON.stringify(rows)).not.toContain(made.body.token.slice(12));

    const me = await cp.request('GET', '/v1/me', { token: made.body.token });
    expect(me.body).toMatchObject({ role: null, workspaces: [{ slug: ws.slug, role: 'member' }] });

    const list = await cp.request('GET', '/v1/tokens');
    const listed = list.body.tokens.find((t: { id: string }) => t.id === made.body.id);
    expect(listed).toMatchObject({ name: 'ci', prefix: made.body.token.slice(0, 12) });
    expect(listed.last_used_at).not.toBeNull();
    expect(list.text).not.toContain(made.body.token);

    expect((await cp.request('DELETE', `/v1/tokens/${made.body.id}`)).status).toBe(204);
    const after = await cp.request('GET', '/v1/me', { token: made.body.token });
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('TOKEN_REVOKED');

    const shortLived = await aToken(cp, cp.ownerToken, { role: 'auditor', expires_in_seconds: 60 });
    advanceClock(cp, 61_000);
    const expired = await cp.request('GET', '/v1/me', { token: shortLived.token });
    expect(expired.body.code).toBe('TOKEN_EXPIRED');
  });

  it('checks roles on every mutation and forbids minting a higher role', async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member' });
    const denied = await cp.request('POST', '/v1/workspaces', {
      token: member.token,
      body: { slug: uniqueSlug(), name: 'x' },
    });
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('FORBIDDEN');

    const admin = await aToken(cp, cp.ownerToken, { role: 'admin' });
    const escalate = await cp.request('POST', '/v1/tokens', { token: admin.token, body: { name: 'x', role: 'owner' } });
    expect(escalate.status).toBe(403);
    expect(escalate.body.code).toBe('ROLE_ESCALATION');

    const auditor = await aToken(cp, cp.ownerToken, { role: 'auditor' });
    expect((await cp.request('GET', '/v1/tokens', { token: auditor.token })).status).toBe(200);
    expect((await cp.request('DELETE', `/v1/tokens/${member.id}`, { token: auditor.token })).status).toBe(403);

    const notOperator = await cp.request('POST', '/v1/organizations', {
      token: admin.token,
      body: { slug: uniqueSlug(), name: 'x' },
    });
    expect(notOperator.status).toBe(403);
    expect(notOperator.body.code).toBe('PLATFORM_OPERATOR_REQUIRED');
  });

  it('a workspace-restricted token sees only its workspace', async () => {
    const a = await aWorkspace(cp, cp.ownerToken);
    const b = await aWorkspace(cp, cp.ownerToken);
    const restricted = await aToken(cp, cp.ownerToken, { role: 'admin', workspace: a.slug });
    expect((await cp.request('GET', `/v1/workspaces/${a.slug}`, { token: restricted.token })).status).toBe(200);
    const other = await cp.request('GET', `/v1/workspaces/${b.slug}`, { token: restricted.token });
    expect(other.status).toBe(404);
    expect(other.body.code).toBe('WORKSPACE_NOT_FOUND');
    const list = await cp.request('GET', '/v1/workspaces', { token: restricted.token });
    expect(list.body.workspaces.map((w: { slug: string }) => w.slug)).toEqual([a.slug]);
    // it cannot mint an organisation-wide token either
    const wide = await cp.request('POST', '/v1/tokens', {
      token: restricted.token,
      body: { name: 'x', role: 'member' },
    });
    expect(wide.status).toBe(403);
  });

  it('organisations: a platform operator creates one and gets its first owner token once', async () => {
    const org = await anOrganization(cp);
    const me = await cp.request('GET', '/v1/me', { token: org.token });
    expect(me.body).toMatchObject({
      organization: { slug: org.slug },
      role: 'owner',
      platform_operator: false,
      workspaces: [],
    });
    const dup = await cp.request('POST', '/v1/organizations', { body: { slug: org.slug, name: 'x' } });
    expect(dup.body.code).toBe('ORGANIZATION_SLUG_TAKEN');
  });

  it('members: users are added to workspaces with roles, which then apply', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const user = await aUser(cp, cp.ownerToken, 'member');
    const put = await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/${user.id}`, { body: { role: 'approver' } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ user_id: user.id, email: user.email, role: 'approver' });
    const members = await cp.request('GET', `/v1/workspaces/${ws.slug}/members`);
    expect(members.body.members).toEqual([expect.objectContaining({ user_id: user.id, role: 'approver' })]);
    expect((await cp.request('DELETE', `/v1/workspaces/${ws.slug}/members/${user.id}`)).status).toBe(204);
    expect((await cp.request('DELETE', `/v1/workspaces/${ws.slug}/members/${user.id}`)).body.code).toBe(
      'MEMBER_NOT_FOUND',
    );
    const missing = await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/00000000-0000-4000-8000-000000000000`, {
      body: { role: 'member' },
    });
    expect(missing.body.code).toBe('USER_NOT_FOUND');
  });

  it('nobody changes a grant above their own: an admin neither demotes nor removes an owner membership, nor revokes an owner token', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const boss = await aUser(cp, cp.ownerToken, 'member');
    expect(
      (await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/${boss.id}`, { body: { role: 'owner' } })).status,
    ).toBe(200);
    const admins = [
      await aToken(cp, cp.ownerToken, { role: 'admin', workspace: ws.slug }),
      await aToken(cp, cp.ownerToken, { role: 'admin' }),
    ];
    const ownerToken = await aToken(cp, cp.ownerToken, { role: 'owner' });
    for (const admin of admins) {
      for (const res of [
        await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/${boss.id}`, {
          token: admin.token,
          body: { role: 'member' },
        }),
        await cp.request('DELETE', `/v1/workspaces/${ws.slug}/members/${boss.id}`, { token: admin.token }),
      ]) {
        expect(res.status, res.text).toBe(403);
        expect(res.body.code).toBe('ROLE_ESCALATION');
      }
    }
    const revoke = await cp.request('DELETE', `/v1/tokens/${ownerToken.id}`, { token: admins[1]!.token });
    expect(revoke.status, revoke.text).toBe(403);
    expect(revoke.body.code).toBe('ROLE_ESCALATION');
    // nothing changed: the owner keeps the membership, the owner token still works
    const members = await cp.request('GET', `/v1/workspaces/${ws.slug}/members`);
    expect(members.body.members).toEqual([expect.objectContaining({ user_id: boss.id, role: 'owner' })]);
    expect((await cp.request('GET', '/v1/me', { token: ownerToken.token })).status).toBe(200);
    // within their own grant they still act, and an owner may do all of it
    const peer = await aUser(cp, cp.ownerToken, 'member');
    expect(
      (
        await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/${peer.id}`, {
          token: admins[0]!.token,
          body: { role: 'admin' },
        })
      ).status,
    ).toBe(200);
    expect(
      (await cp.request('DELETE', `/v1/workspaces/${ws.slug}/members/${peer.id}`, { token: admins[0]!.token })).status,
    ).toBe(204);
    const memberToken = await aToken(cp, cp.ownerToken, { role: 'member' });
    expect((await cp.request('DELETE', `/v1/tokens/${memberToken.id}`, { token: admins[1]!.token })).status).toBe(204);
    expect(
      (await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/${boss.id}`, { body: { role: 'member' } })).status,
    ).toBe(200);
    expect((await cp.request('DELETE', `/v1/tokens/${ownerToken.id}`)).status).toBe(204);
  });

  it('records each change in the outbox in the same transaction', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const rows = await cp.cp.database.client.outboxMessage.findMany({
      where: { topic: 'workspace.created', workspaceId: ws.id },
    });
    expect(rows).toHaveLength(1);
    expect(rows[0]!.payload).toMatchObject({ workspace: ws.slug });
  });
});
