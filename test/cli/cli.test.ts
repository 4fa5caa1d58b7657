import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { JwtKeys } from '../../libs/auth/src';
import { aGateway, aToken, aUser, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { createPostgresDatabase } from '../support/databases';
import { eventually } from '../support/eventually';
import { ProtectedMcpServer, UpstreamAuthorizationServer } from '../connections/upstream';
import { freePort } from '../support/services';

/**
 * The built CLI as a user runs it: `node bin/aileron-cp.js …` in a directory
 * of its own, with none of the test run's configuration in its environment.
 * Needs `npm run build` first (npm test does it).
 */
const BIN = resolve('bin/aileron-cp.js');
const cwd = mkdtempSync(join(tmpdir(), 'aileron-cli-cwd-'));
const children = new Set<ChildProcess>();

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cliEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const inherited = Object.entries(process.env).filter(
    ([name]) => !/^(AILERON_|DATABASE_|REDIS_URL$|PORT$|HOST$|LOG_LEVEL$)/.test(name),
  );
  return { ...Object.fromEntries(inherited), ...extra };
}

function launch(args: string[], env: Record<string, string>, input?: string): ChildProcess {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd,
    env: cliEnv(env),
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (input !== undefined) child.stdin!.end(input);
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}

function cli(args: string[], env: Record<string, string> = {}, input?: string): Promise<Run> {
  const child = launch(args, env, input);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((done, fail) => {
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line.length > 0);
}

function migrationNames(): string[] {
  return readdirSync(resolve('prisma/migrations'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
}

async function me(url: string, token: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${url}/v1/me`, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, body: await response.json() };
}

beforeAll(() => {
  expect(existsSync(resolve('dist/apps/cli/src/main.js')), 'the CLI is not built: run `npm run build` first').toBe(
    true,
  );
});

afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
});

afterAll(() => rmSync(cwd, { recursive: true, force: true }));

describe('aileron-cp over the REST API', () => {
  let cp: TestControlPlane;
  let api: Record<string, string>;
  beforeAll(async () => {
    cp = await startTestControlPlane('pglite');
    api = { AILERON_URL: cp.url, AILERON_TOKEN: cp.ownerToken };
  });
  afterAll(async () => cp?.close());

  it('creates a workspace and lists it, as a table and as JSON', async () => {
    const slug = uniqueSlug('ws');
    const created = await cli(['workspaces', 'create', slug, '--name', 'Payments team'], api);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(created.stdout).toContain(`created workspace ${slug} ("Payments team"`);

    const table = await cli(['workspaces', 'list'], api);
    expect(table.code).toBe(0);
    const rows = lines(table.stdout);
    expect(rows[0]).toMatch(/^SLUG\s+NAME\s+ROLE\s+CREATED\s+ID$/);
    expect(rows.find((row) => row.startsWith(`${slug} `))).toMatch(/Payments team\s+owner\s/);

    const json = await cli(['workspaces', 'list', '--json'], api);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).workspaces).toContainEqual(
      expect.objectContaining({ slug, name: 'Payments team', role: 'owner' }),
    );
  });

  it('finds the URL in --url and the token in the data directory the control plane wrote it to', async () => {
    const run = await cli(['workspaces', 'list', '--url', cp.url, '--json'], {
      AILERON_DATA_DIR: cp.cp.config.dataDir,
    });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout).workspaces.map((w: { slug: string }) => w.slug)).toContain('default');
  });

  it('creates a token that works, lists it, and revokes it so it gets 401', async () => {
    const workspace = uniqueSlug('ws');
    expect((await cli(['workspaces', 'create', workspace], api)).code).toBe(0);

    const created = await cli(
      ['tokens', 'create', '--name', 'ci', '--role', 'member', '--workspace', workspace, '--expires-in', '3600'],
      api,
    );
    expect(created.code).toBe(0);
    // stdout is the token alone, so TOKEN=$(aileron-cp tokens create …) works
    expect(lines(created.stdout)).toHaveLength(1);
    const token = created.stdout.trim();
    expect(created.stderr).toContain('shown only this once');
    expect(created.stderr).not.toContain(token);
    const before = await me(cp.url, token);
    expect(before.status).toBe(200);
    expect(before.body.workspaces).toEqual([expect.objectContaining({ slug: workspace, role: 'member' })]);

    const listed = await cli(['tokens', 'list', '--json'], api);
    const entry = JSON.parse(listed.stdout).tokens.find((t: { prefix: string }) => token.startsWith(t.prefix));
    expect(entry).toMatchObject({ name: 'ci', role: 'member', workspace, revoked_at: null });
    const table = await cli(['tokens', 'list'], api);
    expect(table.stdout).not.toContain(token);
    expect(lines(table.stdout).find((row) => row.startsWith(entry.id))).toMatch(
      new RegExp(`ci\\s+member\\s+${workspace}\\s+\\S+\\s+active\\s`),
    );

    const revoked = await cli(['tokens', 'revoke', entry.id], api);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout.trim()).toBe(`revoked token ${entry.id}`);
    expect((await me(cp.url, token)).status).toBe(401);
    expect(lines((await cli(['tokens', 'list'], api)).stdout).find((row) => row.startsWith(entry.id))).toMatch(
      /\srevoked\s/,
    );
  });

  it('makes an enrolment code a gateway can exchange once, lists the gateway and revokes it', async () => {
    const workspace = uniqueSlug('ws');
    expect((await cli(['workspaces', 'create', workspace], api)).code).toBe(0);
    const made = await cli(
      [
        'gateways',
        'enroll-code',
        '--workspace',
        workspace,
        '--expires-in',
        '600',
        '--group',
        'canary',
        '--token-expires-in',
        '86400',
      ],
      api,
    );
    expect(made.code, made.stderr).toBe(0);
    const code = made.stdout.trim();
    expect(code).toMatch(/^ail_enr_/);
    expect(made.stderr).toMatch(/the gateway's token will stop working 86400 s after it enrols\n$/);
    const enrolled = await fetch(`${cp.url}/v1/gateway/enroll`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ enrollment_code: code, name: 'build-box' }),
    });
    expect(enrolled.status).toBe(201);
    const {
      gateway_id: id,
      token,
      token_expires_at: expiresAt,
    } = (await enrolled.json()) as { gateway_id: string; token: string; token_expires_at: string };
    expect(Date.parse(expiresAt) - Date.now()).toBeGreaterThan(86_000_000);

    const table = await cli(['gateways', 'list', '--workspace', workspace], api);
    expect(lines(table.stdout).find((row) => row.startsWith(id))).toMatch(/build-box\s+canary\s+active\s/);
    expect((await cli(['gateways', 'revoke', id, '--workspace', workspace], api)).stdout.trim()).toBe(
      `revoked gateway build-box (${id})`,
    );
    const refused = await fetch(`${cp.url}/v1/gateway/policy`, { headers: { authorization: `Bearer ${token}` } });
    expect(refused.status).toBe(401);

    // by person: the gateways a person enrolled, listed and revoked; someone else's stays
    const person = await aUser(cp, cp.ownerToken, 'admin');
    const organization = (await cp.request('GET', '/v1/me')).body.organization.id as string;
    const jwt = (await cp.cp.app.get(JwtKeys).issue({ sub: `user:${person.id}`, org: organization })).token;
    const theirs = await aGateway(cp, jwt, workspace, { name: 'their-laptop' });
    const others = await aGateway(cp, cp.ownerToken, workspace, { name: 'shared-box' });
    const listed = await cli(['gateways', 'list', '--workspace', workspace, '--enrolled-by', person.id, '--json'], api);
    expect(JSON.parse(listed.stdout).gateways.map((g: { id: string }) => g.id)).toEqual([theirs.id]);
    const byPerson = await cli(['gateways', 'revoke', '--workspace', workspace, '--enrolled-by', person.id], api);
    expect(byPerson.stdout.trim(), byPerson.stderr).toBe(`revoked gateway their-laptop (${theirs.id})`);
    const policyWith = (t: string) =>
      fetch(`${cp.url}/v1/gateway/policy`, { headers: { authorization: `Bearer ${t}` } });
    expect((await policyWith(theirs.token)).status).toBe(401);
    expect((await policyWith(others.token)).status).toBe(200);
    const both = await cli(
      ['gateways', 'revoke', others.id, '--workspace', workspace, '--enrolled-by', person.id],
      api,
    );
    expect([both.code, both.stderr]).toEqual([1, 'aileron-cp: give either a gateway id or --enrolled-by <user id>\n']);
  });

  it("rotates a gateway's token: the new one alone on stdout, the old one refused after its grace, an expiry shown", async () => {
    const workspace = uniqueSlug('ws');
    expect((await cli(['workspaces', 'create', workspace], api)).code).toBe(0);
    const gateway = await aGateway(cp, cp.ownerToken, workspace, { name: 'laptop' });
    const policy = (token: string) =>
      fetch(`${cp.url}/v1/gateway/policy`, { headers: { authorization: `Bearer ${token}` } });

    const now = await cli(['gateways', 'rotate', gateway.id, '--workspace', workspace, '--grace', '0'], api);
    expect(now.code, now.stderr).toBe(0);
    expect(lines(now.stdout)).toHaveLength(1);
    const second = now.stdout.trim();
    expect(second).toMatch(/^ail_gw_/);
    expect(now.stderr).toBe(
      `aileron-cp: new token for gateway laptop (${gateway.id}), shown only this once; the old token no longer works, the new one until it is rotated or the gateway revoked\n`,
    );
    expect((await policy(second)).status).toBe(200);
    expect((await policy(gateway.token)).status).toBe(401);

    const later = await cli(
      ['gateways', 'rotate', gateway.id, '--workspace', workspace, '--grace', '600', '--expires-in', '86400', '--json'],
      api,
    );
    expect(later.code, later.stderr).toBe(0);
    const rotated = JSON.parse(later.stdout) as {
      token: string;
      token_expires_at: string;
      previous_token_valid_until: string;
    };
    expect(Date.parse(rotated.token_expires_at) - Date.now()).toBeGreaterThan(86_000_000);
    expect(Date.parse(rotated.previous_token_valid_until) - Date.now()).toBeGreaterThan(590_000);
    // within its grace the replaced token still works, and so does the new one
    expect((await policy(second)).status).toBe(200);
    expect((await policy(rotated.token)).status).toBe(200);
    const table = await cli(['gateways', 'list', '--workspace', workspace], api);
    expect(lines(table.stdout)[0]).toMatch(/\sTOKEN EXPIRES$/);
    expect(lines(table.stdout).find((row) => row.startsWith(gateway.id))).toContain(
      rotated.token_expires_at.replace(/\.\d+Z$/, 'Z'),
    );
    expect(table.stdout + later.stderr).not.toContain(rotated.token);

    const usage = await cli(['gateways', 'rotate', gateway.id, '--workspace', workspace, '--grace', 'soon'], api);
    expect(usage.code).toBe(1);
    expect(usage.stderr).toMatch(/^aileron-cp: option '--grace <seconds>' argument 'soon' is invalid/);
    const tooLong = await cli(
      ['gateways', 'rotate', gateway.id, '--workspace', workspace, '--grace', '999999999'],
      api,
    );
    expect(tooLong.code).toBe(1);
    expect(tooLong.stderr).toMatch(/^aileron-cp: VALIDATION_FAILED: body\.grace_seconds/);
  });

  it('marks a secret deliverable to gateways on write, changes that without a new value, and the audit log has each change', async () => {
    const workspace = uniqueSlug('ws');
    await cli(['workspaces', 'create', workspace], api);
    const file = join(cwd, `${workspace}.deliverable`);
    writeFileSync(file, 'a-value-for-gateways\n');
    const put = (...flags: string[]) =>
      cli(['secrets', 'put', 'jira/token', '--workspace', workspace, '--from-file', file, ...flags], api);
    const delivery = async () =>
      (
        JSON.parse((await cli(['secrets', 'list', '--workspace', workspace, '--json'], api)).stdout).secrets as {
          path: string;
          deliver_to_gateways: boolean;
        }[]
      ).find((secret) => secret.path === 'jira/token')?.deliver_to_gateways;

    expect((await put('--deliver-to-gateways')).stdout.trim()).toBe(
      'vault://jira/token version 1 written; gateways may receive it',
    );
    expect(await delivery()).toBe(true);
    expect(lines((await cli(['secrets', 'list', '--workspace', workspace], api)).stdout)[1]).toMatch(
      /^jira\/token\s+1\s+1\s+yes\s/,
    );
    // a new value without the flag keeps what the secret had
    expect((await put()).stdout.trim()).toBe('vault://jira/token version 2 written; gateways may receive it');
    expect(await delivery()).toBe(true);

    const off = await cli(['secrets', 'delivery', 'jira/token', 'off', '--workspace', workspace], api);
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout.trim()).toBe('vault://jira/token; gateways may not receive it');
    expect(await delivery()).toBe(false);
    expect((await put('--deliver-to-gateways')).stdout.trim()).toBe(
      'vault://jira/token version 3 written; gateways may receive it',
    );
    expect((await put('--no-deliver-to-gateways')).stdout.trim()).toBe(
      'vault://jira/token version 4 written; gateways may not receive it',
    );

    const exported = await cli(['audit', 'export', '--workspace', workspace], api);
    const changes = lines(exported.stdout)
      .map((line) => JSON.parse(line) as { type: string; data: Record<string, unknown> })
      .filter((r) => r.type === 'secret.delivery_changed')
      .map((r) => [r.data.deliver_to_gateways, r.data.previous]);
    expect(changes).toEqual([
      [true, false],
      [false, true],
      [true, false],
      [false, true],
    ]);

    const bad = await cli(['secrets', 'delivery', 'jira/token', 'maybe', '--workspace', workspace], api);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^aileron-cp: command-argument value 'maybe' is invalid for argument 'on\|off'\. must be on or off\./,
    );
    const missing = await cli(['secrets', 'delivery', 'nope/none', 'on', '--workspace', workspace], api);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^aileron-cp: SECRET_NOT_FOUND: /);
    for (const run of [exported, off]) expect(run.stdout + run.stderr).not.toContain('a-value-for-gateways');
  });

  it('puts a YAML policy from a file and evaluates a call against it', async () => {
    const workspace = uniqueSlug('ws');
    await cli(['workspaces', 'create', workspace], api);
    const file = join(cwd, `${workspace}.yaml`);
    writeFileSync(
      file,
      'rules:\n  - id: no-deletes\n    effect: deny\n    tools: ["delete_*"]\n  - id: reads\n    effect: allow\n    tools: ["get_*"]\n',
    );
    const put = await cli(['policy', 'put', file, '--workspace', workspace], api);
    expect(put.stdout.trim()).toBe('policy version 1 is in force');
    expect((await cli(['policy', 'put', file, '--workspace', workspace], api)).stdout.trim()).toBe(
      'unchanged: version 1 is already this document',
    );

    const denied = await cli(
      ['policy', 'evaluate', '--workspace', workspace, '--server', 'github', '--tool', 'delete_repo'],
      api,
    );
    expect(denied.stdout.trim()).toBe('deny (by rule no-deletes; policy version 1)');
    const allowed = await cli(
      ['policy', 'evaluate', '--workspace', workspace, '--server', 'github', '--tool', 'get_issue', '--json'],
      api,
    );
    expect(JSON.parse(allowed.stdout)).toMatchObject({ decision: 'allow', rules: ['reads'] });

    writeFileSync(file, 'rules:\n  - id: broken\n    effect: sometimes\n');
    const bad = await cli(['policy', 'put', file, '--workspace', workspace], api);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^aileron-cp: POLICY_INVALID: body\.rules\[0\]\.effect \[rule broken\]: .+\n$/);
  });

  it('writes a secret from a file without ever printing it, lists it, verifies and exports the audit log', async () => {
    const workspace = uniqueSlug('ws');
    await cli(['workspaces', 'create', workspace], api);
    const value = `cli-secret-${uniqueSlug('v')}`;
    const file = join(cwd, `${workspace}.secret`);
    writeFileSync(file, `${value}\n`);
    const put = await cli(['secrets', 'put', 'github/token', '--workspace', workspace, '--from-file', file], api);
    expect(put.code).toBe(0);
    expect(put.stdout.trim()).toBe('vault://github/token version 1 written; gateways may not receive it');
    const list = await cli(['secrets', 'list', '--workspace', workspace], api);
    expect(lines(list.stdout)[1]).toMatch(/^github\/token\s+1\s+1\s/);
    const rotated = await cli(['secrets', 'rotate-key', '--workspace', workspace], api);
    expect(rotated.stdout.trim()).toBe('vault key version 2; 1 data key(s) re-wrapped');

    const verify = await cli(['audit', 'verify', '--workspace', workspace], api);
    expect(verify.code).toBe(0);
    expect(verify.stdout.trim()).toMatch(/^ok: 3 record\(s\), \d+ signed checkpoint\(s\)$/);
    const exported = await cli(['audit', 'export', '--workspace', workspace], api);
    const records = lines(exported.stdout).map((line) => JSON.parse(line) as { type: string; seq: number });
    expect(records.map((r) => r.type)).toEqual(['workspace.created', 'secret.written', 'vault.key_rotated']);
    const csv = await cli(['audit', 'export', '--workspace', workspace, '--format', 'csv'], api);
    expect(lines(csv.stdout)).toHaveLength(4);
    for (const run of [put, list, rotated, verify, exported, csv]) expect(run.stdout + run.stderr).not.toContain(value);
  });

  it('lists approval requests, approves and denies them (quorum included), and watches the inbox for new ones', async () => {
    const workspace = uniqueSlug('ws');
    await cli(['workspaces', 'create', workspace], api);
    const policy = await cp.request('PUT', `/v1/workspaces/${workspace}/policy`, {
      body: {
        rules: [
          { id: 'releases-need-approval', effect: 'approval', servers: ['deploy'], tools: ['release'] },
          {
            id: 'hotfixes-need-two',
            effect: 'approval',
            approval_route: 'two',
            servers: ['deploy'],
            tools: ['hotfix'],
          },
        ],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    const routes = await cp.request('PUT', `/v1/workspaces/${workspace}/approval-routes`, {
      body: { routes: { two: { approvers: [{ role: 'owner' }, { role: 'admin' }], quorum: 2 } } },
    });
    expect(routes.status, routes.text).toBe(200);
    const gateway = await aGateway(cp, cp.ownerToken, workspace);
    const ask = async (session: string, tool = 'release'): Promise<{ id: string; review_url: string }> => {
      const res = await cp.request('POST', '/v1/gateway/approvals', {
        token: gateway.token,
        body: { server: 'deploy', tool, arguments: { version: '2.4.1' }, session, principal: 'alice@example.com' },
      });
      expect(res.status, res.text).toBe(201);
      return res.body;
    };
    const first = await ask('s-1');
    const second = await ask('s-2');

    // oldest first, each with the page where it is decided
    const once = await cli(['approvals', 'watch', '--workspace', workspace, '--once'], api);
    expect(once.code, once.stderr).toBe(0);
    const printed = lines(once.stdout);
    expect(printed).toHaveLength(2);
    expect(printed[0]).toMatch(
      new RegExp(
        `^${first.id}  deploy/release for alice@example.com \\(rule releases-need-approval; 1 approval needed; expires \\S+Z\\)  ${first.review_url}$`,
      ),
    );
    expect(printed[1]).toContain(second.id);

    const table = await cli(['approvals', 'list', '--workspace', workspace, '--status', 'pending'], api);
    const rows = lines(table.stdout);
    expect(rows[0]).toMatch(/^ID\s+STATUS\s+CALL\s+REQUESTER\s+RULES\s+ROUTE\s+APPROVALS\s+EXPIRES\s+CREATED$/);
    expect(rows.find((row) => row.startsWith(first.id))).toMatch(
      /\spending\s+deploy\/release\s+alice@example\.com\s+releases-need-approval\s+workspace-admins\s+0\/1\s/,
    );

    const approved = await cli(['approvals', 'approve', first.id, '--reason', 'checked the diff'], api);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(
      new RegExp(`^approved ${first.id}: deploy/release for alice@example.com may run once, until \\S+Z\n$`),
    );
    const denied = await cli(['approvals', 'deny', second.id, '--reason', 'not today'], api);
    expect(denied.stdout).toBe(`denied ${second.id}: deploy/release for alice@example.com\n`);
    const decisions = await Promise.all(
      [first.id, second.id].map(async (id) => (await cp.request('GET', `/v1/approvals/${id}`)).body.decisions),
    );
    expect(decisions).toEqual([
      [expect.objectContaining({ decision: 'approve', reason: 'checked the diff', via: 'cli' })],
      [expect.objectContaining({ decision: 'deny', reason: 'not today', via: 'cli' })],
    ]);
    const late = await cli(['approvals', 'approve', second.id], api);
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/^aileron-cp: APPROVAL_ALREADY_DECIDED: .*denied.*\n$/);

    // a quorum of two: the first approval is recorded, the second decides
    const hotfix = await ask('s-3', 'hotfix');
    const admin = await aToken(cp, cp.ownerToken, { role: 'admin', workspace });
    expect((await cli(['approvals', 'approve', hotfix.id], api)).stdout).toBe(
      `recorded your approval of ${hotfix.id} (deploy/hotfix for alice@example.com): 1 of 2 approvals, still pending\n`,
    );
    expect((await cli(['approvals', 'approve', hotfix.id], { ...api, AILERON_TOKEN: admin.token })).stdout).toMatch(
      new RegExp(`^approved ${hotfix.id}: `),
    );

    expect((await cli(['approvals', 'list', '--workspace', workspace, '--status', 'pending'], api)).stdout).toBe(
      'no pending approval requests\n',
    );
    const all = JSON.parse(
      (await cli(['approvals', 'list', '--workspace', workspace, '--json'], api)).stdout,
    ).approvals;
    expect(all.map((r: { id: string; status: string }) => [r.id, r.status])).toEqual([
      [hotfix.id, 'approved'],
      [second.id, 'denied'],
      [first.id, 'approved'],
    ]);
    const none = await cli(['approvals', 'watch', '--workspace', workspace, '--once'], api);
    expect(none.stdout).toBe('');
    expect(none.stderr).toBe(`aileron-cp: no pending approval requests in workspace ${workspace}\n`);
    const bad = await cli(['approvals', 'list', '--workspace', workspace, '--status', 'open'], api);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^aileron-cp: option '--status <status>' argument 'open' is invalid/);

    // without --once it keeps watching: a request made later is printed as it arrives; Ctrl-C ends it
    const watcher = launch(['approvals', 'watch', '--workspace', workspace], api);
    let output = '';
    let notes = '';
    watcher.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    watcher.stderr!.on('data', (chunk: Buffer) => (notes += chunk.toString()));
    const exited = new Promise<number | null>((done) => watcher.on('close', done));
    // it says so once its first look is done: the request below comes after that look
    await eventually('the watcher to start watching', () => notes.includes('watching workspace'));
    const later = await ask('s-4');
    await eventually('the new request in the output', () => output.includes(later.id));
    expect(lines(output)).toEqual([
      expect.stringMatching(new RegExp(`^${later.id}  deploy/release for alice@example.com .*  ${later.review_url}$`)),
    ]);
    watcher.kill('SIGINT');
    expect(await exited).toBe(0);
  });

  it('reports a rejected request as one line with the problem code and detail, and exits 1', async () => {
    const bad = await cli(['workspaces', 'create', 'Not A Slug'], api);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toBe('');
    expect(lines(bad.stderr)).toHaveLength(1);
    expect(bad.stderr).toMatch(/^aileron-cp: VALIDATION_FAILED: body\.slug: .+\n$/);

    const slug = uniqueSlug('ws');
    await cli(['workspaces', 'create', slug], api);
    const taken = await cli(['workspaces', 'create', slug], api);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toBe(`aileron-cp: WORKSPACE_SLUG_TAKEN: A workspace with slug "${slug}" already exists\n`);
  });

  it('prints where to connect a server that signs in with OAuth, lists connections without tokens, ends one', async () => {
    const as = new UpstreamAuthorizationServer();
    const mcp = new ProtectedMcpServer(as);
    await mcp.start();
    await as.start(() => mcp.resource);
    try {
      const workspace = uniqueSlug('ws');
      expect((await cli(['workspaces', 'create', workspace], api)).code).toBe(0);
      const server = uniqueSlug('up');
      const published = await cp.request('POST', '/v1/catalog/servers', {
        body: { name: server, version: '1.0.0', mode: 'remote', url: mcp.url, auth: 'oauth' },
      });
      expect(published.status, published.text).toBe(201);
      await cp.request('PUT', `/v1/workspaces/${workspace}/servers/${server}`, { body: { version: '1.0.0' } });

      const connect = await cli(['connections', 'connect', server, '--workspace', workspace], api);
      expect(connect.code, connect.stderr).toBe(0);
      // the URL alone on stdout, for `xdg-open "$(…)"`
      expect(connect.stdout).toBe(
        `${cp.cp.config.publicUrl}/oauth/connections/connect?workspace=${workspace}&server=${server}\n`,
      );
      expect(connect.stderr).toContain(`then ${as.issuer} asks you to allow Aileron (registered: dynamic)`);
      expect((await cli(['connections', 'list', '--workspace', workspace], api)).stdout).toBe('no connections\n');

      // a connection as the callback leaves one (test/connections signs in for real)
      const [row] = await cp.cp.database.client.$queryRawUnsafe<{ id: string }[]>(
        `INSERT INTO upstream_connections (id, organization_id, workspace_id, server, subject, state, upstream, has_refresh_token, created_by, connected_at, problem)
           SELECT gen_random_uuid(), organization_id, id, $2, 'workspace', 'needs_reconnect', $3::jsonb, true, 'user:someone', now(), 'the authorization server refused the refresh token (invalid_grant)'
             FROM workspaces WHERE slug = $1 RETURNING id`,
        workspace,
        server,
        JSON.stringify({
          authorizationServer: as.issuer,
          metadata: null,
          resource: mcp.resource,
          redirectUri: `${cp.url}/oauth/connections/callback`,
          client: { client_id: 'pool', registration: 'dynamic', secret: null },
        }),
      );
      const listed = await cli(['connections', 'list', '--workspace', workspace], api);
      expect(lines(listed.stdout)[0]).toMatch(
        /^ID\s+SERVER\s+FOR\s+STATE\s+AUTHORIZATION SERVER\s+EXPIRES\s+LAST USED$/,
      );
      expect(lines(listed.stdout)[1]).toMatch(
        new RegExp(`^${row!.id}\\s+${server}\\s+workspace\\s+needs_reconnect \\(the authorization server refused`),
      );
      const deleted = await cli(['connections', 'delete', row!.id, '--workspace', workspace], api);
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(deleted.stdout).toBe(
        `deleted connection ${row!.id} to ${server}; the upstream could not be told (it has no revocation endpoint, or did not answer)\n`,
      );
      const again = await cli(['connections', 'delete', row!.id, '--workspace', workspace], api);
      expect(again.code).toBe(1);
      expect(again.stderr).toBe(`aileron-cp: CONNECTION_NOT_FOUND: connection "${row!.id}" does not exist\n`);
    } finally {
      await as.stop();
      await mcp.stop();
    }
  });

  it('starts, lists and ends agent sessions, and narrows a caveat token offline', async () => {
    const workspace = uniqueSlug('ws');
    expect((await cli(['workspaces', 'create', workspace], api)).code).toBe(0);
    const started = await cli(
      [
        'sessions',
        'start',
        '--workspace',
        workspace,
        '--name',
        'fix the build',
        '--agent',
        'codex',
        '--ttl',
        '3600',
        '--tool',
        'memory__*',
      ],
      api,
    );
    expect(started.code, started.stderr).toBe(0);
    // stdout is the token alone, so AILERON_TOKEN=$(aileron-cp sessions start …) works
    expect(lines(started.stdout)).toHaveLength(1);
    const token = started.stdout.trim();
    expect(token).toMatch(/^ail_ct_/);
    const id = /started session ([0-9a-f-]{36})/.exec(started.stderr)?.[1];
    expect(id, started.stderr).toBeDefined();
    expect(started.stderr).not.toContain(token);

    const listed = await cli(['sessions', 'list', '--workspace', workspace], api);
    expect(listed.code).toBe(0);
    expect(lines(listed.stdout).find((row) => row.startsWith(id!))).toMatch(
      /fix the build\s+codex\s+live\s+actions:list,actions:run,approvals:poll,comms\s/,
    );
    const json = JSON.parse((await cli(['sessions', 'list', '--workspace', workspace, '--json'], api)).stdout);
    expect(json.sessions).toEqual([expect.objectContaining({ id, caveats: ['tools in memory__*'] })]);

    const config = await cli(['sessions', 'agent-config', id!, '--agent', 'codex'], api);
    expect(config.code, config.stderr).toBe(0);
    expect(config.stdout).toMatch(/^# Aileron.*\ncli_auth_credentials_store = "file"\n/);
    expect(config.stdout).toContain(`AILERON_SESSION_ID = "${id}"`);
    expect(config.stdout).not.toContain(token);
    expect(config.stderr).toMatch(/^aileron-cp: for \$CODEX_HOME\/config\.toml/);

    const say = (t: string) =>
      fetch(`${cp.url}/v1/sessions/${id}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hello' }),
      });
    expect((await say(token)).status).toBe(201);
    // narrowed offline to listing actions: the channel is closed to it; read from stdin, so the token stays out of argv
    const narrowed = await cli(
      ['sessions', 'attenuate', '-', '--caps', 'actions:list', '--expires-in', '600'],
      {},
      `${token}\n`,
    );
    expect(narrowed.code, narrowed.stderr).toBe(0);
    expect(narrowed.stdout.trim()).toMatch(/^ail_ct_/);
    expect(narrowed.stdout.trim()).not.toBe(token);
    const refused = await say(narrowed.stdout.trim());
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { code: string }).code).toBe('CAPABILITY_REQUIRED');
    // a tampered token does not attenuate into a valid one: it does not even parse
    const broken = await cli(['sessions', 'attenuate', 'ail_ct_not-a-token', '--server', 'memory'], {});
    expect(broken.code).toBe(1);
    expect(broken.stderr).toBe('aileron-cp: TOKEN_INVALID: The token is malformed\n');
    const nothing = await cli(['sessions', 'attenuate', token], {});
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toMatch(/^aileron-cp: nothing to narrow/);

    const ended = await cli(['sessions', 'end', id!], api);
    expect(ended.code, ended.stderr).toBe(0);
    expect(ended.stdout.trim()).toBe(`ended session ${id}`);
    const after = await say(token);
    expect(after.status).toBe(401);
    expect(((await after.json()) as { code: string }).code).toBe('SESSION_ENDED');
    expect((await cli(['sessions', 'list', '--workspace', workspace], api)).stdout.trim()).toBe('no sessions');
  });

  it('never repeats the token it was given in an error', async () => {
    const token = `ail_api_${randomBytes(24).toString('base64url')}`;
    const run = await cli(['tokens', 'list', '--token', token], { AILERON_URL: cp.url });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^aileron-cp: [A-Z_]+: /);
    expect(run.stderr).not.toContain(token);
  });

  it('says in one line when it cannot reach the control plane', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const run = await cli(['tokens', 'list'], { AILERON_URL: url, AILERON_TOKEN: cp.ownerToken });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(`aileron-cp: cannot reach ${url} (ECONNREFUSED)\n`);
  });

  it('says where a redirect points instead of following it with the token', async () => {
    const seen: (string | undefined)[] = [];
    const moved = createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.writeHead(308, { location: 'https://aileron.example.test/v1/tokens' }).end();
    });
    await new Promise<void>((ready) => moved.listen(0, '127.0.0.1', ready));
    try {
      const url = `http://127.0.0.1:${(moved.address() as AddressInfo).port}`;
      const run = await cli(['tokens', 'list'], { AILERON_URL: url, AILERON_TOKEN: cp.ownerToken });
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        `aileron-cp: GET ${url}/v1/tokens?limit=200 answered HTTP 308, moved to https://aileron.example.test/v1/tokens: give that address (--url or AILERON_URL)\n`,
      );
      // asked once, where it was told to: the token went nowhere else
      expect(seen).toEqual([`Bearer ${cp.ownerToken}`]);
    } finally {
      await new Promise((closed) => moved.close(closed));
    }
  });

  it('says where to find a token when it has none', async () => {
    const run = await cli(['workspaces', 'list'], { AILERON_URL: cp.url });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^aileron-cp: no API token: pass --token, set AILERON_TOKEN, or set AILERON_DATA_DIR .*\n$/,
    );
  });

  it('rejects usage errors in the same one-line form', async () => {
    const run = await cli(['tokens', 'create', '--name', 'x', '--role', 'member', '--expires-in', 'soon'], api);
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^aileron-cp: option '--expires-in <seconds>' argument 'soon' is invalid/);
  });

  it('will not migrate a PGlite data directory a running control plane holds', async () => {
    const run = await cli(['migrate'], { AILERON_DATA_DIR: cp.cp.config.dataDir });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `aileron-cp: another control plane (pid ${process.pid}) is using ${cp.cp.config.dataDir}; stop it first or set AILERON_DATA_DIR\n`,
    );
  });
});

