import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SignedPolicyBundle } from '../../libs/gateway/src';
import { aGateway, anOrganization, aWorkspace, uniqueSlug } from '../support/builders';
import { captureOutput } from '../support/captured-output';
import { startApiControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';

interface AuditRecord {
  type: string;
  source: string;
  actor: string | null;
  server: string | null;
  data: Record<string, unknown>;
}

/**
 * Local servers' credentials, delivered to their gateway (the hybrid ADR):
 * only the values of deliverable secrets an entry of the gateway's own
 * workspace names, at the version its catalog gives it, each read audited,
 * and the values in that answer only. The control plane's whole output is
 * kept and searched for every value at the end.
 */
describe('POST /v1/gateway/secrets/resolve', () => {
  let output: ReturnType<typeof captureOutput>;
  let cp: TestControlPlane;
  let ws: string;
  /** every value written in this file: none may show anywhere but in a resolve answer */
  const values: string[] = [];
  /** every answer but the successful resolves, searched for values at the end */
  const answers: string[] = [];

  beforeAll(async () => {
    output = captureOutput();
    try {
      cp = await startApiControlPlane({ LOG_LEVEL: 'trace' });
    } catch (error) {
      output.restore();
      throw error;
    }
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
  });
  afterAll(async () => {
    try {
      await cp?.close();
    } finally {
      output?.restore();
    }
  });

  function aValue(label: string): string {
    const value = `${label}-${randomBytes(12).toString('hex')}`;
    values.push(value);
    return value;
  }

  function kept(res: TestResponse): TestResponse {
    answers.push(`${res.status} ${JSON.stringify([...res.headers])} ${res.text}`);
    return res;
  }

  async function aSecret(
    path: string,
    value: string,
    options: { workspace?: string; token?: string; deliver?: boolean } = {},
  ): Promise<void> {
    const res = kept(
      await cp.request('PUT', `/v1/workspaces/${options.workspace ?? ws}/secrets/${path}`, {
        ...(options.token ? { token: options.token } : {}),
        body: { value, ...(options.deliver === undefined ? {} : { deliver_to_gateways: options.deliver }) },
      }),
    );
    expect(res.status, res.text).toBe(200);
  }

  /** A secret marked deliverable, at a path of its own: its path and value. */
  async function aDeliverable(label: string): Promise<{ path: string; value: string }> {
    const secret = { path: `${uniqueSlug(label)}/token`, value: aValue(label) };
    await aSecret(secret.path, secret.value, { deliver: true });
    return secret;
  }

  /** Publishes a local entry (or another version of one) and assigns it to the workspace at that version. */
  async function aLocalServer(
    env: Record<string, string>,
    options: { name?: string; version?: string; workspace?: string; token?: string; assign?: boolean } = {},
  ): Promise<string> {
    const name = options.name ?? uniqueSlug('local');
    const token = options.token ? { token: options.token } : {};
    const published = await cp.request('POST', '/v1/catalog/servers', {
      ...token,
      body: { name, version: options.version ?? '1.0.0', command: 'node', args: ['server.js'], env },
    });
    expect(published.status, published.text).toBe(201);
    if (options.assign !== false) {
      const assigned = await cp.request('PUT', `/v1/workspaces/${options.workspace ?? ws}/servers/${name}`, {
        ...token,
        body: { version: options.version ?? '1.0.0' },
      });
      expect(assigned.status, assigned.text).toBe(200);
    }
    return name;
  }

  const resolve = (token: string, server: string, version = '1.0.0') =>
    cp.request('POST', '/v1/gateway/secrets/resolve', { token, body: { server, version } });

  async function refused(token: string, server: string, version = '1.0.0'): Promise<TestResponse> {
    const res = kept(await resolve(token, server, version));
    expect(res.status, res.text).toBeGreaterThanOrEqual(400);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    return res;
  }

  async function auditOf(type: string, workspace = ws): Promise<AuditRecord[]> {
    const res = await cp.request('GET', `/v1/workspaces/${workspace}/audit?type=${type}&limit=500`);
    expect(res.status, res.text).toBe(200);
    return res.body.items;
  }
  const readsOf = async (path: string) => (await auditOf('secret.read')).filter((r) => r.data.path === path);

  it("gives a gateway the values of its local server's deliverable secrets, each read a secret.read naming the gateway", async () => {
    const { path: github, value: githubValue } = await aDeliverable('github');
    const { path: jira, value: jiraValue } = await aDeliverable('jira');
    const server = await aLocalServer({
      GITHUB_TOKEN: `vault://${github}`,
      JIRA_TOKEN: `vault://${jira}`,
      GH_AGAIN: `vault://${github}`,
      LOG: 'debug',
    });
    const gateway = await aGateway(cp, cp.ownerToken, ws);

    // the catalog names the references, the signed bundle says the server needs them: neither carries a value
    const catalog = kept(await cp.request('GET', '/v1/gateway/catalog', { token: gateway.token }));
    expect(catalog.body.servers.find((s: { name: string }) => s.name === server)).toMatchObject({
      mode: 'local',
      env: { GITHUB_TOKEN: `vault://${github}`, JIRA_TOKEN: `vault://${jira}`, LOG: 'debug' },
    });
    const policy = kept(await cp.request('GET', '/v1/gateway/policy', { token: gateway.token }));
    const bundle = policy.body as SignedPolicyBundle;
    expect(bundle.payload.needs_secrets).toContainEqual({
      server,
      version: '1.0.0',
      paths: [github, jira].sort(),
    });

    const res = await resolve(gateway.token, server);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual({
      server,
      version: '1.0.0',
      secrets: [
        { ref: `vault://${github}`, path: github, version: 1, value: githubValue },
        { ref: `vault://${jira}`, path: jira, version: 1, value: jiraValue },
      ].sort((a, b) => (a.path < b.path ? -1 : 1)),
    });

    // one record per value read (the repeated reference is one read), naming the gateway
    for (const path of [github, jira]) {
      expect(await readsOf(path)).toEqual([
        expect.objectContaining({
          type: 'secret.read',
          source: 'gateway',
          actor: `gateway:${gateway.id}`,
          server,
          data: { path, version: 1, gateway: gateway.id, server, server_version: '1.0.0' },
        }),
      ]);
    }
    const metadata = kept(await cp.request('GET', `/v1/workspaces/${ws}/secrets/${github}`));
    expect(metadata.body).toMatchObject({ deliver_to_gateways: true, last_read_by: `gateway:${gateway.id}` });

    // a new value is what the next start gets
    const rotated = aValue('github-v2');
    await aSecret(github, rotated);
    const again = await resolve(gateway.token, server);
    expect(again.body.secrets).toContainEqual({ ref: `vault://${github}`, path: github, version: 2, value: rotated });
    expect((await readsOf(github)).map((r) => r.data.version)).toEqual([2, 1]);
  });

  it('answers a server the gateway may not have like one that does not exist, and names no value in any refusal', async () => {
    const { path } = await aDeliverable('shared');
    const server = await aLocalServer({ TOKEN: `vault://${path}` });
    const unassigned = await aLocalServer({ TOKEN: `vault://${path}` }, { assign: false });

    // a gateway of another workspace of the organisation, and one of another organisation whose
    // workspace has a server of the same name and a secret at the same path
    const neighbour = await aGateway(cp, cp.ownerToken, (await aWorkspace(cp, cp.ownerToken)).slug);
    const other = await anOrganization(cp);
    const otherWs = (await aWorkspace(cp, other.token)).slug;
    await aSecret(path, aValue('other-org'), { workspace: otherWs, token: other.token, deliver: true });
    await aLocalServer({ TOKEN: `vault://${path}` }, { name: server, workspace: otherWs, token: other.token });
    const stranger = await aGateway(cp, other.token, otherWs);
    const own = await aGateway(cp, cp.ownerToken, ws);

    const notFound = [
      await refused(neighbour.token, server),
      await refused(own.token, unassigned),
      await refused(own.token, uniqueSlug('nothing')),
    ];
    for (const res of notFound) expect([res.status, res.body.code]).toEqual([404, 'GATEWAY_SERVER_NOT_FOUND']);
    // the other organisation's gateway reaches its own server of that name, never this one
    const theirs = await resolve(stranger.token, server);
    expect(theirs.status, theirs.text).toBe(200);
    expect(theirs.body.secrets[0].value).toBe(values[values.length - 1]);
    expect(await readsOf(path)).toEqual([]);

    // tokens stay in their lane: an admin's API token is no gateway
    const admin = await refused(cp.ownerToken, server);
    expect([admin.status, admin.body.code]).toEqual([403, 'GATEWAY_TOKEN_REQUIRED']);

    const mismatch = await refused(own.token, server, '9.9.9');
    expect([mismatch.status, mismatch.body.code, mismatch.body.version]).toEqual([
      409,
      'GATEWAY_SERVER_VERSION_MISMATCH',
      '1.0.0',
    ]);

    const remote = uniqueSlug('remote');
    expect(
      (
        await cp.request('POST', '/v1/catalog/servers', {
          body: { name: remote, version: '1.0.0', mode: 'remote', command: 'node', env: { T: `vault://${path}` } },
        })
      ).status,
    ).toBe(201);
    await cp.request('PUT', `/v1/workspaces/${ws}/servers/${remote}`, { body: { version: '1.0.0' } });
    const notLocal = await refused(own.token, remote);
    expect([notLocal.status, notLocal.body.code]).toEqual([409, 'GATEWAY_SERVER_NOT_LOCAL']);

    const missing = await aLocalServer({ TOKEN: `vault://${uniqueSlug('never')}/written` });
    expect((await refused(own.token, missing)).body.code).toBe('SECRET_UNAVAILABLE');

    const off = await cp.request('PUT', `/v1/catalog/servers/${server}/status`, {
      body: { enabled: false, reason: 'CVE-2026-0042' },
    });
    expect(off.status, off.text).toBe(200);
    const disabled = await refused(own.token, server);
    expect([disabled.status, disabled.body.code]).toEqual([403, 'GATEWAY_SERVER_DISABLED']);
    expect(disabled.body.detail).toContain('CVE-2026-0042');
    await cp.request('PUT', `/v1/catalog/servers/${server}/status`, { body: { enabled: true } });

    const revoked = await aGateway(cp, cp.ownerToken, ws);
    await cp.request('DELETE', `/v1/workspaces/${ws}/gateways/${revoked.id}`);
    expect((await refused(revoked.token, server)).body.code).toBe('GATEWAY_REVOKED');

    // nothing refused was read
    expect(await readsOf(path)).toEqual([]);
    expect((await resolve(own.token, server)).status).toBe(200);
    expect(await readsOf(path)).toHaveLength(1);
  });

  it('gives no value of a secret its writer did not mark deliverable, nor of the others the server names', async () => {
    const { path: open, value: openValue } = await aDeliverable('open');
    const closed = `${uniqueSlug('closed')}/token`;
    const closedValue = aValue('closed');
    await aSecret(closed, closedValue);
    expect(kept(await cp.request('GET', `/v1/workspaces/${ws}/secrets/${closed}`)).body.deliver_to_gateways).toBe(
      false,
    );
    const server = await aLocalServer({ A: `vault://${open}`, B: `vault://${closed}` });
    const gateway = await aGateway(cp, cp.ownerToken, ws);

    const res = await refused(gateway.token, server);
    expect([res.status, res.body.code, res.body.path]).toEqual([403, 'SECRET_NOT_DELIVERABLE', closed]);
    expect(res.body.detail).toContain(closed);
    expect(await readsOf(open)).toEqual([]);
    expect(await readsOf(closed)).toEqual([]);

    // the writer says so (audited), and the gateway gets both
    const marked = kept(
      await cp.request('PATCH', `/v1/workspaces/${ws}/secrets/${closed}`, { body: { deliver_to_gateways: true } }),
    );
    expect(marked.body).toMatchObject({ path: closed, deliver_to_gateways: true, version: 1 });
    expect((await auditOf('secret.delivery_changed')).filter((r) => r.data.path === closed)).toEqual([
      expect.objectContaining({ data: { path: closed, deliver_to_gateways: true, previous: false } }),
    ]);
    const delivered = await resolve(gateway.token, server);
    expect(delivered.status, delivered.text).toBe(200);
    expect(delivered.body.secrets.map((s: { value: string }) => s.value).sort()).toEqual(
      [openValue, closedValue].sort(),
    );

    // and takes it back: the next start is refused again
    await cp.request('PATCH', `/v1/workspaces/${ws}/secrets/${closed}`, { body: { deliver_to_gateways: false } });
    expect((await refused(gateway.token, server)).body.code).toBe('SECRET_NOT_DELIVERABLE');
  });

  it('follows the rollout: each gateway gets the secrets of the version its catalog gives it, and only those', async () => {
    const { path: stable, value: stableValue } = await aDeliverable('stable');
    const { path: next, value: nextValue } = await aDeliverable('next');
    const server = await aLocalServer({ TOKEN: `vault://${stable}` });
    await aLocalServer({ TOKEN: `vault://${next}` }, { name: server, version: '1.1.0', assign: false });
    const started = await cp.request('PUT', `/v1/workspaces/${ws}/servers/${server}/rollout`, {
      body: { version: '1.1.0', groups: ['canary'] },
    });
    expect(started.status, started.text).toBe(200);
    const canary = await aGateway(cp, cp.ownerToken, ws, { groups: ['canary'] });
    const plain = await aGateway(cp, cp.ownerToken, ws);

    const bundle = (await cp.request('GET', '/v1/gateway/policy', { token: plain.token })).body as SignedPolicyBundle;
    expect(bundle.payload.needs_secrets.filter((n) => n.server === server)).toEqual([
      { server, version: '1.0.0', paths: [stable] },
      { server, version: '1.1.0', paths: [next] },
    ]);

    expect((await resolve(canary.token, server, '1.1.0')).body.secrets).toEqual([
      expect.objectContaining({ path: next, value: nextValue }),
    ]);
    expect((await resolve(plain.token, server, '1.0.0')).body.secrets).toEqual([
      expect.objectContaining({ path: stable, value: stableValue }),
    ]);
    const notYours = await refused(plain.token, server, '1.1.0');
    expect([notYours.status, notYours.body.code, notYours.body.version]).toEqual([
      409,
      'GATEWAY_SERVER_VERSION_MISMATCH',
      '1.0.0',
    ]);
    expect((await refused(canary.token, server, '1.0.0')).body.version).toBe('1.1.0');
    expect((await readsOf(next)).map((r) => r.actor)).toEqual([`gateway:${canary.id}`]);
  });

  it('leaves no value in any log line, refusal, catalog, bundle or metadata answer', async () => {
    expect(values.length).toBeGreaterThanOrEqual(8);
    const logs = output.lines();
    // positive controls: the log is the control plane's, at trace level, and has the requests above in it
    expect(logs.some((line) => line.includes('"level":"trace"') || line.includes('"level":"debug"'))).toBe(true);
    expect(logs.some((line) => line.includes('/v1/gateway/secrets/resolve'))).toBe(true);
    expect(answers.length).toBeGreaterThan(10);
    for (const value of values) {
      expect(
        logs.filter((line) => line.includes(value)),
        'log lines',
      ).toEqual([]);
      expect(
        answers.filter((answer) => answer.includes(value)),
        'answers',
      ).toEqual([]);
    }
  });
});
