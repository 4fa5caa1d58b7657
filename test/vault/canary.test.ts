import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../libs/auth/src';
import { SystemScopes } from '../../libs/auth/src/scope-issuer';
import { VaultService } from '../../libs/vault/src';
import { aWorkspace, uniqueSlug } from '../support/builders';
import { captureOutput } from '../support/captured-output';
import { startTestControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';
import { BACKENDS } from '../support/databases';
import { eventually } from '../support/eventually';

/**
 * The forms a leaked value would take: as written, and the encodings a careless
 * serialiser would apply (JSON escaping leaves this marker as it is).
 */
function encodingsOf(needle: string): string[] {
  const bytes = Buffer.from(needle, 'utf8');
  return [
    needle,
    bytes.toString('base64'),
    bytes.toString('base64url'),
    bytes.toString('hex'),
    encodeURIComponent(needle),
  ];
}

/** The texts in which `needle` appears, in any of its forms. */
function leaksOf(needle: string, texts: Iterable<string>): string[] {
  const forms = encodingsOf(needle);
  const lower = needle.toLowerCase();
  const found: string[] = [];
  for (const text of texts) {
    if (forms.some((form) => text.includes(form)) || text.toLowerCase().includes(lower))
      found.push(text.length > 500 ? `${text.slice(0, 500)}…` : text);
  }
  return found;
}

/** Every row of every table of the public schema as text, but those of `except`. */
async function tableDump(cp: TestControlPlane, except: string[]): Promise<{ table: string; rows: string[] }[]> {
  const client = cp.cp.database.client;
  const tables = await client.$queryRawUnsafe<{ name: string }[]>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
  );
  const dump: { table: string; rows: string[] }[] = [];
  for (const { name } of tables) {
    if (except.includes(name)) continue;
    const rows = await client.$queryRawUnsafe<{ row: string }[]>(
      `SELECT to_jsonb(t)::text AS row FROM "${name.replace(/"/g, '""')}" t`,
    );
    dump.push({ table: name, rows: rows.map((r) => r.row) });
  }
  return dump;
}