describe('aileron-cp bootstrap and start in the server mode', () => {
  let database: { url: string; drop(): Promise<void> };
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-cli-data-'));
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints only the owner token, which works once the control plane runs; a second bootstrap is refused', async () => {
    const first = await cli(['bootstrap', '--org', 'acme', '--name', 'Acme Ltd'], { DATABASE_URL: database.url });
    expect(first.code, first.stderr).toBe(0);
    expect(lines(first.stdout)).toHaveLength(1);
    const token = first.stdout.trim();
    expect(first.stderr).toContain('created organisation "acme"');

    const again = await cli(['bootstrap'], { DATABASE_URL: database.url });
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(again.stderr).toMatch(/^aileron-cp: ALREADY_BOOTSTRAPPED: [^\n]+\n$/);

    const port = await freePort();
    const server = launch(['start'], {
      DATABASE_URL: database.url,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      AILERON_DATA_DIR: dataDir,
    });
    let banner = '';
    const url = await new Promise<string>((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`no banner within 60 s: ${banner}`)), 60_000);
      server.stdout!.on('data', (chunk: Buffer) => {
        banner += chunk.toString();
        const match = /listening on (http:\/\/\S+)/.exec(banner);
        if (match) {
          clearTimeout(timer);
          done(match[1]!);
        }
      });
      server.on('exit', (code) => fail(new Error(`start exited with ${code}: ${banner}`)));
    });
    expect(banner).toContain('aileron control plane (server mode) listening on');
    expect(url).toBe(`http://127.0.0.1:${port}`);

    const caller = await me(url, token);
    expect(caller.status).toBe(200);
    expect(caller.body).toMatchObject({
      organization: { slug: 'acme', name: 'Acme Ltd' },
      role: 'owner',
      platform_operator: true,
      workspaces: [{ slug: 'default', role: 'owner' }],
    });

    const exited = new Promise<number | null>((done) => server.on('exit', (code) => done(code)));
    server.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('refuses a slug the API would refuse, before touching the database', async () => {
    const run = await cli(['bootstrap', '--org', 'Acme Ltd'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^aileron-cp: VALIDATION_FAILED: --org: must be 1-63 lowercase letters[^\n]*\n$/);
  });

  it('is refused in the embedded mode, which bootstraps itself', async () => {
    const run = await cli(['bootstrap'], { AILERON_DATA_DIR: dataDir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^aileron-cp: SERVER_MODE_ONLY: [^\n]+\n$/);
  });
});

