import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutionJournal } from '@aileron/pool';
import { compiledRunnerPath } from '@aileron/sandboxes';
import { People } from '../approvals/people';
import { connect, textOf } from '../pool/mcp-client';
import { aWorkspace, uniqueSlug } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aReceiver } from '../support/webhook-receiver';
import { AGENT_CAPS, agentOn, type Bash, type Box as SandboxBox } from './box';

/** Small enough that a test can exceed each of them in a moment. */
const SOURCE_MAX_BYTES = 64 * 1024;
const IDLE_SECONDS = 2;
const BASH_TIMEOUT_MS = 2_000;
const BASH_MAX_TIMEOUT_MS = 10_000;

interface Box extends SandboxBox {
  sessionId: string;
}

/** What the audit API shows of a tool call's execution record. */
interface ExecutionEvent {
  type: string;
  server: string;
  tool: string;
  session: string;
  data: { execution_id: string; mcp_session: string; arguments?: Record<string, unknown> };
}

/** A tar.gz of `files`, made by the system's tar as a developer would. */
function aTarGz(dir: string, files: Record<string, string>): Buffer {
  const tree = mkdtempSync(join(dir, 'tree-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(tree, path)), { recursive: true });
    writeFileSync(join(tree, path), content);
  }
  const archive = `${tree}.tar.gz`;
  execFileSync('tar', ['-czf', archive, '-C', tree, '.']);
  return readFileSync(archive);
}

/** Host processes that are a sandbox's runner: running the runner's bundle as the sandbox's own host uid, the owner of its files. */
function runnerProcesses(srcDir: string): string[] {
  const uid = statSync(srcDir).uid;
  return readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid)) return false;
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return statSync(`/proc/${pid}`).uid === uid && args.some((a) => a.endsWith(`/${basename(compiledRunnerPath())}`));
    } catch {
      // gone while we looked
      return false;
    }
  });
}