/** A SIEM endpoint on loopback that answers 200 and keeps every body. */
async function startSink(): Promise<{ url: string; bodies: string[]; headers: string[]; close(): Promise<void> }> {
  const bodies: string[] = [];
  const headers: string[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      bodies.push(body);
      headers.push(JSON.stringify(req.headers));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/aileron`,
    bodies,
    headers,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(BACKENDS)('canary on %s: a secret value is seen nowhere but in what the pool resolves', (backend) => {
  const marker = `CANARY-${randomUUID()}`;
  // a second unique string, put where it may be: the positive control of every scan
  const control = `CONTROL-${randomUUID()}`;
  let output: ReturnType<typeof captureOutput>;
  let sink: Awaited<ReturnType<typeof startSink>>;
  let cp: TestControlPlane;
  // what came back (status, headers, body); the request itself is the caller's and is not scanned
  const responses: string[] = [];
  const errors: string[] = [];

  /** Every HTTP exchange of the test goes through here, so its whole response is kept for the scan. */
  async function call(
    method: string,
    path: string,
    options: { body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<TestResponse> {
    const res = await cp.request(method, path, options);
    responses.push(`${res.status}\n${JSON.stringify([...res.headers])}\n${res.text}`);
    return res;
  }

  /** Runs an in-process call that must fail and keeps everything its error carries. */
  async function failure(what: string, run: () => Promise<unknown>): Promise<Error & { code?: string }> {
    const outcome = await run().then(
      (value) => ({ value }),
      (error: Error) => ({ error }),
    );
    if (!('error' in outcome)) throw new Error(`${what} did not fail`);
    const error = outcome.error as Error & { code?: string };
    errors.push(
      `${what}: ${error.name}: ${error.message}\n${error.stack}\n${JSON.stringify(error)}\n${String(error.cause ?? '')}`,
    );
    return error;
  }

  beforeAll(async () => {
    sink = await startSink();
    output = captureOutput();
    try {
      cp = await startTestControlPlane(backend, {
        LOG_LEVEL: 'trace',
        ...(backend === 'postgres' ? { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' } : {}),
      });
    } catch (error) {
      output.restore();
      throw error;
    }
  });
  afterAll(async () => {
    try {
      await cp?.close();
    } finally {
      output?.restore();
      await sink?.close();
    }
  });

  it('is written, rewritten, listed, rotated, resolved and provoked, and then found in no response, log, audit record, sink delivery, outbox message, metric, error or table', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken, uniqueSlug('canary'));
    // the control string goes into a field that is meant to be stored and shown
    expect((await call('PATCH', `/v1/workspaces/${ws.slug}`, { body: { name: control } })).status).toBeLessThan(300);
    const created = await call('POST', '/v1/audit/sinks', { body: { name: 'siem', url: sink.url } });
    expect(created.status, created.text).toBe(201);

    // written, and written again as a new version
    const path = 'canary/token';
    const secretUrl = `/v1/workspaces/${ws.slug}/secrets/${path}`;
    expect((await call('PUT', secretUrl, { body: { value: marker } })).status).toBe(200);
    expect((await call('PUT', secretUrl, { body: { value: `${marker}-v2` } })).body).toMatchObject({ version: 2 });
    expect((await call('GET', `/v1/workspaces/${ws.slug}/secrets`)).body.secrets).toEqual([
      expect.objectContaining({ path, version: 2 }),
    ]);
    expect((await call('GET', secretUrl)).body).toMatchObject({ path, versions: [1, 2] });
    expect((await call('POST', `/v1/workspaces/${ws.slug}/vault/rotate`)).body).toEqual({
      key_version: 2,
      rewrapped: 2,
    });

    // used: the pool resolves it for an instance (the one place the value may go)
    const [org] = await cp.cp.database.client.$queryRawUnsafe<{ id: string }[]>(
      'SELECT organization_id::text AS id FROM workspaces WHERE id = $1::uuid',
      ws.id,
    );
    const scope = SystemScopes.workspace(org!.id, ws);
    const vault = cp.cp.app.get(VaultService);
    const reason = { actor: 'pool:i-canary', server: 'github', instance: 'i-canary' };
    expect(await vault.resolve(scope, `vault://${path}`, reason)).toBe(`${marker}-v2`);
    expect(await vault.resolve(scope, `vault://${path}#1`, reason)).toBe(marker);
    expect(await vault.resolveAll(scope, { GITHUB_TOKEN: `vault://${path}` }, reason)).toEqual({
      GITHUB_TOKEN: `${marker}-v2`,
    });

    // provoked: errors around it, each with the marker in what the caller sent
    const provocations: [string, string, { body?: unknown; headers?: Record<string, string> }, number][] = [
      ['PUT', `/v1/workspaces/${ws.slug}/secrets/bad//${marker}`, { body: { value: marker } }, 400],
      ['PUT', `/v1/workspaces/${ws.slug}/secrets/${marker}/${'x'.repeat(300)}`, { body: { value: marker } }, 400],
      ['PUT', secretUrl, { body: { value: `${marker}${'x'.repeat(64 * 1024)}` } }, 400],
      ['PUT', secretUrl, { body: { value: [marker] } }, 400],
      ['PUT', secretUrl, { body: `{"value": "${marker}"` }, 400],
      ['PUT', secretUrl, { body: `{"value": ${marker}}` }, 400],
      ['PUT', secretUrl, { body: `value=${marker}`, headers: { 'content-type': 'text/plain' } }, 415],
      ['PUT', secretUrl, { body: { value: marker, extra: marker } }, 200],
      [
        'POST',
        `/v1/workspaces/${ws.slug}/policy/evaluate`,
        {
          body: { server: 'github', tool: 'create_issue', arguments: { token: marker, nested: { deeper: [marker] } } },
        },
        200,
      ],
      [
        'POST',
        `/v1/workspaces/${ws.slug}/policy/evaluate`,
        { body: { server: 'github', tool: 'create_issue', arguments: { token: marker }, unknown: marker } },
        400,
      ],
    ];
    for (const [method, url, options, status] of provocations) {
      const res = await call(method, url, options);
      expect(res.status, `${method} ${url.slice(0, 120)}: ${res.text.slice(0, 300)}`).toBe(status);
    }
    // and in process: the errors the pool would see
    await failure('resolving a version that does not exist', () => vault.resolve(scope, `vault://${path}#99`, reason));
    await failure('resolving a reference that is not one', () =>
      vault.resolve(scope, `vault://${path}/../${marker}`, reason),
    );
    const admin: Principal = {
      kind: 'api_token',
      id: randomUUID(),
      name: 'canary',
      organizationId: org!.id,
      organizationSlug: 'default',
      orgRole: 'owner',
      workspaceRoles: new Map(),
      restrictedToWorkspaceId: null,
      platformOperator: false,
    };
    await failure('writing an over-long value', () =>
      vault.put(admin, scope, path, `${marker}${'x'.repeat(64 * 1024)}`),
    );
    await failure('writing to a bad path', () => vault.put(admin, scope, `${marker}//x`, marker));
    const twin = await aWorkspace(cp, cp.ownerToken, uniqueSlug('twin'));
    expect((await call('PUT', `/v1/workspaces/${twin.slug}/secrets/${path}`, { body: { value: 'twin' } })).status).toBe(
      200,
    );
    await cp.cp.database.client.$executeRawUnsafe(
      `UPDATE secret_versions t SET ciphertext = s.ciphertext, wrapped_data_key = s.wrapped_data_key, key_version = s.key_version
         FROM secret_versions s WHERE s.workspace_id = $1::uuid AND s.path = $3 AND s.version = 3 AND t.workspace_id = $2::uuid AND t.path = $3 AND t.version = 1`,
      ws.id,
      twin.id,
      path,
    );
    await failure("resolving another workspace's ciphertext", () =>
      vault.resolve(SystemScopes.workspace(org!.id, twin), `vault://${path}`, reason),
    );

    // every way out of the control plane
    const metrics = await call('GET', '/metrics');
    expect(metrics.status).toBe(200);
    const reads = await call('GET', `/v1/workspaces/${ws.slug}/audit?type=secret.read`);
    expect(reads.body.events).toHaveLength(3);
    expect(reads.body.events[0]).toMatchObject({ actor: 'pool:i-canary', data: { instance: 'i-canary', path } });
    await call('GET', `/v1/workspaces/${ws.slug}/audit?limit=500`);
    await call('GET', `/v1/workspaces/${ws.slug}/audit/verify`);
    await call('GET', '/v1/audit?limit=500');
    const csv = await call('GET', `/v1/workspaces/${ws.slug}/audit/export?format=csv`);
    expect(csv.status).toBe(200);
    const exported = await call('GET', `/v1/workspaces/${ws.slug}/audit/export`);
    const auditRecords = exported.text.split('\n').filter(Boolean);
    const types = auditRecords.map((line) => JSON.parse(line).type as string);
    expect(types).toEqual(expect.arrayContaining(['secret.written', 'secret.read', 'vault.key_rotated']));
    expect(types.filter((t) => t === 'secret.written')).toHaveLength(3);
    const orgExport = await call('GET', '/v1/audit/export');
    auditRecords.push(...orgExport.text.split('\n').filter(Boolean));

    // the sink has every record of the workspace's chain
    const wanted = new Set(auditRecords.map((line) => JSON.parse(line).id as string));
    const delivered = () =>
      new Set(sink.bodies.flatMap((body) => (JSON.parse(body).events as { id: string }[]).map((e) => e.id)));
    await eventually('the sink receives every audit record', () => [...wanted].every((id) => delivered().has(id)));
    const sinkTypes = sink.bodies.flatMap((body) => (JSON.parse(body).events as { type: string }[]).map((e) => e.type));
    expect(sinkTypes).toEqual(expect.arrayContaining(['secret.written', 'secret.read', 'vault.key_rotated']));

    const outbox = (
      await cp.cp.database.client.$queryRawUnsafe<{ payload: string }[]>(
        'SELECT payload::text AS payload FROM outbox_messages',
      )
    ).map((r) => r.payload);
    const tables = await tableDump(cp, ['secret_versions']);
    const logs = output.lines();

    // positive controls: each scan finds what was put where it may be, so a leak could not slip past unseen
    expect(leaksOf(marker, [`a line with ${marker} in it`])).toHaveLength(1);
    expect(leaksOf(marker, [JSON.stringify({ value: marker })])).toHaveLength(1);
    expect(leaksOf(marker, [Buffer.from(`x${marker}`).toString('hex')])).toHaveLength(1);
    expect(leaksOf(marker, ['nothing here'])).toEqual([]);
    expect(
      leaksOf(
        control,
        tables.flatMap((t) => t.rows),
      ),
    ).not.toEqual([]);
    expect(leaksOf(control, responses)).not.toEqual([]);
    expect(tables.map((t) => t.table)).toEqual(
      expect.arrayContaining(['secrets', 'audit_events', 'outbox_messages', 'vault_keys', 'workspaces']),
    );
    expect(outbox.length).toBeGreaterThan(0);
    expect(logs.some((line) => line.includes('"level":"trace"') || line.includes('"level":"debug"'))).toBe(true);
    expect(logs.some((line) => line.includes(`/v1/workspaces/${ws.slug}/vault/rotate`))).toBe(true);
    expect(errors).toHaveLength(5);
    expect(sink.bodies.length).toBeGreaterThan(0);

    // and the marker, nowhere
    expect(leaksOf(marker, responses), 'HTTP responses').toEqual([]);
    expect(leaksOf(marker, logs), 'log lines').toEqual([]);
    expect(leaksOf(marker, auditRecords), 'audit export').toEqual([]);
    expect(leaksOf(marker, [csv.text]), 'CSV export').toEqual([]);
    expect(leaksOf(marker, sink.bodies), 'sink deliveries').toEqual([]);
    expect(leaksOf(marker, sink.headers), 'sink delivery headers').toEqual([]);
    expect(leaksOf(marker, outbox), 'outbox messages').toEqual([]);
    expect(leaksOf(marker, [metrics.text]), '/metrics').toEqual([]);
    expect(leaksOf(marker, errors), 'error messages').toEqual([]);
    for (const { table, rows } of tables) expect(leaksOf(marker, rows), `table ${table}`).toEqual([]);
  });
});
