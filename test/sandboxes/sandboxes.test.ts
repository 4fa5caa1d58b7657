import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, textOf } from '../pool/mcp-client';
import { aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';

/** A repository as a developer has it: a bug, and a test that catches it. */
function aRepositoryBundle(dir: string): string {
  const repo = join(dir, 'repo');
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=Dev', '-c', 'user.email=dev@example.com', ...args], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1' } });
  execFileSync('git', ['init', '-q', '-b', 'main', repo]);
  writeFileSync(join(repo, 'math.js'), "exports.add = function add(a, b) {\n  return a - b;\n};\n");
  writeFileSync(join(repo, 'math.test.js'), "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('./math');\n\ntest('adds', () => {\n  assert.strictEqual(add(2, 3), 5);\n});\n");
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

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-sandbox-test-'));
    cp = await startTestControlPlane('pglite');
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
      body: { workspace: ws, name: 'bug fixer', caps: ['actions:list', 'actions:run', 'sandbox:use'], caveats: { sandbox: 'fix-the-bug' } },
    });
    expect(session.status, session.text).toBe(201);
    sessionToken = session.body.caveat_token;
    sessionId = session.body.id;
    client = (await connect(cp, sessionToken, `/mcp/${ws}/sandbox`)).client;
  }, 120_000);

  afterAll(async () => {
    await client?.close();
    await cp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });

  it('offers exactly the seven tools, with the seed’s arguments', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['bash', 'glob', 'grep', 'ls', 'patch', 'read', 'write']);
    const args = Object.fromEntries(tools.map((t) => [t.name, Object.keys((t.inputSchema as { properties: object }).properties).sort()]));
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

    const diff = ['--- a/math.js', '+++ b/math.js', '@@ -1,3 +1,3 @@', ' exports.add = function add(a, b) {', '-  return a - b;', '+  return a + b;', ' };', ''].join('\n');
    const patched = await call('patch', { sandbox: 'fix-the-bug', path: 'math.js', diff });
    expect(patched.isError, textOf(patched)).toBeFalsy();
    expect(textOf(patched)).toBe('Patched math.js (+1 -1)');
    const again = await call('patch', { sandbox: 'fix-the-bug', path: 'math.js', diff });
    expect(again.isError).toBeFalsy();
    expect(textOf(again)).toContain('already applied');

    const passing = structured(await call('bash', { sandbox: 'fix-the-bug', command: 'node --test' }));
    expect(passing.exitCode, String(passing.stdout) + String(passing.stderr)).toBe(0);

    // what an agent might try against its history: none of it reaches the history the host keeps
    for (const attempt of [
      'git commit -am "sneaky" 2>&1; git reset --hard HEAD~1 2>&1; true',
      'git init -q . && git add -A && git -c user.name=a -c user.email=a@b commit -qm rewritten && git log --oneline',
      'rm -rf /src/.git ../git ../../git 2>&1; ls -a /src; true',
    ]) {
      const ran = structured(await call('bash', { sandbox: 'fix-the-bug', command: attempt }));
      expect(typeof ran.exitCode).toBe('number');
    }

    // the bundle waits for the snapshots of every change made so far
    const bundle = await fetch(`${cp.url}/v1/workspaces/${ws}/sandboxes/fix-the-bug/bundle`, { headers: { authorization: `Bearer ${cp.ownerToken}` } });
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toBe('application/x-git-bundle');
    const history = fetchedHistory(dir, Buffer.from(await bundle.arrayBuffer()));
    expect(history.map((c) => c.subject)).toEqual(['patch: math.js', 'initial']);
    expect(history[0]!.author).toBe(`bug fixer <session-${sessionId}@sessions.aileron.invalid>`);

    const snapshots = await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/fix-the-bug/snapshots`);
    expect(snapshots.body.snapshots).toEqual([expect.objectContaining({ trigger: 'patch', message: 'patch: math.js', files: [{ path: 'math.js', status: 'M' }], session: sessionId })]);
    const shown = await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/fix-the-bug/snapshots/${snapshots.body.snapshots[0].sha}/diff`);
    expect(shown.status).toBe(200);
    expect(shown.text).toContain('-  return a - b;\n+  return a + b;');
  });
});