describe('sandboxes in detail (embedded, bubblewrap)', () => {
  let cp: TestControlPlane;
  let dir: string;
  let ws: { slug: string; id: string };
  const people = new People();
  const clients: Client[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-sandbox-details-'));
    cp = await startApiControlPlane({
      AILERON_SANDBOX_SOURCE_MAX_BYTES: String(SOURCE_MAX_BYTES),
      AILERON_SANDBOX_IDLE_SECONDS: String(IDLE_SECONDS),
      AILERON_SANDBOX_BASH_TIMEOUT_MS: String(BASH_TIMEOUT_MS),
      AILERON_SANDBOX_BASH_MAX_TIMEOUT_MS: String(BASH_MAX_TIMEOUT_MS),
      // a call that needs approval is held open while a person decides (the test's own timeout bounds it)
      AILERON_POOL_APPROVAL_WAIT_SECONDS: '60',
    });
    await people.start();
    await people.trustedBy(cp);
    ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { body: { default: 'allow', rules: [] } });
  }, 120_000);

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
    await people.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Makes the sandbox `name` (as a member would) and connects an agent session to it. */
  async function aSandbox(
    name: string,
    options: { workspace?: string; caveat?: string | null; network?: 'none' | 'egress' } = {},
  ): Promise<Box> {
    const workspace = options.workspace ?? ws.slug;
    const made = await cp.request('POST', `/v1/workspaces/${workspace}/sandboxes`, {
      body: { name, ...(options.network ? { network: options.network } : {}) },
    });
    expect(made.status, made.text).toBe(201);
    const slug = made.body.name as string;
    return agentOn(cp, workspace, slug, clients, { caveat: options.caveat });
  }

  function upload(name: string, contentType: string, body: Buffer): Promise<Response> {
    return fetch(`${cp.url}/v1/workspaces/${ws.slug}/sandboxes/${name}/source`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${cp.ownerToken}`, 'content-type': contentType },
      body,
    });
  }

  /** The snapshot history once every change so far has its commit (the bundle waits for the last snapshot). */
  async function settledSnapshots(
    name: string,
    workspace = ws.slug,
  ): Promise<
    {
      sha: string;
      trigger: string;
      message: string;
      files: { path: string; status: string }[];
      session: string | null;
      author: string;
    }[]
  > {
    const bundle = await fetch(`${cp.url}/v1/workspaces/${workspace}/sandboxes/${name}/bundle`, {
      headers: { authorization: `Bearer ${cp.ownerToken}` },
    });
    await bundle.arrayBuffer();
    const listed = await cp.request('GET', `/v1/workspaces/${workspace}/sandboxes/${name}/snapshots`);
    expect(listed.status, listed.text).toBe(200);
    return listed.body.snapshots;
  }

  /** Where the local driver keeps the sandbox's /src on the host (`<data dir>/sandboxes/<id>/src`). */
  async function hostSrcDir(name: string): Promise<string> {
    const record = await cp.cp.database.client.sandbox.findFirstOrThrow({ where: { workspaceId: ws.id, name } });
    return join(cp.cp.config.dataDir, 'sandboxes', record.id, 'src');
  }

  it('a source larger than AILERON_SANDBOX_SOURCE_MAX_BYTES is 413 SANDBOX_SOURCE_TOO_LARGE, and the sandbox stays new', async () => {
    const box = await aSandbox('too-big');
    // random bytes do not compress: the limit is on what is uploaded
    const refused = await upload(box.name, 'application/gzip', randomBytes(SOURCE_MAX_BYTES * 2));
    expect(refused.status).toBe(413);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(await refused.json()).toMatchObject({
      status: 413,
      code: 'SANDBOX_SOURCE_TOO_LARGE',
      detail: `The source is larger than ${SOURCE_MAX_BYTES} bytes (AILERON_SANDBOX_SOURCE_MAX_BYTES)`,
    });

    expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/sandboxes/${box.name}`)).body.source).toBe('empty');
    expect(await box.bash('ls -A /src')).toEqual({ stdout: '', stderr: '', exitCode: 0 });
    expect(
      (await cp.request('GET', `/v1/workspaces/${ws.slug}/sandboxes/${box.name}/snapshots`)).body.snapshots,
    ).toEqual([]);
    // still a sandbox nothing was written to: a source within the limit goes in
    const fits = await upload(box.name, 'application/gzip', aTarGz(dir, { 'small.txt': 'small\n' }));
    expect(fits.status, await fits.clone().text()).toBe(200);
  });

  it('a tar.gz uploaded over HTTP lands in /src and is committed as "write: source upload (tar.gz)"; a second source is 409', async () => {
    const box = await aSandbox('from-tarball');
    const archive = aTarGz(dir, {
      'README.md': '# demo\n',
      'lib/util.js': 'exports.twice = (n) => 2 * n;\n',
      'lib/deep/notes.txt': 'deep\n',
    });
    expect(archive.length).toBeLessThan(SOURCE_MAX_BYTES);
    const uploaded = await upload(box.name, 'application/gzip', archive);
    expect(uploaded.status, await uploaded.clone().text()).toBe(200);
    expect(await uploaded.json()).toMatchObject({ name: box.name, source: 'tar.gz' });
    expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/sandboxes/${box.name}`)).body.source).toBe('tar.gz');

    expect(textOf(await box.call('read', { path: 'README.md' }))).toBe('# demo\n');
    expect(textOf(await box.call('read', { path: '/src/lib/util.js' }))).toBe('exports.twice = (n) => 2 * n;\n');
    expect(textOf(await box.call('read', { path: 'lib/deep/notes.txt' }))).toBe('deep\n');

    // one commit for the whole upload, made by whoever uploaded (no agent session)
    const snapshots = await settledSnapshots(box.name);
    expect(snapshots).toHaveLength(1);
    expect(snapshots[0]).toMatchObject({
      trigger: 'write',
      message: 'write: source upload (tar.gz)',
      session: null,
      author: expect.stringMatching(/@aileron\.invalid>$/),
    });
    expect(snapshots[0]!.files.map((f) => `${f.status} ${f.path}`).sort()).toEqual([
      'A README.md',
      'A lib/deep/notes.txt',
      'A lib/util.js',
    ]);

    const again = await upload(box.name, 'application/gzip', archive);
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: 'SANDBOX_SOURCE_EXISTS' });
  });

  it('an idle sandbox’s runner stops, its files stay, and the next tool call starts it again', async () => {
    const box = await aSandbox('idle-box');
    expect(textOf(await box.call('write', { path: 'notes.md', content: 'kept across the stop\n' }))).toBe(
      'Created notes.md (21 bytes)',
    );
    const src = await hostSrcDir(box.name);
    expect(runnerProcesses(src), 'a runner serves the sandbox once used').not.toEqual([]);
    // the bound only catches a hang: the stop is due IDLE_SECONDS after the last use
    await eventually('the idle runner to stop', () => runnerProcesses(src).length === 0, { timeoutMs: 30_000 });
    // the API still lists it, with its last use
    const shown = await cp.request('GET', `/v1/workspaces/${ws.slug}/sandboxes/${box.name}`);
    expect(shown.status).toBe(200);
    expect(shown.body.last_used_at).not.toBeNull();

    expect(textOf(await box.call('read', { path: 'notes.md' }))).toBe('kept across the stop\n');
    expect(runnerProcesses(src), 'the call started a runner again').not.toEqual([]);
  });

  it('a snapshot is a sandbox.snapshot event carrying its sandbox, commit, trigger, message, files, author and session', async () => {
    const receiver = await aReceiver([]);
    const hook = await cp.request('POST', '/v1/webhooks', {
      body: { name: uniqueSlug('snapshots'), url: receiver.url, events: ['sandbox.snapshot'], workspace: ws.slug },
    });
    expect(hook.status, hook.text).toBe(201);
    try {
      const box = await aSandbox('evented');
      await box.call('write', { path: 'hello.txt', content: 'hello\n' });
      const [snapshot] = await settledSnapshots(box.name);
      const delivered = await eventually('the sandbox.snapshot delivery', () =>
        receiver.accepted().find((r) => JSON.parse(r.raw).data?.sandbox === box.name),
      );
      expect(delivered.headers['x-aileron-event']).toBe('sandbox.snapshot');
      const event = JSON.parse(delivered.raw);
      // the envelope carries the workspace and the agent session; the rest is the event's data
      expect(event).toMatchObject({
        type: 'sandbox.snapshot',
        workspace: ws.slug,
        workspace_id: ws.id,
        session: box.sessionId,
      });
      expect(event.data).toEqual({
        sandbox: box.name,
        sha: snapshot!.sha,
        trigger: 'write',
        message: 'write: hello.txt',
        files: [{ path: 'hello.txt', status: 'A' }],
        author: `agent on evented <session-${box.sessionId}@sessions.aileron.invalid>`,
      });
    } finally {
      await cp.request('DELETE', `/v1/webhooks/${hook.body.id}`);
      await receiver.close();
    }
  });

  it('every sandbox tool call with a caveat token is an execution record carrying that agent session', async () => {
    const box = await aSandbox('audited');
    await box.call('write', { path: 'a.txt', content: 'a\n' });
    await box.call('read', { path: 'a.txt' });
    await box.call('bash', { command: 'cat a.txt' });
    await box.call('ls', {});
    const missing = await box.call('read', { path: 'missing.txt' });
    expect(missing.isError).toBe(true);

    // the record of a call follows its answer: wait until all ten are in
    const events = await eventually('the five calls’ records', async () => {
      await cp.cp.app.get(ExecutionJournal).flush();
      const audit = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?session=${box.sessionId}&limit=100`);
      const found = (audit.body.events as ExecutionEvent[]).filter((e) => e.type.startsWith('execution.'));
      return found.length >= 10 && found;
    });
    expect(events).toHaveLength(10);
    for (const event of events) {
      expect(event).toMatchObject({ server: 'sandbox', session: box.sessionId });
      // the MCP session is kept beside it: a different id
      expect(event.data.mcp_session).toEqual(expect.any(String));
      expect(event.data.mcp_session).not.toBe(box.sessionId);
    }
    const outcome = (tool: string) =>
      events
        .filter((e) => e.tool === tool)
        .map((e) => e.type)
        .sort();
    expect(outcome('write')).toEqual(['execution.started', 'execution.succeeded']);
    expect(outcome('bash')).toEqual(['execution.started', 'execution.succeeded']);
    expect(outcome('ls')).toEqual(['execution.started', 'execution.succeeded']);
    expect(outcome('read')).toEqual([
      'execution.failed',
      'execution.started',
      'execution.started',
      'execution.succeeded',
    ]);
    // each outcome names the execution its start did
    const started = events.filter((e) => e.type === 'execution.started');
    expect(new Set(events.map((e) => e.data.execution_id))).toEqual(new Set(started.map((e) => e.data.execution_id)));
    expect(started.find((e) => e.tool === 'bash')!.data.arguments).toEqual({
      sandbox: 'audited',
      command: 'cat a.txt',
    });
  });

  it('a policy rule asking approval for sandbox bash holds the call until a person approves; then it runs', async () => {
    const gated = await aWorkspace(cp, cp.ownerToken);
    const policy = await cp.request('PUT', `/v1/workspaces/${gated.slug}/policy`, {
      body: {
        default: 'allow',
        rules: [{ id: 'bash-needs-a-person', effect: 'approval', servers: ['sandbox'], tools: ['bash'] }],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    const approver = await people.aPerson(cp, gated.slug, 'approver');
    const box = await aSandbox('gated', { workspace: gated.slug });

    let answered = false;
    const held = box.client
      .callTool(
        { name: 'bash', arguments: { sandbox: box.name, command: 'touch approved.txt && echo ran' } },
        undefined,
        { timeout: 60_000 },
      )
      .finally(() => (answered = true));
    const pending = await eventually('the pending approval', async () => {
      const inbox = await cp.request('GET', `/v1/workspaces/${gated.slug}/approvals?status=pending`);
      return inbox.body.approvals[0] as
        | { id: string; server: string; tool: string; arguments: Record<string, unknown>; rules: string[] }
        | undefined;
    });
    expect(pending).toMatchObject({
      server: 'sandbox',
      tool: 'bash',
      arguments: { sandbox: 'gated', command: 'touch approved.txt && echo ran' },
      rules: ['bash-needs-a-person'],
    });
    // other tools are not gated, and show the command has not run
    expect(textOf(await box.call('ls', {}))).not.toContain('approved.txt');
    expect(answered, 'the call answered before anyone decided').toBe(false);

    const approved = await cp.request('POST', `/v1/approvals/${pending.id}/approve`, {
      token: approver.token,
      body: { reason: 'fine' },
    });
    expect(approved.status, approved.text).toBe(200);
    const result = await held;
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toEqual({ stdout: 'ran\n', stderr: '', exitCode: 0 });
    expect(textOf(await box.call('ls', {}))).toContain('approved.txt');
  });

  it('bash: AILERON_SANDBOX_BASH_TIMEOUT_MS applies when no timeout is given; one above AILERON_SANDBOX_BASH_MAX_TIMEOUT_MS is refused', async () => {
    const box = await aSandbox('timeouts');
    const bashTool = (await box.client.listTools()).tools.find((t) => t.name === 'bash')!;
    const timeoutArg = (bashTool.inputSchema.properties as Record<string, { maximum?: number; description?: string }>)
      .timeout!;
    expect(timeoutArg.maximum).toBe(BASH_MAX_TIMEOUT_MS);
    expect(timeoutArg.description).toContain(`default ${BASH_TIMEOUT_MS}, at most ${BASH_MAX_TIMEOUT_MS}`);

    const defaulted = await box.bash('sleep 30');
    expect(defaulted.exitCode).toBe(124);
    expect(defaulted.stderr).toContain(
      `ran longer than ${BASH_TIMEOUT_MS / 1000} s and was killed with everything it started`,
    );
    // a timeout the call names, above the default, is the one that applies
    expect(await box.bash('sleep 3; echo woke', { timeout: BASH_MAX_TIMEOUT_MS })).toEqual({
      stdout: 'woke\n',
      stderr: '',
      exitCode: 0,
    });
    // above the maximum: refused, not clamped, and nothing runs
    const tooLong = await box.call('bash', { command: 'touch too-long.txt', timeout: BASH_MAX_TIMEOUT_MS + 1 });
    expect(tooLong.isError).toBe(true);
    expect(textOf(tooLong)).toMatch(new RegExp(`^INVALID_ARGUMENTS: arguments\\.timeout: .*${BASH_MAX_TIMEOUT_MS}`));
    expect(textOf(await box.call('ls', {}))).not.toContain('too-long.txt');
  });

  it('names: junk trimmed, runs of other characters one "-", cut to 63; tools resolve the same slug; long commands make short snapshot messages', async () => {
    const made = await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, {
      body: { name: '  --Hello,   World!!--  ' },
    });
    expect(made.status, made.text).toBe(201);
    expect(made.body.name).toBe('hello-world');
    const long = await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, { body: { name: 'X'.repeat(70) } });
    expect(long.body.name).toBe('x'.repeat(63));
    // cut at 63, then a trailing "-" trimmed again
    const cutAtDash = await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, {
      body: { name: `${'y'.repeat(62)} tail` },
    });
    expect(cutAtDash.body.name).toBe('y'.repeat(62));
    // the slug is the identity: another spelling is the same sandbox
    expect(
      (await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, { body: { name: 'HELLO world' } })).body.code,
    ).toBe('SANDBOX_EXISTS');
    expect(
      (await cp.request('GET', `/v1/workspaces/${ws.slug}/sandboxes/${encodeURIComponent('Hello World')}`)).body.name,
    ).toBe('hello-world');

    const session = await cp.request('POST', '/v1/sessions', {
      body: { workspace: ws.slug, name: 'slug agent', caps: AGENT_CAPS },
    });
    const { client } = await connect(cp, session.body.caveat_token, `/mcp/${ws.slug}/sandbox`);
    clients.push(client);
    const call = async (sandbox: string, tool: string, args: Record<string, unknown>) =>
      (await client.callTool({ name: tool, arguments: { sandbox, ...args } })) as Record<string, unknown>;
    expect(textOf(await call('Hello, World', 'write', { path: 'greeting.txt', content: 'hi\n' }))).toBe(
      'Created greeting.txt (3 bytes)',
    );
    expect(textOf(await call('--hello-WORLD--', 'read', { path: 'greeting.txt' }))).toBe('hi\n');
    expect(textOf(await call('X'.repeat(80), 'write', { path: 'long.txt', content: 'long\n' }))).toBe(
      'Created long.txt (5 bytes)',
    );
    expect(textOf(await call('x'.repeat(63), 'read', { path: 'long.txt' }))).toBe('long\n');

    const digits = '0123456789'.repeat(10);
    const exactly72 = `touch ${'a'.repeat(66)}`;
    for (const command of [`echo ${digits} > long.txt`, 'touch one.txt\ntouch two.txt', exactly72]) {
      expect((await call('hello-world', 'bash', { command })).structuredContent).toMatchObject({ exitCode: 0 });
    }
    const messages = (await settledSnapshots('hello-world')).map((s) => s.message);
    expect(messages).toEqual([
      `bash: ${exactly72}`,
      // a second line is left out, and says so
      'bash: touch one.txt…',
      // the first line cut to 71 characters and an ellipsis: 72 in all
      `bash: echo ${digits.slice(0, 66)}…`,
      'write: greeting.txt',
    ]);
    expect(messages[2]!.slice('bash: '.length)).toHaveLength(72);
  });

  it('local driver isolation: network "none" has only lo; /tmp is each sandbox’s own, apart from the host’s', async () => {
    const a = await aSandbox('iso-a');
    const b = await aSandbox('iso-b');
    expect((await a.bash("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")).stdout).toBe('lo\n');

    const marker = `aileron-marker-${randomBytes(4).toString('hex')}`;
    expect(await a.bash(`echo from-a > /tmp/${marker} && cat /tmp/${marker}`)).toEqual({
      stdout: 'from-a\n',
      stderr: '',
      exitCode: 0,
    });
    expect((await b.bash(`test -e /tmp/${marker}; echo $?`)).stdout).toBe('1\n');
    expect(existsSync(join('/tmp', marker)), 'the sandbox wrote the host’s /tmp').toBe(false);
    // nor does a sandbox see what the host keeps in /tmp
    const hostFile = join('/tmp', `aileron-host-${randomBytes(4).toString('hex')}`);
    writeFileSync(hostFile, 'host\n');
    try {
      expect((await a.bash(`test -e ${hostFile}; echo $?`)).stdout).toBe('1\n');
    } finally {
      rmSync(hostFile, { force: true });
    }
  });

  it('limits: memory_mb bounds what a command writes to, not what Node reserves; cpu_seconds ends a busy loop', async () => {
    const made = await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, {
      body: { name: 'limited', limits: { memory_mb: 128, cpu_seconds: 1 } },
    });
    expect(made.status, made.text).toBe(201);
    expect(made.body.limits).toEqual({ memory_mb: 128, cpu_seconds: 1 });
    const session = await cp.request('POST', '/v1/sessions', {
      body: { workspace: ws.slug, name: 'limited agent', caps: AGENT_CAPS, caveats: { sandbox: 'limited' } },
    });
    const { client } = await connect(cp, session.body.caveat_token, `/mcp/${ws.slug}/sandbox`);
    clients.push(client);
    const bash = async (command: string) =>
      (
        await client.callTool({
          name: 'bash',
          arguments: { sandbox: 'limited', command, timeout: BASH_MAX_TIMEOUT_MS },
        })
      ).structuredContent as Bash;
    // Node reserves far more address space than 128 MiB and still runs its tests
    expect(await bash('node -e "console.log(process.version)"')).toMatchObject({
      stdout: `${process.version}\n`,
      exitCode: 0,
    });
    const allocate = (mb: number) => bash(`node -e "console.log(Buffer.alloc(${mb} * 1024 * 1024, 1).length)"`);
    const tooMuch = await allocate(256);
    expect(tooMuch.exitCode).not.toBe(0);
    expect(tooMuch.stdout).toBe('');
    expect(await allocate(16)).toMatchObject({ stdout: `${16 * 1024 * 1024}\n`, exitCode: 0 });
    // a second of CPU, then the kernel kills it (128 + SIGKILL): well before the call's own timeout
    expect(await bash('while :; do :; done')).toMatchObject({ exitCode: 137 });
  });

  it('a read of a sandbox answers while a bash of the same sandbox is still running', async () => {
    const box = await aSandbox('side-by-side');
    await box.call('write', { path: 'notes.md', content: 'readable\n' });
    const order: string[] = [];
    const running = box
      .call('bash', { command: 'touch started && sleep 3 && echo done', timeout: BASH_MAX_TIMEOUT_MS })
      .then((result) => {
        order.push('bash');
        return result;
      });
    // the command is under way, not merely asked for
    await eventually('the bash to start', async () => textOf(await box.call('ls', {})).includes('started'));
    const read = await box.call('read', { path: 'notes.md' });
    order.push('read');
    expect(textOf(read)).toBe('readable\n');
    expect((await running).structuredContent).toEqual({ stdout: 'done\n', stderr: '', exitCode: 0 });
    expect(order).toEqual(['read', 'bash']);
  });
});
