import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  type ClientCapabilities,
  ElicitationCompleteNotificationSchema,
  ElicitRequestSchema,
  EmptyResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalsService } from '@aileron/approvals';
import { McpSessions } from '@aileron/pool';
import { People } from '../approvals/people';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { aToken, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';

/**
 * aileron-mcp as a sandbox runs it: the bundle alone, copied into an empty
 * directory (no node_modules anywhere near it), started by the SDK's stdio
 * client with the environment the session's agent-config snippet names.
 * Needs `npm run build` first (npm test does it).
 */
const BUNDLE = resolve('dist/aileron-mcp.cjs');
const VERSION = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
const sandbox = mkdtempSync(join(tmpdir(), 'aileron-mcp-sandbox-'));
const copied = join(sandbox, 'aileron-mcp');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program with only the environment given (and PATH), to its end. */
function run(command: string, args: string[], env: Record<string, string>): Promise<Run> {
  const child = spawn(command, args, {
    cwd: sandbox,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((done, fail) => {
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

function refusalOf(result: unknown): { code: string; approval_id: string; review_url: string } | undefined {
  return (
    ((result as { _meta?: Record<string, unknown> })._meta?.['aileron/refusal'] as
      | { code: string; approval_id: string; review_url: string }
      | undefined) ?? undefined
  );
}

beforeAll(() => {
  expect(existsSync(BUNDLE), 'aileron-mcp is not bundled: run `npm run build` first').toBe(true);
  copyFileSync(BUNDLE, copied);
});
afterAll(() => rmSync(sandbox, { recursive: true, force: true }));

describe('the aileron-mcp bundle on its own', () => {
  it('prints its version from an empty directory, as a launcher smoke-checks it', async () => {
    for (const [command, args] of [
      [process.execPath, [copied, '--version']],
      [process.execPath, [resolve('bin/aileron-mcp'), '--version']],
      [process.execPath, [resolve('bin/aileron-cp.js'), 'mcp', '--version']],
    ] as const) {
      const result = await run(command, [...args], {});
      expect(result, args.join(' ')).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
    }
  });

  it('says which setting is missing or wrong, and exits 78', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{}, /^aileron-mcp: AILERON_URL is not set: /],
      [{ AILERON_URL: 'ftp://cp' }, /^aileron-mcp: AILERON_URL must be http:\/\/ or https:\/\//],
      [{ AILERON_URL: 'http://127.0.0.1:9' }, /^aileron-mcp: AILERON_TOKEN is not set: /],
      [
        { AILERON_URL: 'http://127.0.0.1:9', AILERON_TOKEN: 'ail_api_x' },
        /^aileron-mcp: AILERON_TOKEN is not a session caveat token/,
      ],
      [
        { AILERON_URL: 'http://127.0.0.1:9', AILERON_TOKEN: 'ail_ct_!!' },
        /^aileron-mcp: AILERON_TOKEN is not a well-formed session token \(TOKEN_INVALID\)/,
      ],
    ];
    for (const [env, message] of cases) {
      const result = await run(process.execPath, [copied], env);
      expect(result.code, JSON.stringify(env)).toBe(78);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(message);
      expect(result.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    }
  });
});

/**
 * For the describe block that calls it: a control plane with `env`, people
 * who sign in to it (approvers), and the clients a test opened, closed after.
 */
function withControlPlane(
  env: Record<string, string>,
  started: (cp: TestControlPlane) => void,
): { people: People; clients: Client[] } {
  const people = new People();
  const clients: Client[] = [];
  let cp: TestControlPlane | undefined;
  beforeAll(async () => {
    cp = await startApiControlPlane(env);
    started(cp);
    await people.start();
    await people.trustedBy(cp);
  });
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
    await people.stop();
  });
  return { people, clients };
}

describe('aileron-mcp against a running control plane', () => {
  let cp: TestControlPlane;
  const { people, clients } = withControlPlane(
    { AILERON_POOL_APPROVAL_WAIT_SECONDS: '0' },
    (started) => (cp = started),
  );

  /** A session of the owner's in a fresh workspace, and its agent-config as Claude reads it. */
  async function aSession(
    ws: string,
    caps?: string[],
  ): Promise<{ id: string; token: string; env: Record<string, string> }> {
    const started = await cp.request('POST', '/v1/sessions', {
      body: { workspace: ws, name: 'aileron-mcp test', agent: 'claude', ...(caps ? { caps } : {}) },
    });
    expect(started.status, started.text).toBe(201);
    const config = await cp.request('GET', `/v1/sessions/${started.body.id}/agent-config?agent=claude`);
    expect(config.status, config.text).toBe(200);
    const server = JSON.parse(config.body.content).mcpServers.aileron as {
      command: string;
      env: Record<string, string>;
    };
    expect(server.command).toBe('aileron-mcp');
    expect(server.env).toEqual({
      AILERON_URL: cp.cp.config.publicUrl,
      AILERON_SESSION_ID: started.body.id,
      AILERON_WORKSPACE: ws,
      AILERON_TOKEN: '${AILERON_TOKEN}',
    });
    // what Claude does with the snippet: ${AILERON_TOKEN} from its environment; the test's control plane is not at the public URL
    return {
      id: started.body.id,
      token: started.body.caveat_token,
      env: { ...server.env, AILERON_TOKEN: started.body.caveat_token, AILERON_URL: cp.url },
    };
  }

  async function connectAgent(
    env: Record<string, string>,
    capabilities: ClientCapabilities = {},
  ): Promise<{ client: Client; stderr: () => string }> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [copied],
      env,
      cwd: sandbox,
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const client = new Client({ name: 'agent', version: '1.0.0' }, { capabilities });
    await client.connect(transport);
    clients.push(client);
    return { client, stderr: () => stderr };
  }

  it('answers the agent-config snippet to who may read the session, never to its token, never with the token', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const { id, token } = await aSession(ws.slug);
    for (const agent of ['claude', 'codex', 'opencode', 'goose']) {
      const res = await cp.request(
        'GET',
        `/v1/sessions/${id}/agent-config?agent=${agent}&command=/opt/aileron/aileron-mcp`,
      );
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ agent, content: expect.stringContaining('/opt/aileron/aileron-mcp') });
      expect(res.body.content).toContain(id);
      expect(res.text).not.toContain(token);
    }
    expect((await cp.request('GET', `/v1/sessions/${id}/agent-config?agent=codex`)).body.content).toContain(
      '[mcp_servers.aileron]',
    );

    const ownToken = await cp.request('GET', `/v1/sessions/${id}/agent-config`, { token });
    expect(ownToken.status).toBe(403);
    expect(ownToken.body.code).toBe('CAPABILITY_REQUIRED');
    const other = await aWorkspace(cp, cp.ownerToken);
    const outsider = await aToken(cp, cp.ownerToken, { role: 'admin', workspace: other.slug });
    expect((await cp.request('GET', `/v1/sessions/${id}/agent-config`, { token: outsider.token })).status).toBe(404);
    for (const query of ['agent=cursor', 'command=rm%20-rf', 'command=../x', 'extra=1']) {
      const bad = await cp.request('GET', `/v1/sessions/${id}/agent-config?${query}`);
      expect(bad.status, query).toBe(400);
      expect(bad.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await cp.request('DELETE', `/v1/sessions/${id}`)).status).toBe(200);
    const ended = await cp.request('GET', `/v1/sessions/${id}/agent-config`);
    expect(ended.status).toBe(409);
    expect(ended.body.code).toBe('SESSION_CLOSED');
  });

  it("lists and calls the workspace's tools as the session, waits on an approval, and messages its people", async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const memory = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.memory, 'memory');
    await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything, 'everything');
    const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: {
        default: 'allow',
        rules: [{ id: 'writes-need-approval', effect: 'approval', servers: [memory], tools: ['create_entities'] }],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    const approver = await people.aPerson(cp, ws.slug, 'approver');
    const session = await aSession(ws.slug);
    // the token names its session and the snippet its workspace: a launcher that mixes them up is told so
    for (const [name, value, message] of [
      [
        'AILERON_SESSION_ID',
        '00000000-0000-4000-8000-000000000000',
        /^aileron-mcp: AILERON_SESSION_ID \(0{8}-.*\) is not the session AILERON_TOKEN belongs to/,
      ],
      ['AILERON_WORKSPACE', '', /^aileron-mcp: AILERON_WORKSPACE is not set: /],
    ] as const) {
      const misconfigured = await run(process.execPath, [copied], { ...session.env, [name]: value });
      expect(misconfigured.code).toBe(78);
      expect(misconfigured.stderr).toMatch(message);
      expect(misconfigured.stderr).not.toContain(session.token);
    }
    const { client, stderr } = await connectAgent(session.env);
    expect(client.getServerVersion()).toMatchObject({ name: 'aileron', version: VERSION });

    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names, stderr()).toEqual(
      expect.arrayContaining([
        'memory__read_graph',
        'memory__create_entities',
        'everything__echo',
        'approval_status',
        'message_user',
      ]),
    );

    const graph = await client.callTool({ name: 'memory__read_graph', arguments: {} });
    expect(graph.isError, textOf(graph)).toBeFalsy();
    // progress comes back under the agent's own progress token
    const progress: unknown[] = [];
    const long = await client.callTool(
      { name: 'everything__trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    expect(long.isError, textOf(long)).toBeFalsy();
    // the last notification may share a read with the answer, and the SDK client drops it then
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress).toEqual(progress.map((_, i) => ({ progress: i + 1, total: 4 })));

    // approval: the call says so, with the review URL, as the pool answered it
    const entities = { entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] };
    const pending = await client.callTool({ name: 'memory__create_entities', arguments: entities });
    expect(pending.isError).toBe(true);
    const refusal = refusalOf(pending);
    expect(refusal?.code, textOf(pending)).toBe('APPROVAL_PENDING');
    expect(textOf(pending)).toContain(refusal!.review_url);

    const status = await client.callTool({ name: 'approval_status', arguments: { approval_id: refusal!.approval_id } });
    expect(status.isError, textOf(status)).toBeFalsy();
    expect(status.structuredContent).toMatchObject({
      approval_id: refusal!.approval_id,
      status: 'pending',
      tool: 'memory__create_entities',
      review_url: refusal!.review_url,
    });
    expect(textOf(status)).toContain(refusal!.review_url);

    // waits for the decision, answered the moment a person approves
    const waiting = client.callTool({
      name: 'approval_status',
      arguments: { approval_id: refusal!.approval_id, wait_seconds: 60 },
    });
    await eventually(
      'the approval long-poll parked',
      () => cp.cp.app.get(ApprovalsService).waiting.sleeping(refusal!.approval_id) === 1,
    );
    const approved = await cp.request('POST', `/v1/approvals/${refusal!.approval_id}/approve`, {
      token: approver.token,
      body: { reason: 'fine' },
    });
    expect(approved.status, approved.text).toBe(200);
    const decided = await waiting;
    expect(decided.structuredContent).toMatchObject({ status: 'approved', used: false });
    expect(textOf(decided)).toContain('Call memory__create_entities again with exactly the same arguments');

    const created = await client.callTool({ name: 'memory__create_entities', arguments: entities });
    expect(created.isError, textOf(created)).toBeFalsy();
    expect(textOf(await client.callTool({ name: 'memory__read_graph', arguments: {} }))).toContain('Ada');

    // a question to its people, answered while the tool waits
    const asking = client.callTool({
      name: 'message_user',
      arguments: { text: 'May I drop the staging table?', level: 'question', wait_seconds: 60 },
    });
    const question = await eventually('the agent message on the REST API', async () => {
      const messages = await cp.request('GET', `/v1/sessions/${session.id}/messages`);
      return (messages.body.messages as { id: string; direction: string; text: string; level: string }[]).find(
        (m) => m.direction === 'agent' && m.text === 'May I drop the staging table?' && m.level === 'question',
      );
    });
    expect(
      (await cp.request('POST', `/v1/sessions/${session.id}/messages`, { body: { text: 'No. Rename it.' } })).status,
    ).toBe(201);
    const answered = await asking;
    expect(answered.isError, textOf(answered)).toBeFalsy();
    expect(answered.structuredContent).toMatchObject({
      message_id: question!.id,
      replies: [expect.objectContaining({ text: 'No. Rename it.' })],
    });
    expect(textOf(answered)).toContain('No. Rename it.');

    // arguments of our own tools are checked, and said what is wrong
    const invalid = await client.callTool({ name: 'message_user', arguments: { text: '', wait_seconds: 500 } });
    expect(invalid.isError).toBe(true);
    expect(textOf(invalid)).toMatch(/^INVALID_ARGUMENTS: arguments\.text: .*; arguments\.wait_seconds: /);

    // once the session ends, the control plane's refusal reaches the agent in words
    expect((await cp.request('DELETE', `/v1/sessions/${session.id}`)).status).toBe(200);
    const refused = await client.callTool({ name: 'message_user', arguments: { text: 'still there?' } });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/refused the session token \(SESSION_ENDED: /);
    const pool = await client.callTool({ name: 'memory__read_graph', arguments: {} });
    expect(pool.isError).toBe(true);
    expect(textOf(pool)).toContain('SESSION_ENDED');
    expect(stderr()).not.toContain(session.token);
  });

  it('declares codex/sandbox-state where the session reaches a sandbox, passes the policy on, and gives it again to a session the control plane opened anew', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { body: { default: 'allow', rules: [] } });
    const made = await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, { body: { name: 'box' } });
    expect(made.status, made.text).toBe(201);
    const session = await aSession(ws.slug, ['actions:list', 'actions:run', 'sandbox:use']);
    const { client, stderr } = await connectAgent(session.env);
    expect(client.getServerCapabilities()?.experimental, stderr()).toEqual({
      'codex/sandbox-state': { version: '1.0.0' },
    });
    const update = (sandboxPolicy: Record<string, unknown>) =>
      client.request(
        { method: 'codex/sandbox-state/update', params: { sandboxPolicy, sandboxCwd: '/work/app' } } as never,
        EmptyResultSchema,
      );
    const touch = async (file: string) =>
      (await client.callTool({ name: 'sandbox__bash', arguments: { sandbox: 'box', command: `touch ${file}` } }))
        .structuredContent as { exitCode: number; stderr: string };
    expect(await update({ type: 'read-only' })).toEqual({});
    expect(await touch('first')).toMatchObject({
      exitCode: 1,
      stderr: expect.stringContaining('Read-only file system'),
    });

    // the control plane forgets the MCP session (a restart, an eviction): the one aileron-mcp opens instead gets the policy before anything runs
    const sessions = cp.cp.app.get(McpSessions) as unknown as {
      sessions: Map<string, { session: { close(): Promise<void> } }>;
    };
    const before = [...sessions.sessions.keys()];
    for (const id of before) await sessions.sessions.get(id)?.session.close();
    expect(await touch('second')).toMatchObject({
      exitCode: 1,
      stderr: expect.stringContaining('Read-only file system'),
    });
    expect([...sessions.sessions.keys()].filter((id) => !before.includes(id))).toHaveLength(1);

    expect(await update({ type: 'danger-full-access' })).toEqual({});
    expect(await touch('third')).toMatchObject({ exitCode: 0 });

    // workspace-write passes through whole: the client's working directory and writable roots take writes, nothing
    // else in /src; /tmp as the flags say; the root it will not take is named beside Codex's empty ack
    const bash = async (command: string) =>
      (await client.callTool({ name: 'sandbox__bash', arguments: { sandbox: 'box', command } })).structuredContent as {
        stdout: string;
        stderr: string;
        exitCode: number;
      };
    expect(await bash('mkdir -p app lib other && echo made')).toMatchObject({ stdout: 'made\n', exitCode: 0 });
    const acked = await client.request(
      {
        method: 'codex/sandbox-state/update',
        params: {
          sandboxPolicy: { type: 'workspace-write', writable_roots: ['/src/lib', '/etc'], exclude_slash_tmp: true },
          sandboxCwd: '/src/app',
        },
      } as never,
      EmptyResultSchema,
    );
    expect(acked._meta?.['aileron/sandbox-state']).toEqual({
      ignored_writable_roots: [{ path: '/etc', reason: expect.stringMatching(/^outside what the sandbox may write/) }],
    });
    expect(await bash('touch app/a lib/b && echo "$TMPDIR" > "$TMPDIR/where" && cat "$TMPDIR/where"')).toMatchObject({
      stdout: '/tmp/tmpdir\n',
      exitCode: 0,
    });
    for (const outside of ['touch other/c', 'touch top-level', 'echo t > /tmp/u'])
      expect(await bash(outside), outside).toMatchObject({
        exitCode: 1,
        stderr: expect.stringContaining('Read-only file system'),
      });
    expect(await update({ type: 'danger-full-access' })).toEqual({});
    await expect(update({ type: 'workspace-write', writable_roots: 'all' })).rejects.toThrow(
      /params\.sandboxPolicy\.writable_roots/,
    );

    // a session whose token does not reach the sandbox tools: neither the capability nor the request
    const narrowed = await cp.request('POST', '/v1/sessions', {
      body: { workspace: ws.slug, name: 'memory only', caveats: { servers: ['memory'] } },
    });
    expect(narrowed.status, narrowed.text).toBe(201);
    const other = await connectAgent({
      ...session.env,
      AILERON_TOKEN: narrowed.body.caveat_token,
      AILERON_SESSION_ID: narrowed.body.id,
    });
    expect(other.client.getServerCapabilities()?.experimental).toBeUndefined();
    await expect(
      other.client.request(
        { method: 'codex/sandbox-state/update', params: { sandboxPolicy: { type: 'read-only' } } } as never,
        EmptyResultSchema,
      ),
    ).rejects.toThrow(/Method not found/);
  });
});

