import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemScopes } from '../../libs/auth/src/scope-issuer';
import { checkBundle } from '../../libs/gateway/src';
import { rootKeyId } from '../../libs/platform/keys/src';
import { BootstrapService } from '../../libs/tenancy/src';
import { VaultService } from '../../libs/vault/src';
import type { ReadReason } from '../../libs/vault/src';
import { aGateway, aToken, aWorkspace, anOrganization, uniqueSlug } from '../support/builders';
import { startApiControlPlane, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { createPostgresDatabase } from '../support/databases';

const POOL_READ: ReadReason = { actor: 'pool:i-1', server: 'github', instance: 'i-1' };

/** A value no response, record or log line could contain by accident. */
function aSecretValue(label = 'value'): string {
  return `${label}-${randomBytes(12).toString('hex')}`;
}

/** Raw SQL on the control plane's own database, as an operator with psql would run it. */
function sql<T = Record<string, unknown>>(cp: TestControlPlane, query: string, ...params: unknown[]): Promise<T[]> {
  return cp.cp.database.client.$queryRawUnsafe<T[]>(query, ...params);
}

async function scopeOf(cp: TestControlPlane, ws: { id: string; slug: string }) {
  const [row] = await sql<{ org: string }>(
    cp,
    'SELECT organization_id::text AS org FROM workspaces WHERE id = $1::uuid',
    ws.id,
  );
  return SystemScopes.workspace(row!.org, ws);
}

// the HTTP contract, on the embedded database: every repository query it makes runs on PGlite and PostgreSQL alike in test/database/repository-parity.test.ts
describe('vault API', () => {
  let cp: TestControlPlane;
  let vault: VaultService;
  let ws: { id: string; slug: string };
  beforeAll(async () => {
    cp = await startApiControlPlane({ AILERON_VAULT_KEEP_VERSIONS: '3' });
    vault = cp.cp.app.get(VaultService);
    ws = await aWorkspace(cp, cp.ownerToken);
  });
  afterAll(async () => cp?.close());

  const secretUrl = (path: string, workspace = ws.slug) => `/v1/workspaces/${workspace}/secrets/${path}`;
  const put = (path: string, value: unknown, options: { token?: string; workspace?: string } = {}) =>
    cp.request('PUT', secretUrl(path, options.workspace), {
      body: { value },
      ...(options.token ? { token: options.token } : {}),
    });
  const auditOf = async (type: string, workspace = ws.slug) => {
    const res = await cp.request('GET', `/v1/workspaces/${workspace}/audit?type=${type}`);
    expect(res.status, res.text).toBe(200);
    return res.body.events as {
      type: string;
      actor: string | null;
      server: string | null;
      source: string;
      data: Record<string, unknown>;
    }[];
  };

  it('writes versions and answers with metadata only: the value is in no response body or header', async () => {
    const path = `${uniqueSlug('github')}/token`;
    const [first, second] = [aSecretValue('first'), aSecretValue('second')];

    const created = await put(path, first);
    expect(created.status, created.text).toBe(200);
    expect(created.body).toMatchObject({
      path,
      ref: `vault://${path}`,
      version: 1,
      versions: [1],
      created_by: expect.any(String),
      last_read_at: null,
      last_read_by: null,
    });
    const updated = await put(path, second);
    expect(updated.body).toMatchObject({ path, version: 2, versions: [1, 2], created_at: created.body.created_at });

    const list = await cp.request('GET', `/v1/workspaces/${ws.slug}/secrets`);
    expect(list.status).toBe(200);
    expect(list.body.secrets).toContainEqual(
      expect.objectContaining({ path, ref: `vault://${path}`, version: 2, versions: [1, 2] }),
    );
    const one = await cp.request('GET', secretUrl(path));
    expect(one.status).toBe(200);
    expect(Object.keys(one.body).sort()).toEqual(
      [
        'path',
        'ref',
        'version',
        'versions',
        'created_at',
        'created_by',
        'updated_at',
        'updated_by',
        'last_read_at',
        'last_read_by',
        'deliver_to_gateways',
      ].sort(),
    );
    const prefixed = await cp.request('GET', `/v1/workspaces/${ws.slug}/secrets?prefix=${path.split('/')[0]}/`);
    expect(prefixed.body.secrets.map((s: { path: string }) => s.path)).toEqual([path]);

    for (const res of [created, updated, list, one, prefixed]) {
      for (const value of [first, second]) {
        expect(res.text).not.toContain(value);
        expect(JSON.stringify([...res.headers])).not.toContain(value);
      }
    }
  });

  it('deletes a secret (204), then it is a 404 problem with a stable code, and the audit log keeps the trail', async () => {
    const path = `${uniqueSlug('gone')}/token`;
    const value = aSecretValue();
    await put(path, value);
    await put(path, aSecretValue());

    const removed = await cp.request('DELETE', secretUrl(path));
    expect(removed.status, removed.text).toBe(204);
    expect(removed.text).toBe('');
    const after = await cp.request('GET', secretUrl(path));
    expect(after.status).toBe(404);
    expect(after.headers.get('content-type')).toContain('application/problem+json');
    expect(after.body.code).toBe('SECRET_NOT_FOUND');
    expect((await cp.request('DELETE', secretUrl(path))).body.code).toBe('SECRET_NOT_FOUND');
    expect(
      (await cp.request('GET', `/v1/workspaces/${ws.slug}/secrets`)).body.secrets.map((s: { path: string }) => s.path),
    ).not.toContain(path);
    await expect(vault.resolve(await scopeOf(cp, ws), `vault://${path}`, POOL_READ)).rejects.toMatchObject({
      code: 'SECRET_UNAVAILABLE',
    });

    const trail = (await auditOf('secret.deleted')).filter((e) => e.data.path === path);
    expect(trail).toEqual([
      expect.objectContaining({
        type: 'secret.deleted',
        actor: expect.stringMatching(/^token:/),
        data: { path, versions: [1, 2] },
      }),
    ]);
    expect((await auditOf('secret.written')).filter((e) => e.data.path === path).map((e) => e.data.version)).toEqual([
      2, 1,
    ]);
    expect(JSON.stringify(await auditOf('secret.written,secret.deleted'))).not.toContain(value);
  });

  it.each([
    ['a parent segment', '../x'],
    ['an encoded parent segment', '%2E%2E/x'],
    ['a parent segment inside', 'a/../b'],
    ['a dot segment', 'a/./b'],
    ['an empty segment', 'a//b'],
    ['a trailing slash', 'a/'],
    ['a space', 'a%20b'],
    ['an over-long path', 'x'.repeat(300)],
  ])('refuses a path with %s (%s) with 400 VALIDATION_FAILED and stores nothing', async (_label, path) => {
    // fetch would resolve dot segments before sending; a hostile client sends them as they are
    const res = await rawPut(cp, secretUrl(path), JSON.stringify({ value: 'v' }));
    expect(res.status, res.text).toBe(400);
    expect(JSON.parse(res.text).code).toBe('VALIDATION_FAILED');
    const stored = await sql<{ path: string }>(cp, 'SELECT path FROM secrets WHERE workspace_id = $1::uuid', ws.id);
    expect(stored.map((r) => r.path)).not.toContain(decodeURIComponent(path));
  });

  it.each([
    ['a number', 42],
    ['an object', { nested: 'x' }],
    ['null', null],
    ['nothing', undefined],
    ['an over-long string', 'x'.repeat(64 * 1024 + 1)],
  ])('refuses %s as the value with 400 naming body.value', async (_label, value) => {
    const res = await cp.request('PUT', secretUrl('typed/value'), { body: value === undefined ? {} : { value } });
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(res.body.errors.map((e: { path: string }) => e.path)).toContain('body.value');
    expect((await cp.request('GET', secretUrl('typed/value'))).status).toBe(404);
  });

  it('is deliverable to gateways only when its writer says so: false by default, kept across writes, each change audited', async () => {
    const path = `${uniqueSlug('deliver')}/token`;
    const changesOf = async () => (await auditOf('secret.delivery_changed')).filter((e) => e.data.path === path);
    const writtenOf = async () => (await auditOf('secret.written')).filter((e) => e.data.path === path);

    expect((await put(path, aSecretValue())).body).toMatchObject({ version: 1, deliver_to_gateways: false });
    expect(await changesOf()).toEqual([]);

    const marked = await cp.request('PUT', secretUrl(path), {
      body: { value: aSecretValue(), deliver_to_gateways: true },
    });
    expect(marked.body).toMatchObject({ version: 2, deliver_to_gateways: true });
    // a write that does not say keeps what the secret had
    expect((await put(path, aSecretValue())).body).toMatchObject({ version: 3, deliver_to_gateways: true });
    const listed = await cp.request('GET', `/v1/workspaces/${ws.slug}/secrets?prefix=${path.split('/')[0]}/`);
    expect(listed.body.items).toEqual([expect.objectContaining({ path, deliver_to_gateways: true })]);

    // PATCH changes it without a new value; saying what it already is records nothing
    const unmarked = await cp.request('PATCH', secretUrl(path), { body: { deliver_to_gateways: false } });
    expect(unmarked.status, unmarked.text).toBe(200);
    expect(unmarked.body).toMatchObject({ version: 3, versions: [1, 2, 3], deliver_to_gateways: false });
    const again = await cp.request('PATCH', secretUrl(path), { body: { deliver_to_gateways: false } });
    expect(again.body).toMatchObject({ deliver_to_gateways: false });

    const changes = await changesOf();
    expect(changes.map((e) => e.data)).toEqual([
      { path, deliver_to_gateways: false, previous: true },
      { path, deliver_to_gateways: true, previous: false },
    ]);
    expect(changes.every((e) => e.actor?.startsWith('token:'))).toBe(true);
    expect((await writtenOf()).map((e) => [e.data.version, e.data.deliver_to_gateways])).toEqual([
      [3, true],
      [2, true],
      [1, false],
    ]);

    const badBody = await cp.request('PATCH', secretUrl(path), { body: { deliver_to_gateways: 'yes' } });
    expect([badBody.status, badBody.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    const missing = await cp.request('PATCH', secretUrl(`${path}-missing`), { body: { deliver_to_gateways: true } });
    expect([missing.status, missing.body.code]).toEqual([404, 'SECRET_NOT_FOUND']);
  });

  it('a member sees which secrets exist but cannot write, delete or rotate (403), and nothing changes', async () => {
    const path = `${uniqueSlug('member')}/token`;
    await put(path, aSecretValue());
    const member = (await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug })).token;

    expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/secrets`, { token: member })).status).toBe(200);
    expect((await cp.request('GET', secretUrl(path), { token: member })).body).toMatchObject({ path, version: 1 });
    for (const [method, url, body] of [
      ['PUT', secretUrl(path), { value: 'from a member' }],
      ['PUT', secretUrl(`${path}-new`), { value: 'from a member' }],
      ['PATCH', secretUrl(path), { deliver_to_gateways: true }],
      ['DELETE', secretUrl(path), undefined],
      ['POST', `/v1/workspaces/${ws.slug}/vault/rotate`, undefined],
    ] as const) {
      const res = await cp.request(method, url, { token: member, ...(body ? { body } : {}) });
      expect(res.status, `${method} ${url}`).toBe(403);
    }
    expect((await cp.request('GET', secretUrl(path))).body).toMatchObject({
      version: 1,
      versions: [1],
      deliver_to_gateways: false,
    });
    expect((await cp.request('GET', secretUrl(`${path}-new`))).status).toBe(404);
  });

  it('another organisation gets 404 on every vault route of the workspace, and nothing changes', async () => {
    const path = `${uniqueSlug('theirs')}/token`;
    await put(path, aSecretValue());
    const other = await anOrganization(cp);
    const keysBefore = await sql(
      cp,
      'SELECT version, wrapped_key FROM vault_keys WHERE workspace_id = $1::uuid ORDER BY version',
      ws.id,
    );

    for (const [method, url, body] of [
      ['GET', `/v1/workspaces/${ws.slug}/secrets`, undefined],
      ['GET', secretUrl(path), undefined],
      ['PUT', secretUrl(path), { value: 'overwritten' }],
      ['PATCH', secretUrl(path), { deliver_to_gateways: true }],
      ['DELETE', secretUrl(path), undefined],
      ['POST', `/v1/workspaces/${ws.slug}/vault/rotate`, undefined],
    ] as const) {
      const res = await cp.request(method, url, { token: other.token, ...(body ? { body } : {}) });
      expect(res.status, `${method} ${url}`).toBe(404);
      expect(res.text).not.toContain(ws.id);
    }
    expect((await cp.request('GET', secretUrl(path))).body).toMatchObject({
      version: 1,
      versions: [1],
      deliver_to_gateways: false,
    });
    expect(
      await sql(
        cp,
        'SELECT version, wrapped_key FROM vault_keys WHERE workspace_id = $1::uuid ORDER BY version',
        ws.id,
      ),
    ).toEqual(keysBefore);
    // and root rewrapping is for platform operators only
    expect((await cp.request('POST', '/v1/vault/rewrap-root', { token: other.token })).status).toBe(403);
  });

  it('keeps the configured number of versions (3): after five writes only 3, 4 and 5 remain', async () => {
    const path = `${uniqueSlug('kept')}/token`;
    const values = [1, 2, 3, 4, 5].map((n) => aSecretValue(`v${n}`));
    for (const value of values) await put(path, value);
    expect((await cp.request('GET', secretUrl(path))).body).toMatchObject({ version: 5, versions: [3, 4, 5] });
    const stored = await sql<{ version: number }>(
      cp,
      'SELECT version FROM secret_versions WHERE workspace_id = $1::uuid AND path = $2 ORDER BY version',
      ws.id,
      path,
    );
    expect(stored.map((r) => r.version)).toEqual([3, 4, 5]);

    const scope = await scopeOf(cp, ws);
    expect(await vault.resolve(scope, `vault://${path}#3`, POOL_READ)).toBe(values[2]);
    await expect(vault.resolve(scope, `vault://${path}#2`, POOL_READ)).rejects.toMatchObject({
      code: 'SECRET_UNAVAILABLE',
    });
    const written = (await auditOf('secret.written')).filter((e) => e.data.path === path);
    expect(written.find((e) => e.data.version === 5)?.data.removed_versions).toEqual([2]);
  });

  it('resolves the newest value for the pool, #n pins a kept version, and every read is audited and shows in the metadata', async () => {
    const path = `${uniqueSlug('resolve')}/token`;
    const [v1, v2] = [aSecretValue('v1'), aSecretValue('v2')];
    await put(path, v1);
    await put(path, v2);
    const scope = await scopeOf(cp, ws);
    const readsOf = async () => (await auditOf('secret.read')).filter((e) => e.data.path === path);
    expect(await readsOf()).toEqual([]);

    expect(await vault.resolve(scope, `vault://${path}`, POOL_READ)).toBe(v2);
    const afterFirst = (await cp.request('GET', secretUrl(path))).body;
    expect(afterFirst).toMatchObject({ last_read_by: 'pool:i-1', last_read_at: expect.any(String) });
    expect(await vault.resolve(scope, `vault://${path}#1`, { ...POOL_READ, actor: 'pool:i-2', instance: 'i-2' })).toBe(
      v1,
    );
    const afterSecond = (await cp.request('GET', secretUrl(path))).body;
    expect(afterSecond.last_read_by).toBe('pool:i-2');
    expect(Date.parse(afterSecond.last_read_at)).toBeGreaterThanOrEqual(Date.parse(afterFirst.last_read_at));

    const reads = await readsOf();
    expect(reads).toEqual([
      expect.objectContaining({
        type: 'secret.read',
        source: 'pool',
        actor: 'pool:i-2',
        server: 'github',
        data: { path, version: 1, instance: 'i-2', server: 'github' },
      }),
      expect.objectContaining({
        type: 'secret.read',
        source: 'pool',
        actor: 'pool:i-1',
        server: 'github',
        data: { path, version: 2, instance: 'i-1', server: 'github' },
      }),
    ]);
    expect(JSON.stringify(reads)).not.toContain(v1);
    expect(JSON.stringify(reads)).not.toContain(v2);

    expect(await vault.resolveAll(scope, { TOKEN: `vault://${path}`, PLAIN: 'as-is' }, POOL_READ)).toEqual({
      TOKEN: v2,
      PLAIN: 'as-is',
    });
    await expect(vault.resolve(scope, `vault://${path}#9`, POOL_READ)).rejects.toMatchObject({
      code: 'SECRET_UNAVAILABLE',
    });
    await expect(vault.resolve(scope, 'vault://../etc/passwd', POOL_READ)).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    expect(await readsOf()).toHaveLength(3);
  });

  it('gives no value when the secret.read record cannot be written, to the pool or a gateway (503 AUDIT_UNAVAILABLE), and the metadata shows no read', async () => {
    const path = `${uniqueSlug('unaudited')}/token`;
    const value = aSecretValue();
    const written = await cp.request('PUT', secretUrl(path), { body: { value, deliver_to_gateways: true } });
    expect(written.status, written.text).toBe(200);
    const scope = await scopeOf(cp, ws);
    const server = uniqueSlug('local');
    expect(
      (
        await cp.request('POST', '/v1/catalog/servers', {
          body: { name: server, version: '1.0.0', command: 'node', env: { TOKEN: `vault://${path}` } },
        })
      ).status,
    ).toBe(201);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/servers/${server}`, { body: { version: '1.0.0' } });
    const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    const askAsGateway = () =>
      cp.request('POST', '/v1/gateway/secrets/resolve', {
        token: gateway.token,
        body: { server, version: '1.0.0' },
      });

    const superuser = await superuserOf(cp);
    await superuser.run(
      `CREATE FUNCTION refuse_audit_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit storage unavailable'; END $$`,
    );
    await superuser.run(
      'CREATE TRIGGER refuse_audit_insert BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit_insert()',
    );
    let outcome: { value?: string; error?: unknown };
    let asked: Awaited<ReturnType<typeof askAsGateway>>;
    try {
      outcome = await vault.resolve(scope, `vault://${path}`, POOL_READ).then(
        (v) => ({ value: v }),
        (error: unknown) => ({ error }),
      );
      asked = await askAsGateway();
    } finally {
      await superuser.run('DROP TRIGGER refuse_audit_insert ON audit_events');
      await superuser.run('DROP FUNCTION refuse_audit_insert()');
      await superuser.close();
    }
    expect(outcome.value).toBeUndefined();
    expect(outcome.error).toMatchObject({ code: 'AUDIT_UNAVAILABLE' });
    expect(String((outcome.error as Error).message)).not.toContain(value);
    expect([asked.status, asked.body.code]).toEqual([503, 'AUDIT_UNAVAILABLE']);
    expect(asked.headers.get('retry-after')).not.toBeNull();
    expect(asked.text).not.toContain(value);
    expect((await cp.request('GET', secretUrl(path))).body).toMatchObject({ last_read_at: null, last_read_by: null });
    expect((await auditOf('secret.read')).filter((e) => e.data.path === path)).toEqual([]);

    // with the log writable again, the same reads work and are recorded
    expect(await vault.resolve(scope, `vault://${path}`, POOL_READ)).toBe(value);
    const delivered = await askAsGateway();
    expect(delivered.status, delivered.text).toBe(200);
    expect(delivered.body.secrets).toEqual([expect.objectContaining({ path, value })]);
    expect((await auditOf('secret.read')).filter((e) => e.data.path === path).map((e) => e.actor)).toEqual([
      `gateway:${gateway.id}`,
      'pool:i-1',
    ]);
  });

  it('rotates the workspace key: data keys are re-wrapped, ciphertexts stay byte-identical, values still resolve', async () => {
    const fresh = await aWorkspace(cp, cp.ownerToken);
    const values: Record<string, string[]> = {
      'db/password': [aSecretValue('a1'), aSecretValue('a2')],
      'github/token': [aSecretValue('b1')],
    };
    for (const [path, versions] of Object.entries(values))
      for (const value of versions) await put(path, value, { workspace: fresh.slug });
    const rows = () =>
      sql<{ path: string; version: number; ciphertext: string; wrapped_data_key: string; key_version: number }>(
        cp,
        'SELECT path, version, ciphertext, wrapped_data_key, key_version FROM secret_versions WHERE workspace_id = $1::uuid ORDER BY path, version',
        fresh.id,
      );
    const before = await rows();
    expect(before.map((r) => r.key_version)).toEqual([1, 1, 1]);

    const rotated = await cp.request('POST', `/v1/workspaces/${fresh.slug}/vault/rotate`);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body).toEqual({ key_version: 2, rewrapped: 3 });
    const after = await rows();
    expect(after.map((r) => [r.path, r.version, r.ciphertext])).toEqual(
      before.map((r) => [r.path, r.version, r.ciphertext]),
    );
    expect(after.map((r) => r.key_version)).toEqual([2, 2, 2]);
    after.forEach((row, i) => expect(row.wrapped_data_key).not.toBe(before[i]!.wrapped_data_key));
    const keys = await sql<{ version: number; retired: boolean }>(
      cp,
      'SELECT version, retired_at IS NOT NULL AS retired FROM vault_keys WHERE workspace_id = $1::uuid ORDER BY version',
      fresh.id,
    );
    expect(keys).toEqual([
      { version: 1, retired: true },
      { version: 2, retired: false },
    ]);

    const scope = await scopeOf(cp, fresh);
    expect(await vault.resolve(scope, 'vault://db/password', POOL_READ)).toBe(values['db/password']![1]);
    expect(await vault.resolve(scope, 'vault://db/password#1', POOL_READ)).toBe(values['db/password']![0]);
    expect(await vault.resolve(scope, 'vault://github/token', POOL_READ)).toBe(values['github/token']![0]);

    // a write after the rotation uses the new key; the next rotation moves everything again
    await put('github/token', aSecretValue('b2'), { workspace: fresh.slug });
    expect((await rows()).map((r) => r.key_version)).toEqual([2, 2, 2, 2]);
    expect((await cp.request('POST', `/v1/workspaces/${fresh.slug}/vault/rotate`)).body).toEqual({
      key_version: 3,
      rewrapped: 4,
    });
    expect(await vault.resolve(scope, 'vault://github/token#1', POOL_READ)).toBe(values['github/token']![0]);
    const audited = await auditOf('vault.key_rotated', fresh.slug);
    expect(audited.map((e) => e.data)).toEqual([
      { key_version: 3, rewrapped: 4 },
      { key_version: 2, rewrapped: 3 },
    ]);
  });

  it("a ciphertext copied into another tenant's row by SQL does not open there: an error, never the value", async () => {
    const path = 'shared/token';
    const a = await aWorkspace(cp, cp.ownerToken);
    const b = await aWorkspace(cp, cp.ownerToken);
    const other = await anOrganization(cp);
    const c = await aWorkspace(cp, other.token);
    const valueA = aSecretValue('tenant-a');
    await put(path, valueA, { workspace: a.slug });
    await put(path, aSecretValue('tenant-b'), { workspace: b.slug });
    await put(path, aSecretValue('tenant-c'), { workspace: c.slug, token: other.token });

    const [rowA] = await sql<{ ciphertext: string; wrapped_data_key: string; key_version: number }>(
      cp,
      'SELECT ciphertext, wrapped_data_key, key_version FROM secret_versions WHERE workspace_id = $1::uuid AND path = $2 AND version = 1',
      a.id,
      path,
    );
    const [keyA] = await sql<{ wrapped_key: string }>(
      cp,
      'SELECT wrapped_key FROM vault_keys WHERE workspace_id = $1::uuid AND version = 1',
      a.id,
    );
    for (const target of [b, c]) {
      const scope = await scopeOf(cp, target);
      const copied = await cp.cp.database.client.$executeRawUnsafe(
        'UPDATE secret_versions SET ciphertext = $1, wrapped_data_key = $2, key_version = $3 WHERE workspace_id = $4::uuid AND path = $5 AND version = 1',
        rowA!.ciphertext,
        rowA!.wrapped_data_key,
        rowA!.key_version,
        target.id,
        path,
      );
      expect(copied).toBe(1);
      const outcome = await vault.resolve(scope, `vault://${path}`, POOL_READ).then(
        (value) => ({ value }),
        (error: Error) => ({ error }),
      );
      expect(outcome).not.toHaveProperty('value');
      expect((outcome as { error: Error }).error.message).not.toContain(valueA);

      // copying A's workspace key as well does not help: it is sealed to A
      await cp.cp.database.client.$executeRawUnsafe(
        'UPDATE vault_keys SET wrapped_key = $1 WHERE workspace_id = $2::uuid AND version = 1',
        keyA!.wrapped_key,
        target.id,
      );
      const withKey = await vault.resolve(scope, `vault://${path}`, POOL_READ).then(
        (value) => ({ value }),
        (error: Error) => ({ error }),
      );
      expect(withKey).not.toHaveProperty('value');
      expect((withKey as { error: Error }).error.message).not.toContain(valueA);
    }
    expect(await vault.resolve(await scopeOf(cp, a), `vault://${path}`, POOL_READ)).toBe(valueA);
  });
});

