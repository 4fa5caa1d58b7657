import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxesService } from '@aileron/sandboxes';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { anAllowedSandbox, Box } from './box';

/**
 * What a reviewer reads of a sandbox without touching it (under real
 * bubblewrap): a snapshot's files and a file's text, read from the history;
 * and what the workspace's shell rules would decide of a command line,
 * which is what the bash tool then does.
 */
describe('browsing a sandbox and checking command lines (embedded, bubblewrap)', () => {
  let cp: TestControlPlane;
  let box: Box & { workspace: string };
  let ws: string;
  const clients: Client[] = [];
  const settled = () => cp.cp.app.get(SandboxesService).settledAll();

  beforeAll(async () => {
    cp = await startApiControlPlane({ AILERON_POOL_APPROVAL_WAIT_SECONDS: '0' });
    box = await anAllowedSandbox(cp, 'review-me', clients);
    ws = box.workspace;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await cp?.close();
  });

  const files = (query = '') => cp.request('GET', `/v1/workspaces/${ws}/sandboxes/review-me/files${query}`);
  const file = (query: string) => cp.request('GET', `/v1/workspaces/${ws}/sandboxes/review-me/file${query}`);

  it('lists nothing before the first snapshot, and knows no file yet', async () => {
    const empty = await files();
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body).toEqual({ items: [], next_cursor: null, commit: null });
    const none = await file('?path=README.md');
    expect(none.status, none.text).toBe(404);
    expect(none.body.code).toBe('SANDBOX_PATH_NOT_FOUND');
  });

  let first = '';
  it("lists a snapshot's directories first, each entry with its kind and size, and a file's text", async () => {
    await box.call('write', { path: 'README.md', content: '# Review me\n' });
    await box.call('write', { path: 'src/app.ts', content: 'export const answer = 41;\n' });
    await box.bash(
      'mkdir -p bin && printf "#!/bin/sh\\necho hi\\n" > bin/run && chmod +x bin/run && ln -s README.md docs',
    );
    await box.bash("printf 'P\\x00NG' > logo.png");
    await settled();
    const root = await files();
    expect(root.status, root.text).toBe(200);
    expect(root.body.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(root.body.items).toEqual([
      { name: 'bin', path: 'bin', kind: 'directory', size: null },
      { name: 'src', path: 'src', kind: 'directory', size: null },
      { name: 'README.md', path: 'README.md', kind: 'file', size: 12 },
      { name: 'docs', path: 'docs', kind: 'symlink', size: 9 },
      { name: 'logo.png', path: 'logo.png', kind: 'file', size: 4 },
    ]);
    const bin = await files('?path=bin');
    expect(bin.body.items).toEqual([{ name: 'run', path: 'bin/run', kind: 'executable', size: 18 }]);

    const app = await file('?path=src/app.ts');
    expect(app.status, app.text).toBe(200);
    expect(app.body).toEqual({
      commit: root.body.commit,
      path: 'src/app.ts',
      kind: 'file',
      size: 26,
      text: 'export const answer = 41;\n',
      binary: false,
      too_large: false,
    });
    expect((await file('?path=docs')).body).toMatchObject({ kind: 'symlink', text: 'README.md' });
    expect((await file('?path=logo.png')).body).toMatchObject({ binary: true, text: null });
    first = (await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/review-me/snapshots?limit=1`)).body.items[0].sha;
    expect(first).toBe(root.body.commit);
  });

  it('shows an earlier snapshot as it was, and pages a directory', async () => {
    await box.call('patch', {
      path: 'src/app.ts',
      diff: '--- a/src/app.ts\n+++ b/src/app.ts\n@@ -1 +1 @@\n-export const answer = 41;\n+export const answer = 42;\n',
    });
    await settled();
    expect((await file('?path=src/app.ts')).body.text).toBe('export const answer = 42;\n');
    const then = await file(`?path=src/app.ts&at=${first}`);
    expect(then.body).toMatchObject({ commit: first, text: 'export const answer = 41;\n' });

    const names: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await files(`?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status, page.text).toBe(200);
      expect(page.body.items.length).toBeLessThanOrEqual(2);
      names.push(...page.body.items.map((e: { name: string }) => e.name));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(names).toEqual(['bin', 'src', 'README.md', 'docs', 'logo.png']);
  });

  it('refuses paths outside the tree, names what does not exist, and takes only its own snapshots', async () => {
    for (const path of ['../etc', '/etc/passwd', 'src/../..', './src', 'a//b', '-n'])
      for (const ask of [files, file]) {
        const refused = await ask(`?path=${encodeURIComponent(path)}`);
        expect(refused.status, `${path}: ${refused.text}`).toBe(400);
        expect(refused.body.errors[0].path).toBe('query.path');
      }
    for (const [ask, path] of [
      [files, 'nope'],
      [files, 'README.md'],
      [file, 'src'],
      [file, 'src/nope.ts'],
    ] as const) {
      const missing = await ask(`?path=${path}`);
      expect(missing.status, `${path}: ${missing.text}`).toBe(404);
      expect(missing.body.code).toBe('SANDBOX_PATH_NOT_FOUND');
    }
    for (const at of ['0'.repeat(40), 'HEAD', 'aileron/snapshots', `${first}^`]) {
      const other = await files(`?at=${encodeURIComponent(at)}`);
      expect(other.status, `${at}: ${other.text}`).toBe(404);
      expect(other.body.code).toBe('SNAPSHOT_NOT_FOUND');
    }
    const unknown = await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/nope/files`);
    expect(unknown.body.code).toBe('SANDBOX_NOT_FOUND');
  });

  const check = (body: Record<string, unknown>) =>
    cp.request('POST', `/v1/workspaces/${ws}/shell-rules/check`, { body });

  it('says what the shell rules would decide of a line, naming the rule, and bash then does just that', async () => {
    const none = await check({ command: 'rm -rf /src' });
    expect(none.status, none.text).toBe(200);
    expect(none.body).toMatchObject({ decision: 'allow', rule: null, resolved_in: null });

    const put = await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, {
      body: {
        rules: [{ program: 'rm', args: [], decision: 'forbidden', justification: 'Deleting is for people.' }],
        codex_rules: 'prefix_rule(pattern = ["git", "push"], decision = "prompt", justification = "Ask first.")\n',
      },
    });
    expect(put.status, put.text).toBe(200);

    const forbidden = await check({ command: 'echo done && sudo env rm -rf build' });
    expect(forbidden.body).toMatchObject({
      decision: 'forbidden',
      rule: { program: 'rm', decision: 'forbidden', justification: 'Deleting is for people.', source: 'rules[0]' },
      command: ['rm', '-rf', 'build'],
    });
    expect(forbidden.body.reason).toContain('Deleting is for people.');
    const prompt = await check({ command: 'git push origin main' });
    expect(prompt.body).toMatchObject({ decision: 'prompt', rule: { program: 'git', source: 'codex_rules line 1' } });
    expect((await check({ command: 'git status' })).body).toMatchObject({ decision: 'allow', rule: null });
    expect((await check({ command: 'echo "unclosed' })).body).toMatchObject({ decision: 'prompt', rule: null });

    // what the box says is what the bash tool does with the same line
    const ran = (await box.call('bash', { command: 'echo done && sudo env rm -rf build' })).structuredContent as {
      exitCode: number;
      stderr: string;
    };
    expect(ran.exitCode).toBe(1);
    expect(ran.stderr).toContain(forbidden.body.reason);
  });

  it('resolves the programs in a sandbox when told which, as the bash tool does', async () => {
    await box.bash('mkdir -p sub && ln -s /usr/bin/rm sub/x');
    const byName = await check({ command: './x README.md' });
    expect(byName.body).toMatchObject({ decision: 'allow', resolved_in: null });
    const inBox = await check({ command: './x README.md', sandbox: 'review-me', workdir: '/src/sub' });
    expect(inBox.status, inBox.text).toBe(200);
    expect(inBox.body).toMatchObject({ decision: 'forbidden', rule: { program: 'rm' }, resolved_in: 'review-me' });

    const unknown = await check({ command: 'ls', sandbox: 'nope' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('SANDBOX_NOT_FOUND');
    const empty = await check({ command: '' });
    expect(empty.status).toBe(400);
    expect(empty.body.errors[0].path).toBe('body.command');
  });
});