describe("a shell rule's prompt reaches an agent behind aileron-mcp as on the direct endpoint", () => {
  let cp: TestControlPlane;
  // calls held for approval wait for it, as in production
  const { people, clients } = withControlPlane(
    { AILERON_POOL_APPROVAL_WAIT_SECONDS: '120' },
    (started) => (cp = started),
  );

  it('a client that declares URL elicitation is shown the review page while the call waits; one that does not waits on the approval flow; the approver decides either way', async () => {
    const ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
    expect((await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'box' } })).status).toBe(201);
    const rules = await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, {
      body: { codex_rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n', elicitation: true },
    });
    expect(rules.status, rules.text).toBe(200);
    const approver = await people.aPerson(cp, ws, 'approver');
    const started = await cp.request('POST', '/v1/sessions', {
      body: { workspace: ws, name: 'agent', agent: 'codex', caps: ['actions:list', 'actions:run', 'sandbox:use'] },
    });
    expect(started.status, started.text).toBe(201);
    const env = {
      AILERON_URL: cp.url,
      AILERON_TOKEN: started.body.caveat_token as string,
      AILERON_WORKSPACE: ws,
      AILERON_SESSION_ID: started.body.id as string,
    };
    const pending = async () =>
      (
        (await cp.request('GET', `/v1/workspaces/${ws}/approvals?status=pending`)).body.items as {
          id: string;
          arguments: { command: string };
        }[]
      ).map((a) => ({ id: a.id, command: a.arguments.command }));

    // aileron-mcp over stdio, as Codex runs it; and the direct endpoint, for comparison
    const stdio = async (capabilities: ClientCapabilities): Promise<Client> => {
      const transport = new StdioClientTransport({ command: process.execPath, args: [copied], env, cwd: sandbox });
      const client = new Client({ name: 'codex', version: '1.0.0' }, { capabilities });
      await client.connect(transport);
      return client;
    };
    const direct = async (capabilities: ClientCapabilities): Promise<Client> =>
      (await connect(cp, env.AILERON_TOKEN, `/mcp/${ws}`, capabilities)).client;
    const both = { elicitation: { form: {}, url: {} } };
    const agents: { label: string; capabilities: ClientCapabilities; open: typeof stdio }[] = [
      { label: 'aileron-mcp, URL elicitation', capabilities: both, open: stdio },
      { label: 'the direct endpoint, URL elicitation', capabilities: both, open: direct },
      { label: 'aileron-mcp, form elicitation only', capabilities: { elicitation: {} }, open: stdio },
      { label: 'aileron-mcp, no elicitation', capabilities: {}, open: stdio },
    ];
    for (const [n, agent] of agents.entries()) {
      const url = Boolean(agent.capabilities.elicitation?.url);
      const client = await agent.open(agent.capabilities);
      clients.push(client);
      const asked: { mode?: string; url?: string; message: string; elicitationId?: string }[] = [];
      const completed: string[] = [];
      if (agent.capabilities.elicitation) {
        // an agent's client that would accept anything: its answer must decide nothing
        client.setRequestHandler(ElicitRequestSchema, async (request) => {
          asked.push(request.params as (typeof asked)[number]);
          return { action: 'accept' };
        });
        if (url)
          client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
            completed.push(notification.params.elicitationId);
          });
      }
      const file = `approved-${n}`;
      const call = client.callTool(
        { name: 'sandbox__bash', arguments: { sandbox: 'box', command: `touch ${file} && ls` } },
        undefined,
        { timeout: 120_000 },
      );
      const request = await eventually(`${agent.label}: the approval request`, async () =>
        (await pending()).find((a) => a.command === `touch ${file} && ls`),
      );
      if (url) {
        await eventually(`${agent.label}: the page shown`, () => asked.length === 1);
        expect(asked[0], agent.label).toMatchObject({
          mode: 'url',
          url: `${cp.cp.config.publicUrl}/review/${request!.id}`,
          message: expect.stringContaining(`touch ${file} && ls`),
          elicitationId: expect.stringMatching(new RegExp(`^${request!.id}\\.`)),
        });
      }
      // the client's own "accept" ran nothing: the call still waits for a person
      expect(
        (await pending()).map((a) => a.id),
        agent.label,
      ).toContain(request!.id);
      const approved = await cp.request('POST', `/v1/approvals/${request!.id}/approve`, {
        token: approver.token,
        body: { reason: 'fine' },
      });
      expect(approved.status, approved.text).toBe(200);
      const result = (await call) as unknown as { structuredContent: { stdout: string; exitCode: number } };
      expect(result.structuredContent, agent.label).toMatchObject({
        exitCode: 0,
        stdout: expect.stringContaining(file),
      });
      if (url) await eventually(`${agent.label}: the page announced complete`, () => completed.length === 1);
      else expect(asked, agent.label).toEqual([]);
      expect(completed.every((id) => id === asked[0]?.elicitationId)).toBe(true);
    }
  });
});
