import { describe, expect, it } from 'vitest';
import { checkBundle, offlineAction, SignedPolicyBundle } from '../../libs/gateway/src';
import { aCatalogServer, aGateway, anOrganization, aToken, aWorkspace, uniqueSlug } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';

// the HTTP contract, on the embedded database: every repository query it makes runs on PGlite and PostgreSQL alike in test/database/repository-parity.test.ts
describe('catalog and gateway API', () => {
  let cp: TestControlPlane;
  let ws: string;
  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
  });

  const asGateway = (token: string, path: string, headers: Record<string, string> = {}) =>
    cp.request('GET', path, { token, headers });
  const keys = async () =>
    (await cp.request('GET', '/.well-known/aileron/policy-keys', { token: null })).body.keys as {
      kid: string;
      x: string;
    }[];

  it('publishes immutable versions; a workspace keeps its pinned version when a new one appears', async () => {
    const server = await aCatalogServer(cp, cp.ownerToken, {
      env: { API_KEY: 'vault://memory/key' },
      tool_prefix: 'mem',
    });
    const again = await cp.request('POST', '/v1/catalog/servers', {
      body: { name: server.name, version: '1.0.0', mode: 'remote', transport: 'stdio', command: 'other' },
    });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('CATALOG_VERSION_EXISTS');

    expect(
      (await cp.request('PUT', `/v1/workspaces/${ws}/servers/${server.name}`, { body: { version: '1.0.0' } })).status,
    ).toBe(200);
    await aCatalogServer(cp, cp.ownerToken, { name: server.name, version: '1.1.0' });
    const entry = await cp.request('GET', `/v1/catalog/servers/${server.name}`);
    expect(entry.body).toMatchObject({
      latest_version: '1.1.0',
      versions: [{ version: '1.1.0' }, { version: '1.0.0', definition: { command: 'npx' } }],
    });
    const assigned = await cp.request('GET', `/v1/workspaces/${ws}/servers`);
    expect(assigned.body.servers).toEqual([
      expect.objectContaining({ server: server.name, version: '1.0.0', rollout: null }),
    ]);

    const missing = await cp.request('PUT', `/v1/workspaces/${ws}/servers/${server.name}`, {
      body: { version: '9.9.9' },
    });
    expect(missing.body.code).toBe('CATALOG_VERSION_NOT_FOUND');
    expect(
      (await cp.request('PUT', `/v1/workspaces/${ws}/servers/nope`, { body: { version: '1.0.0' } })).body.code,
    ).toBe('CATALOG_SERVER_NOT_FOUND');
  });

  it('takes the simple case as one stanza: a server left without mode and transport is local, stdio or Streamable HTTP by what it names', async () => {
    const name = uniqueSlug('stanza').slice(0, 30);
    const published = await cp.request('POST', '/v1/catalog/servers', {
      body: { name, version: '1.0.0', command: 'npx', args: ['-y', '@acme/github-mcp'] },
    });
    expect(published.status, published.text).toBe(201);
    const byUrl = await cp.request('POST', '/v1/catalog/servers', {
      body: { name, version: '1.1.0', url: 'https://mcp.example.test/v1' },
    });
    expect(byUrl.status, byUrl.text).toBe(201);
    const entry = await cp.request('GET', `/v1/catalog/servers/${name}`);
    expect(entry.body.versions).toEqual([
      expect.objectContaining({
        version: '1.1.0',
        definition: expect.objectContaining({ mode: 'local', transport: 'streamable_http' }),
      }),
      expect.objectContaining({
        version: '1.0.0',
        definition: expect.objectContaining({ mode: 'local', transport: 'stdio' }),
      }),
    ]);
    // naming nothing to run or reach is refused for the command it lacks
    const empty = await cp.request('POST', '/v1/catalog/servers', { body: { name, version: '1.2.0' } });
    expect(empty.status).toBe(400);
    expect(empty.body.errors.map((e: { path: string }) => e.path)).toEqual(['body.command']);
  });

  it("rejects bad catalog entries field by field; a local server's vault references only in env", async () => {
    const bad = await cp.request('POST', '/v1/catalog/servers', {
      body: {
        name: 'Bad_Name',
        version: 'one',
        mode: 'local',
        transport: 'streamable_http',
        url: 'https://mcp.example.com/mcp',
        headers: { Authorization: 'vault://a/b' },
      },
    });
    expect(bad.status).toBe(400);
    const paths = bad.body.errors.map((e: { path: string }) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['body.name', 'body.version', 'body.headers.Authorization']));
    const climbing = await cp.request('POST', '/v1/catalog/servers', {
      body: { name: uniqueSlug('srv'), version: '1.0.0', command: 'x', env: { TOKEN: 'vault://a/../b' } },
    });
    expect(climbing.status).toBe(400);
    expect(climbing.body.errors.map((e: { path: string }) => e.path)).toEqual(['body.env.TOKEN']);
    const local = await cp.request('POST', '/v1/catalog/servers', {
      body: { name: uniqueSlug('srv'), version: '1.0.0', command: 'x', env: { TOKEN: 'vault://a/b' } },
    });
    expect(local.status, local.text).toBe(201);
  });

  it("refuses loader and interpreter hooks in an entry's environment, naming the variable, never echoing its value", async () => {
    for (const mode of ['remote', 'local'] as const) {
      const bad = await cp.request('POST', '/v1/catalog/servers', {
        body: {
          name: `hooked-${mode}`,
          version: '1.0.0',
          mode,
          transport: 'stdio',
          command: 'node',
          env: {
            LD_PRELOAD: '/home/mcp/evil-value.so',
            NODE_OPTIONS: '--require /home/mcp/evil-value.js',
            GREETING: 'hello',
          },
        },
      });
      expect(bad.status, bad.text).toBe(400);
      expect(bad.body.code).toBe('VALIDATION_FAILED');
      expect(bad.body.errors).toEqual(
        expect.arrayContaining([
          { path: 'body.env.LD_PRELOAD', message: expect.stringContaining('LD_PRELOAD is not allowed') },
          { path: 'body.env.NODE_OPTIONS', message: expect.stringContaining('NODE_OPTIONS is not allowed') },
        ]),
      );
      expect(bad.body.errors.map((e: { path: string }) => e.path)).not.toContain('body.env.GREETING');
      expect(bad.text).not.toContain('evil-value');
    }
  });

  it('enrols a gateway with a one-time code; used, expired and unknown codes are refused with their own codes', async () => {
    const code = (
      await cp.request('POST', `/v1/workspaces/${ws}/enrollment-codes`, { body: { expires_in_seconds: 600 } })
    ).body.code as string;
    expect(code).toMatch(/^ail_enr_/);
    const first = await cp.request('POST', '/v1/gateway/enroll', {
      token: null,
      body: { enrollment_code: code, name: 'alice-laptop' },
    });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ workspace: ws, token: expect.stringMatching(/^ail_gw_/) });
    const reuse = await cp.request('POST', '/v1/gateway/enroll', {
      token: null,
      body: { enrollment_code: code, name: 'mallory' },
    });
    expect([reuse.status, reuse.body.code]).toEqual([401, 'ENROLLMENT_CODE_USED']);

    const late = (await cp.request('POST', `/v1/workspaces/${ws}/enrollment-codes`, { body: {} })).body.code as string;
    await cp.cp.database.client.$executeRawUnsafe(
      `UPDATE enrollment_codes SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`,
    );
    const expired = await cp.request('POST', '/v1/gateway/enroll', {
      token: null,
      body: { enrollment_code: late, name: 'late' },
    });
    expect([expired.status, expired.body.code]).toEqual([401, 'ENROLLMENT_CODE_EXPIRED']);
    const unknown = await cp.request('POST', '/v1/gateway/enroll', {
      token: null,
      body: { enrollment_code: 'ail_enr_' + 'x'.repeat(43), name: 'x' },
    });
    expect([unknown.status, unknown.body.code]).toEqual([401, 'ENROLLMENT_CODE_INVALID']);

    const listed = await cp.request('GET', `/v1/workspaces/${ws}/gateways`);
    expect(listed.body.gateways).toEqual([
      expect.objectContaining({ id: first.body.gateway_id, name: 'alice-laptop', revoked_at: null }),
    ]);
    expect(JSON.stringify(listed.body)).not.toContain(first.body.token);
  });

  it('serves the catalog with a strong ETag and 304; a change gives a new body', async () => {
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const first = await asGateway(gateway.token, '/v1/gateway/catalog');
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(first.body).toMatchObject({ workspace: ws, merge: { allow_local_servers: true } });
    const remote = first.body.servers[0];
    expect(remote).toMatchObject({
      mode: 'remote',
      transport: 'streamable_http',
      url: `${cp.cp.config.publicUrl}/mcp/${ws}/${remote.name}`,
      tool_prefix: 'mem',
    });
    // credentials stay in the control plane: no env, no vault paths, for remote servers
    expect(JSON.stringify(first.body)).not.toContain('vault://');

    const second = await asGateway(gateway.token, '/v1/gateway/catalog', { 'if-none-match': etag });
    expect(second.status).toBe(304);
    expect(second.text).toBe('');
    expect(second.headers.get('etag')).toBe(etag);
    expect(
      (await asGateway(gateway.token, '/v1/gateway/catalog', { 'if-none-match': `W/${etag}, "other"` })).status,
    ).toBe(304);

    const local = await aCatalogServer(cp, cp.ownerToken, {
      mode: 'local',
      command: 'uvx',
      args: ['mcp-server-git'],
      env: { GIT_AUTHOR: 'bot' },
      overridable: ['args', 'env'],
    });
    await cp.request('PUT', `/v1/workspaces/${ws}/servers/${local.name}`, { body: { version: '1.0.0' } });
    const third = await asGateway(gateway.token, '/v1/gateway/catalog', { 'if-none-match': etag });
    expect(third.status).toBe(200);
    expect(third.headers.get('etag')).not.toBe(etag);
    expect(third.body.servers).toContainEqual(
      expect.objectContaining({
        name: local.name,
        mode: 'local',
        command: 'uvx',
        args: ['mcp-server-git'],
        env: { GIT_AUTHOR: 'bot' },
        overridable: ['args', 'env'],
      }),
    );
  });

  it('serves a signed policy bundle that verifies offline with the published key, with 304 and a version that only grows', async () => {
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    await cp.request('PUT', '/v1/organization/gateway-settings', {
      body: { allow_local_servers: false, offline_mode: 'fail_closed', max_stale_seconds: 900 },
    });
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: { rules: [{ id: 'deny-all-writes', effect: 'deny', tools: ['write_*'] }] },
    });

    const res = await asGateway(gateway.token, '/v1/gateway/policy');
    expect(res.status).toBe(200);
    const bundle = res.body as SignedPolicyBundle;
    expect(bundle.payload).toMatchObject({
      workspace: ws,
      offline_mode: 'fail_closed',
      max_stale_seconds: 900,
      policy: { default: 'deny', on_error: 'deny' },
    });
    expect(Date.parse(bundle.payload.expires_at) - Date.parse(bundle.payload.issued_at)).toBe(900_000);
    expect(checkBundle(bundle, await keys(), new Date())).toEqual({ ok: true });
    // a bundle whose policy was edited in transit does not verify
    const tampered = structuredClone(bundle);
    tampered.payload.policy.rules = [];
    expect(checkBundle(tampered, await keys(), new Date())).toEqual({ ok: false, reason: 'BAD_SIGNATURE' });

    const etag = res.headers.get('etag')!;
    expect((await asGateway(gateway.token, '/v1/gateway/policy', { 'if-none-match': etag })).status).toBe(304);

    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { rules: [] } });
    const next = await asGateway(gateway.token, '/v1/gateway/policy', { 'if-none-match': etag });
    expect(next.status).toBe(200);
    expect(next.body.payload.version).toBeGreaterThan(bundle.payload.version);
    expect(checkBundle(bundle, await keys(), new Date(), next.body.payload)).toEqual({
      ok: false,
      reason: 'ROLLED_BACK',
    });
    expect(checkBundle(next.body, await keys(), new Date(Date.parse(next.body.payload.expires_at) + 1))).toEqual({
      ok: false,
      reason: 'EXPIRED',
    });
    const catalog = await asGateway(gateway.token, '/v1/gateway/catalog');
    expect(catalog.body.merge).toEqual({ allow_local_servers: false });
  });

  it('fails closed by default, and spells the offline mode out in the bundle: cached never enforces an expired bundle', async () => {
    const org = await anOrganization(cp);
    const orgWs = (await aWorkspace(cp, org.token)).slug;
    const settings = await cp.request('GET', '/v1/organization/gateway-settings', { token: org.token });
    expect(settings.body).toMatchObject({ offline_mode: 'fail_closed', max_stale_seconds: 3600 });
    const gateway = await aGateway(cp, org.token, orgWs);
    const first = (await asGateway(gateway.token, '/v1/gateway/policy')).body as SignedPolicyBundle;
    expect(first.payload.offline_mode).toBe('fail_closed');
    expect(first.payload.offline).toEqual({
      mode: 'fail_closed',
      valid_until: first.payload.expires_at,
      while_unreachable: 'deny',
      after_expiry: 'deny',
    });

    const saved = await cp.request('PUT', '/v1/organization/gateway-settings', {
      token: org.token,
      body: { allow_local_servers: true, offline_mode: 'cached', max_stale_seconds: 600 },
    });
    expect(saved.status, saved.text).toBe(200);
    const cached = (await asGateway(gateway.token, '/v1/gateway/policy')).body as SignedPolicyBundle;
    expect(cached.payload.offline).toEqual({
      mode: 'cached',
      valid_until: cached.payload.expires_at,
      while_unreachable: 'enforce',
      after_expiry: 'deny',
    });
    // the rule is signed with the rest: a gateway cannot be talked into reading it another way
    const loosened = structuredClone(cached);
    loosened.payload.offline.after_expiry = 'allow';
    expect(checkBundle(loosened, await keys(), new Date())).toEqual({ ok: false, reason: 'BAD_SIGNATURE' });
    expect(checkBundle(cached, await keys(), new Date())).toEqual({ ok: true });
    const expired = new Date(Date.parse(cached.payload.offline.valid_until));
    expect(checkBundle(cached, await keys(), expired)).toEqual({ ok: false, reason: 'EXPIRED' });
    expect(offlineAction(cached.payload.offline, expired, false)).toBe('deny');
    expect(offlineAction(cached.payload.offline, new Date(), false)).toBe('enforce');
  });

  it('re-signs with a rotated key; the previous key stays published', async () => {
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const before = await asGateway(gateway.token, '/v1/gateway/policy');
    const rotated = await cp.request('POST', '/v1/platform/signing-keys/rotate');
    expect(rotated.status).toBe(201);
    const after = await asGateway(gateway.token, '/v1/gateway/policy', {
      'if-none-match': before.headers.get('etag')!,
    });
    expect(after.status).toBe(200);
    expect(after.body.signature.kid).toBe(rotated.body.kid);
    const published = await keys();
    expect(published.map((k) => k.kid)).toEqual(expect.arrayContaining([rotated.body.kid, before.body.signature.kid]));
    expect(checkBundle(after.body, published, new Date())).toEqual({ ok: true });
    expect(checkBundle(before.body, published, new Date())).toEqual({ ok: true });
    const member = await aToken(cp, cp.ownerToken, { role: 'admin' });
    expect((await cp.request('POST', '/v1/platform/signing-keys/rotate', { token: member.token })).status).toBe(403);
  });

  it('rolls a new version out to a group, then named gateways, then a percentage; promote and roll back', async () => {
    const rolloutWs = (await aWorkspace(cp, cp.ownerToken)).slug;
    const server = await aCatalogServer(cp, cp.ownerToken);
    await aCatalogServer(cp, cp.ownerToken, { name: server.name, version: '2.0.0' });
    await cp.request('PUT', `/v1/workspaces/${rolloutWs}/servers/${server.name}`, { body: { version: '1.0.0' } });
    const canary = await aGateway(cp, cp.ownerToken, rolloutWs, { groups: ['canary'] });
    const named = await aGateway(cp, cp.ownerToken, rolloutWs);
    const others = await Promise.all(Array.from({ length: 6 }, () => aGateway(cp, cp.ownerToken, rolloutWs)));
    const versionOf = async (g: { token: string }) => {
      const body = (await asGateway(g.token, '/v1/gateway/catalog')).body;
      return body.servers.find((s: { name: string }) => s.name === server.name).version as string;
    };
    const rollout = (body: Record<string, unknown>) =>
      cp.request('PUT', `/v1/workspaces/${rolloutWs}/servers/${server.name}/rollout`, {
        body: { version: '2.0.0', ...body },
      });

    expect((await rollout({ groups: ['canary'] })).body.rollout).toEqual({
      version: '2.0.0',
      gateways: [],
      groups: ['canary'],
      percent: 0,
    });
    expect(await versionOf(canary)).toBe('2.0.0');
    expect(await versionOf(named)).toBe('1.0.0');
    for (const g of others) expect(await versionOf(g)).toBe('1.0.0');

    await rollout({ groups: ['canary'], gateways: [named.name] });
    expect(await versionOf(named)).toBe('2.0.0');
    for (const g of others) expect(await versionOf(g)).toBe('1.0.0');

    // moving a gateway into the canary group takes effect on its next fetch
    await cp.request('PATCH', `/v1/workspaces/${rolloutWs}/gateways/${others[0]!.id}`, {
      body: { groups: ['canary'] },
    });
    expect(await versionOf(others[0]!)).toBe('2.0.0');

    await rollout({ percent: 100 });
    for (const g of others) expect(await versionOf(g)).toBe('2.0.0');

    const rolledBack = await cp.request('DELETE', `/v1/workspaces/${rolloutWs}/servers/${server.name}/rollout`);
    expect(rolledBack.body).toMatchObject({ version: '1.0.0', rollout: null });
    expect(await versionOf(canary)).toBe('1.0.0');
    expect((await cp.request('DELETE', `/v1/workspaces/${rolloutWs}/servers/${server.name}/rollout`)).body.code).toBe(
      'NO_ROLLOUT',
    );

    await rollout({ groups: ['canary'] });
    const promoted = await cp.request('POST', `/v1/workspaces/${rolloutWs}/servers/${server.name}/rollout/promote`);
    expect(promoted.body).toMatchObject({ version: '2.0.0', rollout: null });
    for (const g of [canary, named, ...others]) expect(await versionOf(g)).toBe('2.0.0');
    expect((await rollout({})).body.code).toBe('ROLLOUT_SAME_VERSION');
  });

  it('the kill switch disables a server in every workspace at once, and a local file cannot turn it back on', async () => {
    const server = await aCatalogServer(cp, cp.ownerToken, {
      mode: 'local',
      command: 'run-me',
      overridable: ['enabled', 'args'],
    });
    const other = (await aWorkspace(cp, cp.ownerToken)).slug;
    for (const w of [ws, other])
      await cp.request('PUT', `/v1/workspaces/${w}/servers/${server.name}`, { body: { version: '1.0.0' } });
    const gateways = [await aGateway(cp, cp.ownerToken, ws), await aGateway(cp, cp.ownerToken, other)];
    const etags = await Promise.all(
      gateways.map(async (g) => (await asGateway(g.token, '/v1/gateway/catalog')).headers.get('etag')!),
    );

    const killed = await cp.request('PUT', `/v1/catalog/servers/${server.name}/status`, {
      body: { enabled: false, reason: 'CVE-2026-0001' },
    });
    expect(killed.body).toMatchObject({ enabled: false, disabled_reason: 'CVE-2026-0001' });
    for (const [i, g] of gateways.entries()) {
      const res = await asGateway(g.token, '/v1/gateway/catalog', { 'if-none-match': etags[i]! });
      expect(res.status).toBe(200);
      const entry = res.body.servers.find((s: { name: string }) => s.name === server.name);
      expect(entry).toMatchObject({ enabled: false, disabled_reason: 'CVE-2026-0001', overridable: [] });
      expect(entry.command).toBeUndefined();
    }
    expect(
      (await cp.request('PUT', `/v1/catalog/servers/${server.name}/status`, { body: { enabled: true } })).body.enabled,
    ).toBe(true);
  });

  it("a 304 poll keeps the route's contract: ETag, cache headers, a request id of its own or the caller's, and it is counted", async () => {
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const etag = (await asGateway(gateway.token, '/v1/gateway/catalog')).headers.get('etag')!;
    const counted = async () => {
      const text = (await cp.request('GET', '/metrics', { token: null })).text;
      return Number(
        /aileron_http_requests_total\{method="GET",route="\/v1\/gateway\/catalog",status="304"\} (\d+)/.exec(
          text,
        )?.[1] ?? 0,
      );
    };
    const before = await counted();

    const polls = [
      await asGateway(gateway.token, '/v1/gateway/catalog', { 'if-none-match': etag }),
      await asGateway(gateway.token, '/v1/gateway/catalog', { 'if-none-match': etag }),
    ];
    for (const res of polls) {
      expect([res.status, res.headers.get('etag'), res.headers.get('cache-control')]).toEqual([
        304,
        etag,
        'private, no-cache',
      ]);
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
    expect(polls[0]!.headers.get('x-request-id')).not.toBe(polls[1]!.headers.get('x-request-id'));
    const traced = await asGateway(gateway.token, '/v1/gateway/catalog', {
      'if-none-match': etag,
      'x-request-id': 'trace-abc.123',
    });
    expect([traced.status, traced.headers.get('x-request-id')]).toEqual([304, 'trace-abc.123']);
    expect(await counted()).toBe(before + 3);
  });

  it('a revoked gateway is refused at once, on the fast path too; tokens stay in their lane', async () => {
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const etag = (await asGateway(gateway.token, '/v1/gateway/catalog')).headers.get('etag')!;
    expect((await asGateway(gateway.token, '/v1/gateway/catalog', { 'if-none-match': etag })).status).toBe(304);

    // a gateway token reaches nothing of the admin API, and an API token none of the gateway API
    expect((await cp.request('GET', `/v1/workspaces/${ws}`, { token: gateway.token })).body.code).toBe(
      'GATEWAY_TOKEN_NOT_ALLOWED',
    );
    expect((await cp.request('GET', '/v1/catalog/servers', { token: gateway.token })).status).toBe(403);
    expect((await cp.request('POST', '/v1/auth/token', { token: gateway.token })).body.code).toBe(
      'GATEWAY_TOKEN_NOT_ALLOWED',
    );
    expect((await cp.request('GET', '/v1/gateway/catalog')).body.code).toBe('GATEWAY_TOKEN_REQUIRED');

    const seen = (await cp.request('GET', `/v1/workspaces/${ws}/gateways`)).body.gateways.find(
      (g: { id: string }) => g.id === gateway.id,
    );
    expect(seen.last_seen_at).not.toBeNull();

    const revoked = await cp.request('DELETE', `/v1/workspaces/${ws}/gateways/${gateway.id}`);
    expect(revoked.body.revoked_at).not.toBeNull();
    for (const headers of [{}, { 'if-none-match': etag }] as Record<string, string>[]) {
      const res = await asGateway(gateway.token, '/v1/gateway/catalog', headers);
      expect([res.status, res.body?.code]).toEqual([401, 'GATEWAY_REVOKED']);
    }
    expect((await cp.request('DELETE', `/v1/workspaces/${uniqueSlug('nope')}/gateways/${gateway.id}`)).status).toBe(
      404,
    );
  });
});