describe('root key rotation on PostgreSQL (server mode)', () => {
  const k1 = randomBytes(32).toString('base64');
  const k2 = randomBytes(32).toString('base64');
  let database: { url: string; drop(): Promise<void> };
  let running: TestControlPlane | undefined;
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await running?.close();
    await database?.drop();
  });

  /** A replica on the shared database with the given root keys; the previous one is stopped first. */
  async function restartWith(rootKey: string): Promise<TestControlPlane> {
    await running?.close();
    running = undefined;
    running = await startTestControlPlane('postgres', { DATABASE_URL: database.url, AILERON_ROOT_KEY: rootKey });
    return running;
  }

  it('re-seals every key under the new root key; then the old key can be dropped and secrets and bundles still work', async () => {
    let cp = await restartWith(k1);
    const owner = (await cp.cp.app.get(BootstrapService).bootstrapServer('default', 'Default')).token;
    const as =
      (c: TestControlPlane) =>
      (method: string, path: string, body?: unknown, token = owner) =>
        c.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
    const ws = await aWorkspace(cp, owner);
    const other = await aWorkspace(cp, owner);
    const values = { a: aSecretValue('a'), b: aSecretValue('b'), c: aSecretValue('c') };
    expect((await as(cp)('PUT', `/v1/workspaces/${ws.slug}/secrets/svc/a`, { value: values.a })).status).toBe(200);
    expect((await as(cp)('PUT', `/v1/workspaces/${ws.slug}/secrets/svc/b`, { value: values.b })).status).toBe(200);
    expect((await as(cp)('PUT', `/v1/workspaces/${other.slug}/secrets/svc/c`, { value: values.c })).status).toBe(200);
    // a rotated workspace holds two keys (one retired): both must move
    expect((await as(cp)('POST', `/v1/workspaces/${ws.slug}/vault/rotate`)).body).toMatchObject({ key_version: 2 });
    const gateway = await aGateway(cp, owner, ws.slug);
    expect((await as(cp)('GET', '/v1/gateway/policy', undefined, gateway.token)).status).toBe(200);

    const sealedUnder = async (c: TestControlPlane, keyId: string) => {
      const [row] = await sql<{ vault: number; signing: number }>(
        c,
        `SELECT (SELECT count(*)::int FROM vault_keys WHERE wrapped_key LIKE $1) AS vault, (SELECT count(*)::int FROM signing_keys WHERE private_key LIKE $1) AS signing`,
        `${keyId}.%`,
      );
      return row!;
    };
    const id1 = rootKeyId(Buffer.from(k1, 'base64'));
    const id2 = rootKeyId(Buffer.from(k2, 'base64'));

    cp = await restartWith(`${k2},${k1}`);
    const underK1 = await sealedUnder(cp, id1);
    expect(underK1.vault).toBe(3);
    expect(underK1.signing).toBeGreaterThanOrEqual(1);
    const rewrapped = await as(cp)('POST', '/v1/vault/rewrap-root');
    expect(rewrapped.status, rewrapped.text).toBe(200);
    expect(rewrapped.body).toEqual({ root_key_id: id2, workspace_keys: 3, signing_keys: underK1.signing });
    expect(await sealedUnder(cp, id1)).toEqual({ vault: 0, signing: 0 });
    expect((await as(cp)('POST', '/v1/vault/rewrap-root')).body).toEqual({
      root_key_id: id2,
      workspace_keys: 0,
      signing_keys: 0,
    });

    cp = await restartWith(k2);
    const vault = cp.cp.app.get(VaultService);
    expect(await vault.resolve(await scopeOf(cp, ws), 'vault://svc/a', POOL_READ)).toBe(values.a);
    expect(await vault.resolve(await scopeOf(cp, ws), 'vault://svc/b', POOL_READ)).toBe(values.b);
    expect(await vault.resolve(await scopeOf(cp, other), 'vault://svc/c', POOL_READ)).toBe(values.c);
    expect(
      (await as(cp)('PUT', `/v1/workspaces/${ws.slug}/secrets/svc/a`, { value: aSecretValue() })).body,
    ).toMatchObject({ version: 2 });

    // a policy change makes the gateway bundle be signed afresh, with the signing key only K2 now opens
    expect(
      (
        await as(cp)('PUT', `/v1/workspaces/${ws.slug}/policy`, {
          rules: [{ id: `r-${randomUUID().slice(0, 8)}`, effect: 'deny', tools: ['x'] }],
        })
      ).status,
    ).toBe(200);
    const bundle = await as(cp)('GET', '/v1/gateway/policy', undefined, gateway.token);
    expect(bundle.status, bundle.text).toBe(200);
    const keys = (await cp.request('GET', '/.well-known/aileron/policy-keys', { token: null })).body.keys;
    expect(checkBundle(bundle.body, keys, new Date())).toEqual({ ok: true });
  });
});

/** A request with its path sent byte for byte, dot segments included. */
function rawPut(cp: TestControlPlane, path: string, body: string): Promise<{ status: number; text: string }> {
  const url = new URL(cp.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'PUT',
        path,
        headers: { authorization: `Bearer ${cp.ownerToken}`, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A separate superuser session (PostgreSQL), or PGlite's single session, which is the superuser. */
async function superuserOf(
  cp: TestControlPlane,
): Promise<{ run(statement: string): Promise<void>; close(): Promise<void> }> {
  const database = cp.cp.config.database;
  if (database.kind !== 'postgres') {
    return {
      run: async (statement) => void (await cp.cp.database.client.$executeRawUnsafe(statement)),
      close: async () => undefined,
    };
  }
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  return { run: async (statement) => void (await client.query(statement)), close: () => client.end() };
}
