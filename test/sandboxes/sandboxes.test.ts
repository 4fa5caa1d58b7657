import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ElicitRequestSchema, EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutionJournal } from '@aileron/pool';
import { attenuateCaveatToken } from '../../libs/sessions/src';
import { People } from '../approvals/people';
import { aRemoteServer, connect, textOf } from '../pool/mcp-client';
import { eventually } from '../support/eventually';
import { expectIgnoredRoots, refusedReadOnly } from './box';
import { aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';

/** A repository as a developer has it: a bug, and a test that catches it. */
function aRepositoryBundle(dir: string): string {
  const repo = join(dir, 'repo');
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', repo, '-c', 'user.name=Dev', '-c', 'user.email=dev@example.com', ...args], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1' },
    });
  execFileSync('git', ['init', '-q', '-b', 'main', repo]);
  writeFileSync(join(repo, 'math.js'), 'exports.add = function add(a, b) {\n  return a - b;\n};\n');
  writeFileSync(
    join(repo, 'math.test.js'),
    "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('./math');\n\ntest('adds', () => {\n  assert.strictEqual(add(2, 3), 5);\n});\n",
  );
  git('add', '-A');
  git('commit', '-q', '-m', 'initial');
  const bundle = join(dir, 'repo.bundle');
  git('bundle', 'create', '-q', bundle, 'HEAD', 'main');
  return bundle;
}