describe('aileron-cp migrate', () => {
  it('applies every migration to an empty PostgreSQL database, then finds it up to date', async () => {
    const adminUrl = inject('postgresAdminUrl');
    const name = `cli_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      const env = { DATABASE_URL: url.toString() };

      const first = await cli(['migrate'], env);
      expect(first.code, first.stderr).toBe(0);
      expect(lines(first.stdout)).toEqual(
        migrationNames().map((m) => expect.stringMatching(new RegExp(`^applied ${m} to postgres`))),
      );
      if (url.password) expect(first.stdout).not.toContain(url.password);

      const second = await cli(['migrate'], env);
      expect(second.code, second.stderr).toBe(0);
      expect(second.stdout).toMatch(/^up to date: postgres:\/\/\S+ has all \d+ migrations?\n$/);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  });

  it('creates and migrates the embedded PGlite database, then finds it up to date', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'aileron-cli-pglite-'));
    try {
      const first = await cli(['migrate'], { AILERON_DATA_DIR: dataDir });
      expect(first.code, first.stderr).toBe(0);
      expect(lines(first.stdout)).toEqual(
        migrationNames().map((m) => `applied ${m} to the PGlite database in ${join(dataDir, 'pgdata')}`),
      );

      const second = await cli(['migrate'], { AILERON_DATA_DIR: dataDir });
      expect(second.code, second.stderr).toBe(0);
      const count = migrationNames().length;
      expect(second.stdout).toBe(
        `up to date: the PGlite database in ${join(dataDir, 'pgdata')} has all ${count} migration${count === 1 ? '' : 's'}\n`,
      );
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