/** The snapshot branch as a developer gets it: fetched from the bundle into a fresh clone. */
function fetchedHistory(dir: string, bundle: Buffer): { subject: string; author: string }[] {
  const file = join(dir, `fetched-${Date.now()}.bundle`);
  writeFileSync(file, bundle);
  const clone = join(dir, `clone-${Date.now()}`);
  execFileSync('git', ['init', '-q', clone]);
  execFileSync('git', ['-C', clone, 'fetch', '-q', file, 'aileron/snapshots:snapshots']);
  return execFileSync('git', ['-C', clone, 'log', '--format=%s%x09%an <%ae>', 'snapshots'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => {
      const [subject, author] = line.split('\t');
      return { subject: subject!, author: author! };
    });
}

/**
 * A stdio MCP server that takes a client's sandbox policy (as a shell server
 * of the catalog would): `policy` answers the last one's type and its pid,
 * `crash` ends the process. Run as `node -e` with the SDK by absolute path,
 * as a pool instance's sandbox may read node_modules but not the test tree.
 */
function policyServer(): { command: string; args: string[] } {
  const lib = (file: string): string => JSON.stringify(resolve('node_modules', file));
  const source = [
    `const { Server } = require(${lib('@modelcontextprotocol/sdk/dist/cjs/server/index.js')});`,
    `const { StdioServerTransport } = require(${lib('@modelcontextprotocol/sdk/dist/cjs/server/stdio.js')});`,
    `const types = require(${lib('@modelcontextprotocol/sdk/dist/cjs/types.js')});`,
    `const { z } = require(${lib('zod')});`,
    `const server = new Server({ name: 'shell', version: '1.0.0' }, { capabilities: { tools: {}, experimental: { 'codex/sandbox-state': { version: '1.0.0' } } } });`,
    `let policy = 'none';`,
    `server.setRequestHandler(z.object({ method: z.literal('codex/sandbox-state/update'), params: z.any() }), async (r) => { policy = r.params.sandboxPolicy.type; return {}; });`,
    `server.setRequestHandler(types.ListToolsRequestSchema, async () => ({ tools: [{ name: 'policy', inputSchema: { type: 'object' } }, { name: 'crash', inputSchema: { type: 'object' } }] }));`,
    `server.setRequestHandler(types.CallToolRequestSchema, async (r) => { if (r.params.name === 'crash') process.exit(1); return { content: [{ type: 'text', text: policy + ' ' + process.pid }] }; });`,
    `server.connect(new StdioServerTransport());`,
  ].join('\n');
  return { command: 'node', args: ['-e', source] };
}

function structured(result: unknown): Record<string, unknown> {
  return (result as { structuredContent: Record<string, unknown> }).structuredContent;
}

describe('sandboxes (embedded, bubblewrap)', () => {
  let cp: TestControlPlane;
  let dir: string;
  let ws: string;
  let sessionToken: string;
  let sessionId: string;
  let client: Client;
  const people = new People();
  const clients: Client[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-sandbox-test-'));
    // a call that needs a person answers at once with the pending request, instead of waiting for one
    // the owner makes an egress sandbox below (codex/sandbox-state/update)
    cp = await startApiControlPlane({
      AILERON_POOL_APPROVAL_WAIT_SECONDS: '0',
      AILERON_SANDBOX_EGRESS: 'admins',
    });
    await people.start();
    await people.trustedBy(cp);
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
    const created = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'Fix The Bug!' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ name: 'fix-the-bug', network: 'none', source: 'empty', workdir: '/src' });
    const upload = await fetch(`${cp.url}/v1/workspaces/${ws}/sandboxes/fix-the-bug/source`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${cp.ownerToken}`, 'content-type': 'application/x-git-bundle' },
      body: readFileSync(aRepositoryBundle(dir)),
    });
    expect(upload.status, await upload.clone().text()).toBe(200);
    expect(((await upload.json()) as { source: string }).source).toBe('git-bundle');
    const session = await cp.request('POST', '/v1/sessions', {
      body: {
        workspace: ws,
        name: 'bug fixer',
        caps: ['actions:list', 'actions:run', 'sandbox:use'],
        caveats: { sandbox: 'fix-the-bug' },
      },
    });
    expect(session.status, session.text).toBe(201);
    sessionToken = session.body.caveat_token;
    sessionId = session.body.id;
    client = (await connect(cp, sessionToken, `/mcp/${ws}/sandbox`)).client;
  }, 120_000);

  afterAll(async () => {
    await client?.close();
    for (const other of clients) await other.close().catch(() => undefined);
    await cp?.close();
    await people.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });

  it('offers exactly the seven tools, with the seed’s arguments', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['bash', 'glob', 'grep', 'ls', 'patch', 'read', 'write']);
    const args = Object.fromEntries(
      tools.map((t) => [t.name, Object.keys((t.inputSchema as { properties: object }).properties).sort()]),
    );
    expect(args).toEqual({
      read: ['limit', 'offset', 'path', 'sandbox'],
      write: ['content', 'path', 'sandbox'],
      patch: ['diff', 'path', 'sandbox'],
      bash: ['command', 'sandbox', 'timeout', 'workdir'],
      ls: ['path', 'recursive', 'sandbox'],
      glob: ['path', 'pattern', 'sandbox'],
      grep: ['include', 'path', 'pattern', 'sandbox'],
    });
  });

  it('the seed’s acceptance: read, patch the bug, run the tests; history holds exactly the fix; the agent cannot touch history', async () => {
    expect(textOf(await call('read', { sandbox: 'fix-the-bug', path: 'math.js' }))).toContain('return a - b;');
    const failing = structured(await call('bash', { sandbox: 'Fix the bug', command: 'node --test' }));
    expect(failing.exitCode).not.toBe(0);

    const diff = [
      '--- a/math.js',
      '+++ b/math.js',
      '@@ -1,3 +1,3 @@',
      ' exports.add = function add(a, b) {',
      '-  return a - b;',
      '+  return a + b;',
      ' };',
      '',
    ].join('\n');
    const patched = await call('patch', { sandbox: 'fix-the-bug', path: 'math.js', diff });
    expect(patched.isError, textOf(patched)).toBeFalsy();
    expect(textOf(patched)).toBe('Patched math.js (+1 -1)');
    const again = await call('patch', { sandbox: 'fix-the-bug', path: 'math.js', diff });
    expect(again.isError).toBeFalsy();
    expect(textOf(again)).toContain('already applied');

    const passing = structured(await call('bash', { sandbox: 'fix-the-bug', command: 'node --test' }));
    expect(passing.exitCode, String(passing.stdout) + String(passing.stderr)).toBe(0);

    // what an agent might try against its history: none of it reaches the history the host keeps
    const attempt = async (command: string) => {
      const ran = structured(await call('bash', { sandbox: 'fix-the-bug', command }));
      return `${String(ran.stdout)}${String(ran.stderr)}`;
    };
    expect(await attempt('git commit -am "sneaky"; git reset --hard HEAD~1')).toContain('not a git repository');
    // a repository of its own in /src is the agent's to play with, and never part of a snapshot
    expect(
      await attempt(
        'git init -q . && git add -A && git -c user.name=a -c user.email=a@b commit -qm rewritten && git reset -q --hard && git log --format=%s',
      ),
    ).toBe('rewritten\n');
    // the host's history, by its path on the host (a command no longer sees bwrap's arguments): not mounted, so not there
    const record = await cp.cp.database.client.sandbox.findFirstOrThrow({ where: { name: 'fix-the-bug' } });
    const gitDir = join(cp.cp.config.dataDir, 'sandboxes', record.id, 'git');
    expect(existsSync(join(gitDir, 'HEAD'))).toBe(true);
    const tampered = await attempt(
      `ls ${gitDir}; git --git-dir=${gitDir} reset --soft HEAD~1; rm -rf ${gitDir} /src/.git; echo "rm: $?"`,
    );
    expect(tampered).toContain(`ls: cannot access '${gitDir}': No such file or directory`);
    expect(tampered).toContain('not a git repository');
    expect(tampered).toContain('rm: 0');
    expect(existsSync(join(gitDir, 'HEAD'))).toBe(true);

    // the bundle waits for the snapshots of every change made so far
    const bundle = await fetch(`${cp.url}/v1/workspaces/${ws}/sandboxes/fix-the-bug/bundle`, {
      headers: { authorization: `Bearer ${cp.ownerToken}` },
    });
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toBe('application/x-git-bundle');
    const history = fetchedHistory(dir, Buffer.from(await bundle.arrayBuffer()));
    expect(history.map((c) => c.subject)).toEqual(['patch: math.js', 'initial']);
    expect(history[0]!.author).toBe(`bug fixer <session-${sessionId}@sessions.aileron.invalid>`);

    const snapshots = await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/fix-the-bug/snapshots`);
    expect(snapshots.body.snapshots).toEqual([
      expect.objectContaining({
        trigger: 'patch',
        message: 'patch: math.js',
        files: [{ path: 'math.js', status: 'M' }],
        session: sessionId,
      }),
    ]);
    const shown = await cp.request(
      'GET',
      `/v1/workspaces/${ws}/sandboxes/fix-the-bug/snapshots/${snapshots.body.snapshots[0].sha}/diff`,
    );
    expect(shown.status).toBe(200);
    expect(shown.text).toContain('-  return a - b;\n+  return a + b;');
  });

  /** A sandbox of its own and a client on it, as a session with sandbox:use (and, if given, a sandbox caveat). */
  async function aSandbox(
    name: string,
    options: { caveat?: string | null; caps?: string[]; network?: string } = {},
  ): Promise<{
    client: Client;
    token: string;
    call: (tool: string, args: Record<string, unknown>) => Promise<Record<string, unknown>>;
  }> {
    const made = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, {
      body: { name, ...(options.network ? { network: options.network } : {}) },
    });
    expect(made.status, made.text).toBe(201);
    const session = await cp.request('POST', '/v1/sessions', {
      body: {
        workspace: ws,
        name: `agent on ${name}`,
        caps: options.caps ?? ['actions:list', 'actions:run', 'sandbox:use'],
        ...(options.caveat === null ? {} : { caveats: { sandbox: options.caveat ?? name } }),
      },
    });
    expect(session.status, session.text).toBe(201);
    const own = (await connect(cp, session.body.caveat_token, `/mcp/${ws}/sandbox`)).client;
    clients.push(own);
    return {
      client: own,
      token: session.body.caveat_token,
      call: async (tool, args) =>
        (await own.callTool({ name: tool, arguments: { sandbox: name, ...args } })) as Record<string, unknown>,
    };
  }

  it('answers "sandbox not found" as a tool error, and a caveat token reaches only its own sandbox', async () => {
    const other = await aSandbox('elsewhere', { caveat: null });
    const missing = await other.client.callTool({ name: 'read', arguments: { sandbox: 'No Such Box', path: 'x' } });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toBe('SANDBOX_NOT_FOUND: sandbox not found: no-such-box');
    // the first session's token names fix-the-bug only
    const refused = await call('read', { sandbox: 'elsewhere', path: 'x' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain('does not reach sandbox "elsewhere"');
    expect(textOf(await other.call('write', { path: 'x.txt', content: 'mine\n' }))).toBe('Created x.txt (5 bytes)');
    // without sandbox:use, nothing
    const noUse = await aSandbox('no-use', { caps: ['actions:list', 'actions:run'] });
    expect(textOf(await noUse.call('read', { path: 'x' }))).toContain('does not reach sandbox "no-use"');
    // a caveat token never makes or deletes sandboxes
    const made = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, {
      token: sessionToken,
      body: { name: 'by-agent' },
    });
    expect(made.status).toBe(403);
    expect(made.body.code).toBe('CAPABILITY_REQUIRED');
    expect(
      (await cp.request('DELETE', `/v1/workspaces/${ws}/sandboxes/fix-the-bug`, { token: sessionToken })).status,
    ).toBe(403);
  });

  it("a token narrowed to listing and another sandbox, sent on the wider token's Mcp-Session-Id, is refused and its bash never runs", async () => {
    const box = await aSandbox('ridden-box');
    const { transport } = await connect(cp, box.token, `/mcp/${ws}`);
    const narrow = attenuateCaveatToken(box.token, [
      { kind: 'caps', caps: ['actions:list'] },
      { kind: 'sandbox', name: 'elsewhere' },
    ]);
    const ridden = await cp.request('POST', `/mcp/${ws}`, {
      token: narrow,
      headers: {
        accept: 'application/json, text/event-stream',
        'mcp-session-id': transport.sessionId!,
        'mcp-protocol-version': transport.protocolVersion ?? '2025-11-25',
      },
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'sandbox__bash', arguments: { sandbox: 'ridden-box', command: 'touch ridden.txt' } },
      },
    });
    expect(ridden.status, ridden.text).toBe(404);
    expect(ridden.body.code).toBe('MCP_SESSION_NOT_FOUND');
    expect(textOf(await box.call('ls', { path: '.' }))).not.toContain('ridden.txt');
    await transport.close();
  });

  it('bash: a non-zero exit is a result with its stderr; a timeout kills everything the command started', async () => {
    const box = await aSandbox('bash-box');
    const failed = await box.call('bash', { command: 'echo out; echo oops >&2; exit 3' });
    expect(failed.isError).toBeFalsy();
    expect(failed.structuredContent).toEqual({ stdout: 'out\n', stderr: 'oops\n', exitCode: 3 });
    const timedOut = await box.call('bash', {
      command: '(sleep 300 &); setsid sleep 301 & nohup sleep 302 >/dev/null 2>&1 & sleep 303',
      timeout: 1000,
    });
    expect((timedOut.structuredContent as { exitCode: number; stderr: string }).exitCode).toBe(124);
    expect((timedOut.structuredContent as { stderr: string }).stderr).toContain('killed with everything it started');
    const left = await box.call('bash', { command: 'ps -eo args | grep -c "^sleep 30" || true' });
    expect((left.structuredContent as { stdout: string }).stdout.trim()).toBe('0');
    // the workdir: relative to /src, and one that is no directory says so
    await box.call('bash', { command: 'mkdir -p sub/dir' });
    expect((await box.call('bash', { command: 'pwd', workdir: 'sub/dir' })).structuredContent).toMatchObject({
      stdout: '/src/sub/dir\n',
      exitCode: 0,
    });
    const nowhere = await box.call('bash', { command: 'pwd', workdir: '/nope' });
    expect(nowhere.isError).toBe(true);
    expect(textOf(nowhere)).toContain('workdir /nope: not a directory');
  });

  it('nothing reaches the host: .., absolute paths, symlinks and hard links made by bash, /proc/1/root', async () => {
    const box = await aSandbox('escape-box');
    const marker = join(cp.cp.config.dataDir, 'host-secret.txt');
    writeFileSync(marker, 'host secret\n');
    for (const path of [marker, `../../../../../..${marker}`, `/proc/1/root${marker}`, `/proc/self/root${marker}`]) {
      const read = await box.call('read', { path });
      expect(read.isError, path).toBe(true);
      expect(textOf(read)).not.toContain('host secret');
    }
    const links = await box.call('bash', {
      command: `ln -s ${marker} link.txt; ln -s / root; ln ${marker} hard.txt 2>&1; ls /src`,
    });
    expect((links.structuredContent as { stdout: string }).stdout).toContain('ln: failed to access');
    for (const path of ['link.txt', `root${marker}`, 'hard.txt']) {
      const read = await box.call('read', { path });
      expect(read.isError, path).toBe(true);
      expect(textOf(read)).not.toContain('host secret');
    }
    // a write through a link to the host lands in the sandbox's own filesystem or nowhere
    await box.call('bash', { command: `ln -sf ${cp.cp.config.dataDir} datadir` });
    const written = await box.call('write', { path: 'datadir/planted.txt', content: 'x' });
    expect(textOf(written)).not.toContain('Created');
    expect(readFileSync(marker, 'utf8')).toBe('host secret\n');
    expect(() => readFileSync(join(cp.cp.config.dataDir, 'planted.txt'))).toThrow();
    // the host's own files are not there to read either
    expect(textOf(await box.call('bash', { command: 'cat /etc/shadow /root/.bashrc 2>&1 | head -2' }))).toContain(
      'No such file',
    );
    // nor can a command speak for the runner: it does not even see it (a pid namespace of its own), so no fd, signal, ptrace or pidfd names it
    const forged = (
      await box.call('bash', {
        command: `for p in $(pgrep -x node); do for fd in 0 1; do echo '{"id":0,"result":{}}' > /proc/$p/fd/$fd; done; done 2>&1; pgrep -xc node`,
      })
    ).structuredContent as { stdout: string };
    expect(forged.stdout).toBe('0\n');
  });

  it('one sandbox, two sessions at once: every change kept, to one file too, each its own snapshot commit', async () => {
    const first = await aSandbox('shared-box', { caveat: null });
    const secondSession = await cp.request('POST', '/v1/sessions', {
      body: { workspace: ws, name: 'second agent', caps: ['actions:list', 'actions:run', 'sandbox:use'] },
    });
    const second = (await connect(cp, secondSession.body.caveat_token, `/mcp/${ws}/sandbox`)).client;
    clients.push(second);
    const secondCall = async (tool: string, args: Record<string, unknown>) =>
      (await second.callTool({ name: tool, arguments: { sandbox: 'shared-box', ...args } })) as Record<string, unknown>;
    const lines = Array.from({ length: 20 }, (_, i) => `line ${i}`);
    expect(textOf(await first.call('write', { path: 'shared.txt', content: `${lines.join('\n')}\n` }))).toBe(
      'Created shared.txt (150 bytes)',
    );
    // a patch reads the file, changes it and writes it back: run at once without one after the other, changes would be lost
    const change = (i: number, by: string) =>
      ['--- a/shared.txt', '+++ b/shared.txt', `@@ -${i + 1},1 +${i + 1},1 @@`, `-line ${i}`, `+${by} ${i}`, ''].join(
        '\n',
      );
    const calls = Array.from({ length: 10 }, (_, i) => [
      first.call('bash', { command: `echo first-${i} >> log.txt` }),
      secondCall('bash', { command: `echo second-${i} >> log.txt` }),
      first.call('patch', { path: 'shared.txt', diff: change(i, 'first') }),
      secondCall('patch', { path: 'shared.txt', diff: change(10 + i, 'second') }),
    ]).flat();
    const results = await Promise.all(calls);
    expect(results.filter((r) => r.isError).map(textOf)).toEqual([]);
    const log = textOf(await first.call('read', { path: 'log.txt' }))
      .trim()
      .split('\n');
    expect(log.sort()).toEqual(
      [
        ...Array.from({ length: 10 }, (_, i) => `first-${i}`),
        ...Array.from({ length: 10 }, (_, i) => `second-${i}`),
      ].sort(),
    );
    expect(textOf(await secondCall('read', { path: 'shared.txt' }))).toBe(
      lines.map((_, i) => (i < 10 ? `first ${i}` : `second ${i}`)).join('\n') + '\n',
    );

    // a write and a patch of one file at once: either order, never a mix
    const rewrite = ['--- a/shared.txt', '+++ b/shared.txt', '@@ -1,1 +1,1 @@', '-rewritten', '+patched', ''].join(
      '\n',
    );
    const [written, patched] = await Promise.all([
      first.call('write', { path: 'shared.txt', content: 'rewritten\n' }),
      secondCall('patch', { path: 'shared.txt', diff: rewrite }),
    ]);
    expect(written.isError).toBeFalsy();
    const final = textOf(await first.call('read', { path: 'shared.txt' }));
    if (patched.isError) {
      // the patch came first, against the twenty changed lines, and changed nothing
      expect(textOf(patched)).toContain('nothing was changed');
      expect(final).toBe('rewritten\n');
    } else {
      expect(final).toBe('patched\n');
    }

    const bundle = await fetch(`${cp.url}/v1/workspaces/${ws}/sandboxes/shared-box/bundle`, {
      headers: { authorization: `Bearer ${cp.ownerToken}` },
    });
    const history = fetchedHistory(dir, Buffer.from(await bundle.arrayBuffer()));
    const commits = 1 + 20 + 20 + 1 + (patched.isError ? 0 : 1);
    expect(history).toHaveLength(commits);
    expect(history.filter((c) => c.subject.startsWith('bash: echo ')).length).toBe(20);
    expect(history.filter((c) => c.subject === 'patch: shared.txt').length).toBe(patched.isError ? 20 : 21);
    expect(history.filter((c) => c.subject === 'write: shared.txt').length).toBe(2);
    expect(
      (await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/shared-box/snapshots?limit=100`)).body.snapshots,
    ).toHaveLength(commits);
    expect(new Set(history.map((c) => c.author.split(' <')[0]))).toEqual(
      new Set(['agent on shared-box', 'second agent']),
    );
  });

  it('patch: a diff of 10,000 lines applies intact; one that does not apply changes nothing and says why', async () => {
    const box = await aSandbox('big-diff');
    const lines = Array.from({ length: 10_000 }, (_, i) => `line ${i}`);
    await box.call('write', { path: 'big.txt', content: lines.join('\n') + '\n' });
    const diff = [
      '--- a/big.txt',
      '+++ b/big.txt',
      '@@ -1,10000 +1,10000 @@',
      ...lines.map((l) => `-${l}`),
      ...lines.map((l) => `+${l} (changed)`),
      '',
    ].join('\n');
    expect(textOf(await box.call('patch', { path: 'big.txt', diff }))).toBe('Patched big.txt (+10000 -10000)');
    const read = textOf(await box.call('read', { path: 'big.txt', offset: 9998, limit: 5 }));
    expect(read).toBe('line 9998 (changed)\nline 9999 (changed)\n');
    const stale = await box.call('patch', {
      path: 'big.txt',
      diff: ['--- a/big.txt', '+++ b/big.txt', '@@ -1,1 +1,1 @@', '-line 0', '+line zero', ''].join('\n'),
    });
    expect(stale.isError).toBe(true);
    expect(textOf(stale)).toContain('expects line 1 to be "line 0" but it is "line 0 (changed)"; nothing was changed');
    expect(textOf(await box.call('read', { path: 'big.txt', limit: 1 }))).toBe('line 0 (changed)\n');
    const gone = await box.call('patch', { path: 'nothing.txt', diff: 'not a diff at all' });
    expect(textOf(gone)).toContain('no hunks');
  });

  it('ls, glob and grep find what is there, inside the sandbox', async () => {
    const box = await aSandbox('search-box');
    await box.call('write', { path: 'src/a.ts', content: 'export const needle = 1;\n' });
    await box.call('write', { path: 'src/deep/b.ts', content: 'const hay = 2;\nconst needle2 = 3;\n' });
    await box.call('write', { path: 'README.md', content: 'needle in docs\n' });
    expect(textOf(await box.call('ls', { path: '.' })).split('\n')).toEqual(['README.md  15', 'src/']);
    expect((await box.call('glob', { pattern: '**/*.ts' })).structuredContent).toMatchObject({
      files: ['src/a.ts', 'src/deep/b.ts'],
    });
    const grep = textOf(await box.call('grep', { pattern: 'needle[0-9]?', path: '.', include: '*.ts' }));
    expect(grep.split('\n').sort()).toEqual([
      '/src/src/a.ts:1: export const needle = 1;',
      '/src/src/deep/b.ts:2: const needle2 = 3;',
    ]);
  });

  it('shell rules: forbidden does not run, whatever the disguise; prompt runs once when approved, never when denied', async () => {
    const box = await aSandbox('rules-box');
    const approver = await people.aPerson(cp, ws, 'approver');
    const put = await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, {
      body: {
        rules: [{ program: 'rm', args: [], decision: 'forbidden', justification: 'Deleting is for people.' }],
        codex_rules: 'prefix_rule(pattern = ["touch", "approved.txt"], decision = "prompt")\n',
      },
    });
    expect(put.status, put.text).toBe(200);
    await box.call('write', { path: 'keep.txt', content: 'keep\n' });
    for (const command of [
      'rm keep.txt',
      '\\rm keep.txt',
      "'r'm keep.txt",
      'echo hi | rm keep.txt',
      'true && (rm keep.txt)',
      'f() { rm keep.txt; }; f',
      'env rm keep.txt',
      'command rm keep.txt',
      'bash -c "rm keep.txt"',
      '/bin/rm keep.txt',
      'x=$(rm keep.txt)',
      'sudo rm keep.txt',
    ]) {
      const ran = (await box.call('bash', { command })).structuredContent as { exitCode: number; stderr: string };
      expect(ran.exitCode, command).toBe(1);
      expect(ran.stderr, command).toContain('Deleting is for people.');
    }
    // a link of its own to rm is rm, found from where the command runs as execve would find it
    expect(
      (await box.call('bash', { command: 'mkdir -p sub && ln -s /usr/bin/rm sub/x' })).structuredContent,
    ).toMatchObject({ exitCode: 0 });
    for (const [command, workdir] of [
      ['./x ../keep.txt', 'sub'],
      ['sub/x keep.txt', '.'],
      ['../sub/x ../keep.txt', 'sub'],
    ]) {
      const ran = (await box.call('bash', { command, workdir })).structuredContent as {
        exitCode: number;
        stderr: string;
      };
      expect(ran.exitCode, command).toBe(1);
      expect(ran.stderr, command).toContain('Deleting is for people.');
    }
    // code bash finds in a quoted subscript is read; a program the analysis does not know, given a path
    // the sandbox resolves to rm, is put to a person
    const hidden = (await box.call('bash', { command: "test -v 'a[$(rm keep.txt)]'" })).structuredContent as {
      exitCode: number;
      stderr: string;
    };
    expect(hidden.exitCode).toBe(1);
    expect(hidden.stderr).toContain('Deleting is for people.');
    const wrapped = (await box.call('bash', { command: 'some-wrapper sub/x keep.txt' })).structuredContent as {
      exitCode: number;
      stderr: string;
    };
    expect(wrapped.exitCode).toBe(1);
    expect(wrapped.stderr).toMatch(
      /some-wrapper is not a program this analysis knows, and its argument sub\/x is the program of rule "rm" .*Approval [0-9a-f-]{36} is pending/,
    );
    expect(textOf(await box.call('read', { path: 'keep.txt' }))).toBe('keep\n');
    expect((await box.call('bash', { command: 'ls' })).structuredContent).toMatchObject({ exitCode: 0 });
    // a line that cannot be read cannot be checked: a person decides, and until then it does not run
    const unreadable = (await box.call('bash', { command: 'rm keep.txt; echo "unterminated' })).structuredContent as {
      exitCode: number;
      stderr: string;
    };
    expect(unreadable.exitCode).toBe(1);
    expect(unreadable.stderr).toMatch(
      /could not be analysed .*so a person decides\. Approval [0-9a-f-]{36} is pending/,
    );
    expect(textOf(await box.call('read', { path: 'keep.txt' }))).toBe('keep\n');

    const asked = (await box.call('bash', { command: 'touch approved.txt' })).structuredContent as {
      exitCode: number;
      stderr: string;
    };
    expect(asked.exitCode).toBe(1);
    const approvalId = /Approval ([0-9a-f-]{36}) is pending/.exec(asked.stderr)?.[1];
    expect(approvalId, asked.stderr).toBeDefined();
    expect(textOf(await box.call('ls', { path: '.' }))).not.toContain('approved.txt');
    expect(
      (
        await cp.request('POST', `/v1/approvals/${approvalId}/approve`, {
          token: approver.token,
          body: { reason: 'fine' },
        })
      ).status,
    ).toBe(200);
    expect((await box.call('bash', { command: 'touch approved.txt' })).structuredContent).toMatchObject({
      exitCode: 0,
    });
    expect(textOf(await box.call('ls', { path: '.' }))).toContain('approved.txt');
    // once: the same command asks again
    const again = (await box.call('bash', { command: 'touch approved.txt' })).structuredContent as { stderr: string };
    const secondId = /Approval ([0-9a-f-]{36}) is pending/.exec(again.stderr)?.[1];
    expect(secondId).toBeDefined();
    expect(secondId).not.toBe(approvalId);
    await box.call('bash', { command: 'mv approved.txt moved.txt' });
    expect(
      (await cp.request('POST', `/v1/approvals/${secondId}/deny`, { token: approver.token, body: { reason: 'no' } }))
        .status,
    ).toBe(200);
    const denied = (await box.call('bash', { command: 'touch approved.txt' })).structuredContent as {
      exitCode: number;
      stderr: string;
    };
    // denied, it never runs: asking again is a new request for a person, as every retry of a denied call is
    expect(denied.exitCode).toBe(1);
    const thirdId = /Approval ([0-9a-f-]{36}) is pending/.exec(denied.stderr)?.[1];
    expect(thirdId, denied.stderr).toBeDefined();
    expect([approvalId, secondId]).not.toContain(thirdId);
    expect((await cp.request('GET', `/v1/approvals/${secondId}`, { token: approver.token })).body.status).toBe(
      'denied',
    );
    expect(textOf(await box.call('ls', { path: '.' }))).not.toContain('approved.txt');
    // a rules file that does not hold together is refused, naming where
    const bad = await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, {
      body: { codex_rules: 'prefix_rule(pattern = ["git"], decision = "maybe")\n' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('SHELL_RULES_INVALID');
    await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, { body: { rules: [] } });
  });

  it('shell rules with elicitation on: a person at their own client decides, their answer an audit record; an agent\'s or program\'s own "accept" runs nothing', async () => {
    await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'ask-box' } });
    expect(
      (
        await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, {
          body: { rules: [{ program: 'touch', args: [], decision: 'prompt' }], elicitation: true },
        })
      ).status,
    ).toBe(200);
    const bash = async (c: Client, command: string) =>
      (await c.callTool({ name: 'bash', arguments: { sandbox: 'ask-box', command } })).structuredContent as {
        exitCode: number;
        stderr: string;
      };
    const listed = async (c: Client) => textOf(await c.callTool({ name: 'ls', arguments: { sandbox: 'ask-box' } }));

    // an agent's client (a caveat token) that answers "accept" itself: a person must approve, and until then nothing runs
    const session = await cp.request('POST', '/v1/sessions', {
      body: { workspace: ws, name: 'self-approving agent', caps: ['actions:list', 'actions:run', 'sandbox:use'] },
    });
    const { client: agent } = await connect(cp, session.body.caveat_token, `/mcp/${ws}/sandbox`, { elicitation: {} });
    clients.push(agent);
    let agentAsked = 0;
    agent.setRequestHandler(ElicitRequestSchema, async () => {
      agentAsked++;
      return { action: 'accept' };
    });
    const selfApproved = await bash(agent, 'touch agent.txt');
    expect(selfApproved.exitCode).toBe(1);
    const approvalId = /Approval ([0-9a-f-]{36}) is pending/.exec(selfApproved.stderr)?.[1];
    expect(approvalId, selfApproved.stderr).toBeDefined();
    expect(agentAsked).toBe(0);
    expect(await listed(agent)).not.toContain('agent.txt');
    const approver = await people.aPerson(cp, ws, 'approver');
    expect(
      (
        await cp.request('POST', `/v1/approvals/${approvalId}/approve`, {
          token: approver.token,
          body: { reason: 'fine' },
        })
      ).status,
    ).toBe(200);
    expect(await bash(agent, 'touch agent.txt')).toMatchObject({ exitCode: 0 });
    expect(await listed(agent)).toContain('agent.txt');

    // a program's client (an API token) likewise
    const { client: program } = await connect(cp, cp.ownerToken, `/mcp/${ws}/sandbox`, { elicitation: {} });
    clients.push(program);
    program.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept' }));
    expect((await bash(program, 'touch program.txt')).stderr).toMatch(/Approval [0-9a-f-]{36} is pending/);
    expect(await listed(program)).not.toContain('program.txt');

    // a person signed in at their own client is asked, and decides
    const person = await people.aPerson(cp, ws, 'member');
    const { client: mine } = await connect(cp, person.token, `/mcp/${ws}/sandbox`, { elicitation: {} });
    clients.push(mine);
    const asked: string[] = [];
    mine.setRequestHandler(ElicitRequestSchema, async (request) => {
      const message = String(request.params.message);
      asked.push(message);
      return { action: message.includes('touch yes.txt') ? 'accept' : 'decline' };
    });
    expect(await bash(mine, 'touch yes.txt')).toMatchObject({ exitCode: 0 });
    const declined = await bash(mine, 'touch no.txt');
    expect(declined.exitCode).toBe(1);
    expect(declined.stderr).toContain('declined');
    expect(asked).toHaveLength(2);
    expect(asked[0]).toContain('Run this command in sandbox "ask-box"');
    expect(await listed(mine)).not.toContain('no.txt');
    // each answer is an audit record naming the person, the command and what they answered
    const audit = await cp.request('GET', `/v1/workspaces/${ws}/audit?type=sandbox.prompt_answered`);
    expect(audit.status, audit.text).toBe(200);
    const answers = (
      audit.body.events as {
        actor: string;
        data: { answer: string; via: string; arguments: { command: string; sandbox: string } };
      }[]
    ).map((e) => ({
      actor: e.actor,
      answer: e.data.answer,
      via: e.data.via,
      command: e.data.arguments.command,
      sandbox: e.data.arguments.sandbox,
    }));
    expect(answers).toHaveLength(2);
    expect(answers).toEqual(
      expect.arrayContaining([
        {
          actor: `user:${person.id}`,
          answer: 'accept',
          via: 'elicitation',
          command: 'touch yes.txt',
          sandbox: 'ask-box',
        },
        {
          actor: `user:${person.id}`,
          answer: 'decline',
          via: 'elicitation',
          command: 'touch no.txt',
          sandbox: 'ask-box',
        },
      ]),
    );

    // a client that cannot be asked: the approval flow, as without the setting
    const { client: plain } = await connect(cp, person.token, `/mcp/${ws}/sandbox`);
    clients.push(plain);
    expect((await bash(plain, 'touch other.txt')).stderr).toMatch(/Approval [0-9a-f-]{36} is pending/);
    await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, { body: { rules: [] } });
  });

  it('the workspace endpoint lists the sandbox tools as sandbox__*, decided by the policy like any tool', async () => {
    const { client: all } = await connect(cp, cp.ownerToken, `/mcp/${ws}`);
    clients.push(all);
    const names = (await all.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'sandbox__read',
        'sandbox__write',
        'sandbox__patch',
        'sandbox__bash',
        'sandbox__ls',
        'sandbox__glob',
        'sandbox__grep',
      ]),
    );
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: {
        default: 'allow',
        rules: [
          {
            id: 'no-curl',
            effect: 'deny',
            servers: ['sandbox'],
            tools: ['bash'],
            arguments: [{ path: 'command', regex: '\\bcurl\\b' }],
          },
        ],
      },
    });
    const denied = await all.callTool({
      name: 'sandbox__bash',
      arguments: { sandbox: 'fix-the-bug', command: 'curl http://example.com' },
    });
    expect(denied.isError).toBe(true);
    expect(textOf(denied)).toContain('Denied by policy (rule no-curl');
    const allowed = await all.callTool({
      name: 'sandbox__bash',
      arguments: { sandbox: 'fix-the-bug', command: 'echo fine' },
    });
    expect(allowed.structuredContent).toMatchObject({ stdout: 'fine\n', exitCode: 0 });
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
    // every call is an execution record (written in batches after the answers)
    await cp.cp.app.get(ExecutionJournal).flush();
    const audit = await cp.request('GET', `/v1/workspaces/${ws}/audit?tool=bash&limit=200`);
    const types = (audit.body.events as { type: string; server: string }[])
      .filter((e) => e.server === 'sandbox')
      .map((e) => e.type);
    expect(types).toContain('execution.succeeded');
    expect(types).toContain('execution.failed');
  });

  it('codex/sandbox-state/update: declared, answered {} once applied, and later bash calls of that session obey it', async () => {
    const box = await aSandbox('codex-box', { network: 'egress' });
    expect(box.client.getServerCapabilities()?.experimental).toEqual({ 'codex/sandbox-state': { version: '1.0.0' } });
    const interfaces = async () =>
      (
        (await box.call('bash', { command: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '" }))
          .structuredContent as { stdout: string }
      ).stdout
        .trim()
        .split('\n');
    expect((await interfaces()).length).toBeGreaterThan(1);
    const update = (sandboxPolicy: Record<string, unknown>) =>
      box.client.request(
        { method: 'codex/sandbox-state/update', params: { sandboxPolicy } } as never,
        EmptyResultSchema,
      );
    expect(await update({ type: 'read-only', network_access: false })).toEqual({});
    const refused = (await box.call('bash', { command: 'touch /src/blocked.txt' })).structuredContent as {
      exitCode: number;
      stderr: string;
    };
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain('Read-only file system');
    // read-only is all of it, as Codex has it: /tmp and the home directory too
    for (const place of ['/tmp/x', '~/x'])
      expect((await box.call('bash', { command: `echo scratch > ${place}` })).structuredContent, place).toMatchObject({
        exitCode: 1,
        stderr: expect.stringContaining('Read-only file system'),
      });
    expect(await interfaces()).toEqual(['lo']);
    // a root of the client's machine outside its working directory is not the sandbox's: said, never taken
    expect(
      await update({ type: 'workspace-write', writable_roots: ['/home/user/code'], network_access: true }),
    ).toEqual({
      _meta: {
        'aileron/sandbox-state': {
          ignored_writable_roots: [
            { path: '/home/user/code', reason: expect.stringMatching(/^outside what the sandbox may write/) },
          ],
        },
      },
    });
    expect((await box.call('bash', { command: 'touch /src/allowed.txt && ls /src' })).structuredContent).toMatchObject({
      stdout: 'allowed.txt\n',
      exitCode: 0,
    });
    expect((await interfaces()).length).toBeGreaterThan(1);
  });

  it('codex/sandbox-state/update workspace-write: only the working directory and the writable roots take writes, /tmp and TMPDIR as the flags say, and no root widens the sandbox', async () => {
    const box = await aSandbox('roots-box');
    const bash = async (command: string) =>
      (await box.call('bash', { command })).structuredContent as { stdout: string; stderr: string; exitCode: number };
    expect(
      await bash('mkdir -p app/.git lib other && ln -s /etc etc-link && ln -s /src/other other-link && echo made'),
    ).toMatchObject({ stdout: 'made\n', exitCode: 0 });
    const update = (sandboxPolicy: Record<string, unknown>, sandboxCwd?: string) =>
      box.client.request(
        {
          method: 'codex/sandbox-state/update',
          params: { sandboxPolicy, ...(sandboxCwd ? { sandboxCwd } : {}) },
        } as never,
        EmptyResultSchema,
      );
    const roots = ['/src/lib', '/', '/etc', '/src/../etc', '/src/etc-link', '/src/other-link', '/src/missing'];
    const acked = await update({ type: 'workspace-write', writable_roots: roots }, '/src/app');
    // Codex reads the empty ack; what was not taken is said beside it
    expect(acked._meta?.['aileron/sandbox-state']).toEqual({
      ignored_writable_roots: ['/', '/etc', '/src/../etc'].map((path) => ({
        path,
        reason: expect.stringMatching(/^outside what the sandbox may write/),
      })),
    });
    expect(await bash('touch app/a lib/b && echo wrote')).toMatchObject({ stdout: 'wrote\n', exitCode: 0 });
    const refusedAt = async (command: string) => refusedReadOnly(await bash(command), command);
    const outside = await refusedAt('touch other/c');
    // the runner looked at each root in the sandbox: links and missing roots are not taken, and it says so
    expectIgnoredRoots(outside.stderr, [
      ['/src/etc-link', 'it is or passes through a symbolic link (to /etc)'],
      ['/src/other-link', 'it is or passes through a symbolic link (to /src/other)'],
      ['/src/missing', 'it does not exist in the sandbox'],
    ]);
    await refusedAt('touch other-link/d');
    await refusedAt('touch etc-link/passwd-x');
    await refusedAt('touch top-level-file');
    // inside a writable root, .git stays read-only, as Codex keeps it; the home directory is not the workspace
    await refusedAt('touch app/.git/hooks-x');
    await refusedAt('touch ~/h');
    expect(await bash('echo t > /tmp/t && echo "$TMPDIR"')).toMatchObject({ stdout: '/tmp\n', exitCode: 0 });

    await update({ type: 'workspace-write', exclude_slash_tmp: true }, '/src/app');
    await refusedAt('echo t > /tmp/u');
    expect(await bash('echo t > "$TMPDIR/u" && cat "$TMPDIR/u" && echo "$TMPDIR"')).toMatchObject({
      stdout: 't\n/tmp/tmpdir\n',
      exitCode: 0,
    });
    await update({ type: 'workspace-write', exclude_slash_tmp: true, exclude_tmpdir_env_var: true }, '/src/app');
    const neither = await refusedAt('echo t > "$TMPDIR/v"');
    expect(neither.stderr).toContain('/tmp/v');
    await refusedAt('echo t > /tmp/tmpdir/v');
    await update({ type: 'workspace-write', exclude_tmpdir_env_var: true });
    expect(await bash('echo t > /tmp/w && touch other/e && echo both')).toMatchObject({
      stdout: 'both\n',
      exitCode: 0,
    });

    // a policy it cannot read is refused saying why, and the session keeps the bounds it had
    await expect(update({ type: 'everything-goes' })).rejects.toThrow(/params\.sandboxPolicy/);
    await expect(update({ type: 'workspace-write', writable_roots: '/' })).rejects.toThrow(
      /params\.sandboxPolicy\.writable_roots/,
    );
    await refusedAt('touch ~/still-read-only');
    await update({ type: 'danger-full-access' });
    expect(await bash('touch ~/h other/f app/.git/g && echo free')).toMatchObject({ stdout: 'free\n', exitCode: 0 });
    // none of it ever reached the host: the link's target on the host is untouched
    expect(existsSync('/etc/passwd-x')).toBe(false);
  });

  it('codex/sandbox-state on /mcp/{ws}: declared where the session reaches a sandbox, and routed to the sandbox tools of that MCP session alone', async () => {
    const box = await aSandbox('agg-box');
    const aggregate = async (token: string) => {
      const client = (await connect(cp, token, `/mcp/${ws}`)).client;
      clients.push(client);
      return client;
    };
    const update = (client: Client, sandboxPolicy: Record<string, unknown>) =>
      client.request(
        { method: 'codex/sandbox-state/update', params: { sandboxPolicy, sandboxCwd: '/home/dev/app' } } as never,
        EmptyResultSchema,
      );
    const touch = async (client: Client, file: string) =>
      structured(
        await client.callTool({ name: 'sandbox__bash', arguments: { sandbox: 'agg-box', command: `touch ${file}` } }),
      );
    const codex = await aggregate(box.token);
    expect(codex.getServerCapabilities()?.experimental).toEqual({ 'codex/sandbox-state': { version: '1.0.0' } });
    expect(await update(codex, { type: 'workspace-write', writable_roots: ['/home/dev/app/out', '/etc'] })).toEqual({
      _meta: {
        'aileron/sandbox-state': {
          ignored_writable_roots: [
            { path: '/etc', reason: expect.stringMatching(/^outside what the sandbox may write/) },
          ],
        },
      },
    });
    expect(await update(codex, { type: 'read-only' })).toEqual({});
    expect(await touch(codex, 'blocked')).toMatchObject({
      exitCode: 1,
      stderr: expect.stringContaining('Read-only file system'),
    });
    // the policy is that MCP session's: another session of the same token, on either endpoint, keeps the sandbox's bounds
    expect(await touch(await aggregate(box.token), 'from-another-session')).toMatchObject({ exitCode: 0 });
    expect(await box.call('bash', { command: 'touch direct && ls' })).toMatchObject({
      structuredContent: { stdout: 'direct\nfrom-another-session\n', exitCode: 0 },
    });
    // a bad policy is the sandbox server's refusal, passed on as it said it
    await expect(update(codex, { type: 'workspace-write', network_access: 'yes' })).rejects.toThrow(
      /params\.sandboxPolicy\.network_access/,
    );

    // a session whose token does not reach the sandbox tools has neither the capability nor the request
    const narrow = await cp.request('POST', '/v1/sessions', {
      body: {
        workspace: ws,
        name: 'no sandbox',
        caps: ['actions:list', 'actions:run'],
        caveats: { servers: ['github'] },
      },
    });
    expect(narrow.status, narrow.text).toBe(201);
    const other = await aggregate(narrow.body.caveat_token);
    expect(other.getServerCapabilities()?.experimental).toBeUndefined();
    await expect(update(other, { type: 'read-only' })).rejects.toThrow(
      /Method not found: codex\/sandbox-state\/update/,
    );
  });

  it('a catalog server that takes the policy gets it on /mcp/{ws} beside the sandbox tools, and again in the new session of its restarted instance', async () => {
    const server = await aRemoteServer(cp, cp.ownerToken, ws, policyServer());
    const client = (await connect(cp, cp.ownerToken, `/mcp/${ws}`)).client;
    clients.push(client);
    expect(client.getServerCapabilities()?.experimental).toEqual({ 'codex/sandbox-state': { version: '1.0.0' } });
    const seen = async () => textOf(await client.callTool({ name: `${server}__policy`, arguments: {} })).split(' ');
    const [none, firstPid] = await seen();
    expect(none).toBe('none');
    expect(
      await client.request(
        { method: 'codex/sandbox-state/update', params: { sandboxPolicy: { type: 'read-only' } } } as never,
        EmptyResultSchema,
      ),
    ).toEqual({});
    expect((await seen())[0]).toBe('read-only');
    // the sandbox tools of the same MCP session got it too
    expect(
      structured(
        await client.callTool({ name: 'sandbox__bash', arguments: { sandbox: 'fix-the-bug', command: 'touch x' } }),
      ),
    ).toMatchObject({ exitCode: 1, stderr: expect.stringContaining('Read-only file system') });
    await client.callTool({ name: `${server}__crash`, arguments: {} }).catch(() => undefined);
    const [after, secondPid] = await eventually('a new instance answers', async () => {
      const answer = await seen().catch(() => null);
      return answer && answer[1] !== firstPid ? answer : undefined;
    });
    expect(secondPid).not.toBe(firstPid);
    expect(after).toBe('read-only');
  });

  it('never snapshots a lost+found at the root of /src (a new ext4 volume has one), only the agent’s deeper ones', async () => {
    const box = await aSandbox('fresh-volume');
    const made = await box.call('bash', {
      command:
        "mkdir lost+found docs docs/lost+found && echo 'half a file' > 'lost+found/#131074' && echo kept > docs/lost+found/notes.md",
    });
    expect(made.structuredContent).toMatchObject({ exitCode: 0 });
    await box.call('write', { path: 'app.ts', content: 'export {};\n' });
    // the bundle waits for the last snapshot
    const bundle = await fetch(`${cp.url}/v1/workspaces/${ws}/sandboxes/fresh-volume/bundle`, {
      headers: { authorization: `Bearer ${cp.ownerToken}` },
    });
    expect(bundle.status).toBe(200);
    const snapshots = (await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/fresh-volume/snapshots`)).body
      .snapshots as { message: string; files: { path: string }[] }[];
    expect(snapshots.map((s) => [s.message, s.files.map((f) => f.path)])).toEqual([
      ['write: app.ts', ['app.ts']],
      [expect.stringMatching(/^bash: mkdir lost\+found/), ['docs/lost+found/notes.md']],
    ]);
  });

  it('a bundle git cannot read is 422 SANDBOX_SOURCE_INVALID saying why, and leaves the sandbox as it was: a good one goes in after', async () => {
    const box = await aSandbox('late-source');
    const upload = (body: Buffer) =>
      fetch(`${cp.url}/v1/workspaces/${ws}/sandboxes/late-source/source`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${cp.ownerToken}`, 'content-type': 'application/x-git-bundle' },
        body,
      });
    const good = readFileSync(aRepositoryBundle(mkdtempSync(join(dir, 'late-'))));
    // its header and refs intact, its pack cut short
    const refused = await upload(good.subarray(0, good.length - 100));
    expect(refused.status).toBe(422);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(await refused.json()).toMatchObject({
      code: 'SANDBOX_SOURCE_INVALID',
      detail: expect.stringMatching(/^the bundle could not be read: (fatal|error): /),
    });
    expect((await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/late-source`)).body.source).toBe('empty');
    expect((await box.call('bash', { command: 'ls -A' })).structuredContent).toMatchObject({ stdout: '', exitCode: 0 });

    expect((await upload(good)).status).toBe(200);
    expect(textOf(await box.call('read', { path: 'math.js' }))).toContain('return a - b;');
    await box.call('write', { path: 'notes.md', content: '# notes\n' });
    // the bundle waits for the last snapshot
    expect(
      (
        await fetch(`${cp.url}/v1/workspaces/${ws}/sandboxes/late-source/bundle`, {
          headers: { authorization: `Bearer ${cp.ownerToken}` },
        })
      ).status,
    ).toBe(200);
    const snapshots = (await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/late-source/snapshots`)).body
      .snapshots as { message: string; files: { path: string }[] }[];
    expect(snapshots.map((s) => [s.message, s.files.map((f) => f.path)])).toEqual([['write: notes.md', ['notes.md']]]);
  });

  it('deleting a sandbox removes it, its files and its history', async () => {
    await aSandbox('short-lived');
    expect((await cp.request('DELETE', `/v1/workspaces/${ws}/sandboxes/short-lived`)).status).toBe(204);
    expect((await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/short-lived`)).body.code).toBe('SANDBOX_NOT_FOUND');
    const again = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'Short Lived' } });
    expect(again.status).toBe(201);
    expect((await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/short-lived/snapshots`)).body.snapshots).toEqual(
      [],
    );
    expect(
      (await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'short-lived' } })).body.code,
    ).toBe('SANDBOX_EXISTS');
  });
});
