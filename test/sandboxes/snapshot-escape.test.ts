import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textOf } from '../pool/mcp-client';
import { aWorkspace, uniqueSlug } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { SANDBOX_DRIVER, type SandboxDriver } from '@aileron/sandboxes';
import { agentOn } from './box';
import { aReceiver } from '../support/webhook-receiver';

/**
 * The security review's finding 1 (and 1c): snapshots used to run
 * `git add --all` on the host over the agent's tree, and a nested
 * repository's own configuration made that git run the agent's programs on
 * the host. Every attempt here writes a marker on the host if any program of
 * its runs there; none may, and the snapshots are still taken and still
 * show the files.
 */
/** small enough that a test exceeds it in one command */
const MAX_FILES = 30;

describe('snapshots never run or follow what the agent wrote (embedded, bubblewrap)', () => {
  let cp: TestControlPlane;
  let dir: string;
  /** where a program of the agent's would leave its mark, were it run on the host */
  let marks: string;
  let ws: { slug: string; id: string };
  const clients: Client[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-snapshot-escape-'));
    marks = join(dir, 'marks');
    mkdirSync(marks);
    cp = await startApiControlPlane({ AILERON_SANDBOX_SNAPSHOT_MAX_FILES: String(MAX_FILES) });
    ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { body: { default: 'allow', rules: [] } });
  }, 120_000);

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function aSandbox(name: string): Promise<{
    bash(command: string): Promise<{ stdout: string; stderr: string; exitCode: number }>;
    write(path: string, content: string): Promise<void>;
  }> {
    expect((await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, { body: { name } })).status).toBe(201);
    const { call, bash } = await agentOn(cp, ws.slug, name, clients);
    return {
      bash: (command) => bash(command),
      write: async (path, content) => {
        const written = await call('write', { path, content });
        expect(written.isError, textOf(written)).toBeFalsy();
      },
    };
  }

  /** The snapshot branch as a developer fetches it: each commit's subject, and the tree of the last. */
  async function fetched(
    name: string,
  ): Promise<{ subjects: string[]; tree: string[]; show: (path: string) => string }> {
    const bundle = await fetch(`${cp.url}/v1/workspaces/${ws.slug}/sandboxes/${name}/bundle`, {
      headers: { authorization: `Bearer ${cp.ownerToken}` },
    });
    expect(bundle.status).toBe(200);
    const file = join(dir, `${name}-${Date.now()}.bundle`);
    writeFileSync(file, Buffer.from(await bundle.arrayBuffer()));
    const clone = mkdtempSync(join(dir, 'clone-'));
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', clone, ...args], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH, HOME: clone, GIT_CONFIG_NOSYSTEM: '1' },
      });
    git('init', '-q');
    git('fetch', '-q', file, 'aileron/snapshots:snapshots');
    // fsck: nothing in the history a developer's git would refuse (a `.git` path, a gitlink without its repository)
    git('fsck', '--strict', '--no-dangling');
    return {
      subjects: git('log', '--format=%s', 'snapshots').trim().split('\n'),
      tree: git('ls-tree', '-r', '--format=%(objectmode) %(path)', 'snapshots').trim().split('\n'),
      show: (path) => git('show', `snapshots:${path}`),
    };
  }

  const marked = () => readdirSync(marks);

  /** Once the sandbox's snapshots so far are taken (the list waits for them), whether or not they could be. */
  async function settled(name: string): Promise<void> {
    expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/sandboxes/${name}/snapshots`)).status).toBe(200);
  }

  it('a nested repository whose filters, fsmonitor and ssh command name programs: none runs on the host, every change is snapshotted', async () => {
    const box = await aSandbox('nested-filters');
    const mark = (what: string) => `touch ${join(marks, what)}`;
    const made = await box.bash(
      [
        'set -e',
        'git init -q filters && cd filters',
        "echo '* filter=evil' > .gitattributes",
        'echo one > a.txt',
        'git add -A && git -c user.name=a -c user.email=a@b commit -qm one',
        // set after the agent's own commit: they would fail here, in the sandbox, where the marks' directory is not
        `git config filter.evil.clean '${mark('clean')}; cat'`,
        `git config filter.evil.smudge '${mark('smudge')}; cat'`,
        `git config filter.evil.process '${mark('process')}'`,
        'git config filter.evil.required true',
        `git config core.fsmonitor '${mark('fsmonitor')}'`,
        `git config core.sshCommand '${mark('ssh')}'`,
      ].join('\n'),
    );
    expect(made.exitCode, made.stderr).toBe(0);
    // each change makes the history ask again whether the nested files changed
    await box.bash('echo two >> filters/a.txt');
    await box.bash('echo three >> filters/a.txt');
    await box.write('after.txt', 'later\n');

    await settled('nested-filters');
    expect(marked()).toEqual([]);
    const history = await fetched('nested-filters');
    expect(history.subjects).toEqual([
      'write: after.txt',
      'bash: echo three >> filters/a.txt',
      'bash: echo two >> filters/a.txt',
      'bash: set -e…',
    ]);
    expect(history.tree.sort()).toEqual(['100644 after.txt', '100644 filters/.gitattributes', '100644 filters/a.txt']);
    // the filter did not touch the bytes
    expect(history.show('filters/a.txt')).toBe('one\ntwo\nthree\n');
  });

  it('submodules, a .git file naming a host repository, a host work tree, a broken HEAD, a .GIT, a link to a host file: nothing escapes, no snapshot stops', async () => {
    const box = await aSandbox('nested-tricks');
    const mark = (what: string) => `touch ${join(marks, what)}`;
    const made = await box.bash(
      [
        'set -e',
        // fsmonitor, a lazy fetch's ssh command and the untracked cache over a host directory; written as a file:
        // the work tree it names is not in the sandbox, so git here would refuse the rest
        'git init -q monitor && echo watched > monitor/file.txt',
        'git -C monitor add -A && git -C monitor -c user.name=a -c user.email=a@b commit -qm watched',
        `printf '[core]\\n\\tfsmonitor = ${mark('fsmonitor')}\\n\\tsshCommand = ${mark('ssh')}\\n\\tworktree = ${marks}\\n\\tuntrackedCache = true\\n[remote "origin"]\\n\\turl = ssh://example.invalid/x\\n\\tpromisor = true\\n[extensions]\\n\\tpartialClone = origin\\n' >> monitor/.git/config`,
        // a submodule: .gitmodules and a repository where its path is
        'git init -q super && git init -q super/lib',
        'echo lib > super/lib/lib.txt',
        'git -C super/lib add -A && git -C super/lib -c user.name=a -c user.email=a@b commit -qm lib',
        `printf '[submodule "lib"]\\n\\tpath = lib\\n\\turl = ../elsewhere\\n' > super/.gitmodules`,
        // .git as a file naming a repository elsewhere (the control plane's sandboxes, as the agent may guess their place)
        'mkdir pointer',
        `echo 'gitdir: ${join(cp.cp.config.dataDir, 'sandboxes')}' > pointer/.git`,
        'echo pointed > pointer/file.txt',
        // a repository whose HEAD is broken, and a .GIT of another case
        'git init -q broken && echo garbage > broken/.git/HEAD && echo still > broken/kept.txt',
        'mkdir cased && mkdir cased/.GIT && echo x > cased/.GIT/config && echo y > cased/work.txt',
        // a symlink to a host file: its text is what a snapshot keeps, never the file
        'ln -s /etc/shadow shadow-link',
      ].join('\n'),
    );
    expect(made.exitCode, made.stderr).toBe(0);
    await box.bash('echo again >> monitor/file.txt');
    // a later change still makes its own commit: none of the above stopped the snapshots
    await box.write('after.txt', 'later\n');

    await settled('nested-tricks');
    expect(marked()).toEqual([]);
    const history = await fetched('nested-tricks');
    expect(history.subjects).toEqual(['write: after.txt', 'bash: echo again >> monitor/file.txt', 'bash: set -e…']);
    expect(history.tree.sort()).toEqual([
      '100644 after.txt',
      '100644 broken/kept.txt',
      '100644 cased/work.txt',
      '100644 monitor/file.txt',
      '100644 pointer/file.txt',
      '100644 super/.gitmodules',
      '100644 super/lib/lib.txt',
      '120000 shadow-link',
    ]);
    expect(history.show('shadow-link')).toBe('/etc/shadow');
    expect(history.show('monitor/file.txt')).toBe('watched\nagain\n');
  });

  it('a tar.gz source with nested .git directories and their filters: unpacked, snapshotted as files, nothing run', async () => {
    const box = await aSandbox('hostile-source');
    const tree = mkdtempSync(join(dir, 'tree-'));
    const vendor = join(tree, 'vendor');
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', vendor, '-c', 'user.name=a', '-c', 'user.email=a@b', ...args], {
        env: { PATH: process.env.PATH, HOME: vendor, GIT_CONFIG_NOSYSTEM: '1' },
      });
    execFileSync('git', ['init', '-q', vendor]);
    writeFileSync(join(vendor, '.gitattributes'), '* filter=x\n');
    writeFileSync(join(vendor, 'lib.js'), 'module.exports = 1;\n');
    git('add', '-A');
    git('commit', '-qm', 'vendored');
    // what the history's git would run on the host, were it to look inside
    git('config', 'core.fsmonitor', `touch ${join(marks, 'source-fsmonitor')}`);
    git('config', 'filter.x.clean', `touch ${join(marks, 'source-clean')}; cat`);
    writeFileSync(join(tree, 'README.md'), '# app\n');
    const archive = `${tree}.tar.gz`;
    execFileSync('tar', ['-czf', archive, '-C', tree, '.']);
    const uploaded = await fetch(`${cp.url}/v1/workspaces/${ws.slug}/sandboxes/hostile-source/source`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${cp.ownerToken}`, 'content-type': 'application/gzip' },
      body: readFileSync(archive),
    });
    expect(uploaded.status, await uploaded.clone().text()).toBe(200);
    await box.write('vendor/lib.js', 'module.exports = 2;\n');

    await settled('hostile-source');
    expect(marked()).toEqual([]);
    const history = await fetched('hostile-source');
    expect(history.subjects).toEqual(['write: vendor/lib.js', 'write: source upload (tar.gz)']);
    expect(history.tree.sort()).toEqual(['100644 README.md', '100644 vendor/.gitattributes', '100644 vendor/lib.js']);
    // the repository is still the agent's, in /src, to use as it likes
    expect((await box.bash('ls vendor/.git/config')).exitCode).toBe(0);
  });

  it('honours .gitignore files as git would, read inside the sandbox; the history never sees what they leave out', async () => {
    const box = await aSandbox('ignoring');
    await box.bash(
      [
        "printf 'node_modules/\\n*.log\\n!keep.log\\n' > .gitignore",
        'mkdir -p node_modules/pkg app/build && echo dep > node_modules/pkg/index.js',
        'echo noise > debug.log && echo kept > keep.log',
        "printf 'build/\\n' > app/.gitignore && echo out > app/build/out.js && echo src > app/main.js",
      ].join(' && '),
    );
    const history = await fetched('ignoring');
    expect(history.tree.sort()).toEqual([
      '100644 .gitignore',
      '100644 app/.gitignore',
      '100644 app/main.js',
      '100644 keep.log',
    ]);
  });

  it('a file swapped for a link while the snapshot reads it: the snapshot has the file or the link, never what the link names', async () => {
    const other = await aSandbox('other-box');
    await other.write('secret.txt', 'not yours\n');
    const record = await cp.cp.database.client.sandbox.findFirstOrThrow({
      where: { workspaceId: ws.id, name: 'other-box' },
    });
    const secret = join(cp.cp.config.dataDir, 'sandboxes', record.id, 'src', 'secret.txt');
    const box = await aSandbox('swapper');
    // swaps on in the background while the call's snapshot runs (where the sandbox lets a process outlive its call)
    const started = await box.bash(
      `echo mine > target.txt; (for i in $(seq 1 3000); do ln -sfn ${secret} target.txt; echo mine > t && mv t target.txt; done) > /dev/null 2>&1 &`,
    );
    expect(started.exitCode).toBe(0);
    const history = await fetched('swapper');
    const entry = history.tree.find((line) => line.endsWith(' target.txt'));
    expect(entry === '120000 target.txt' ? history.show('target.txt') : history.show('target.txt')).toMatch(
      entry === '120000 target.txt' ? /^\/.*secret\.txt$/ : /^mine\n$/,
    );
    for (const subject of history.subjects) expect(subject).not.toContain('not yours');
    expect(JSON.stringify(history.tree)).not.toContain('not yours');
  });

  it('a snapshot whose history fails once is taken by the next attempt: nothing lost, nothing reported', async () => {
    const receiver = await aReceiver([]);
    const hook = await cp.request('POST', '/v1/webhooks', {
      body: {
        name: uniqueSlug('retries'),
        url: receiver.url,
        events: ['sandbox.snapshot_failed', 'sandbox.snapshot'],
        workspace: ws.slug,
      },
    });
    expect(hook.status, hook.text).toBe(201);
    // the real driver, whose history answers its first commit with a failure, as a full disk or a killed git would
    const driver = cp.cp.app.get<SandboxDriver>(SANDBOX_DRIVER);
    const git = driver.git.bind(driver);
    let failures = 0;
    driver.git = async (spec, args, input) => {
      if (args[0] === 'fast-import' && spec.name === 'flaky' && failures++ === 0)
        return { code: 128, stdout: Buffer.alloc(0), stderr: 'fatal: the disk was busy' };
      return git(spec, args, input);
    };
    try {
      const flaky = await aSandbox('flaky');
      await flaky.write('kept.txt', 'kept\n');
      const history = await fetched('flaky');
      expect(failures).toBe(2);
      expect(history.subjects).toEqual(['write: kept.txt']);
      expect(history.show('kept.txt')).toBe('kept\n');
      await eventually('the sandbox.snapshot delivery', () =>
        receiver.accepted().find((r) => JSON.parse(r.raw).data?.sandbox === 'flaky'),
      );
      expect(receiver.accepted().map((r) => JSON.parse(r.raw).type)).not.toContain('sandbox.snapshot_failed');
    } finally {
      driver.git = git;
      await cp.request('DELETE', `/v1/webhooks/${hook.body.id}`);
      await receiver.close();
    }
  });

  it('a snapshot that cannot be taken is reported as sandbox.snapshot_failed; the next change and other sandboxes go on', async () => {
    const receiver = await aReceiver([]);
    const hook = await cp.request('POST', '/v1/webhooks', {
      body: {
        name: uniqueSlug('failures'),
        url: receiver.url,
        events: ['sandbox.snapshot_failed'],
        workspace: ws.slug,
      },
    });
    expect(hook.status, hook.text).toBe(201);
    try {
      const crowded = await aSandbox('crowded');
      const calm = await aSandbox('calm');
      await crowded.bash(`mkdir many && for i in $(seq 1 ${MAX_FILES + 5}); do echo $i > many/$i.txt; done`);
      await calm.write('fine.txt', 'fine\n');
      const failed = await eventually(
        'the sandbox.snapshot_failed delivery',
        () => receiver.accepted().find((r) => JSON.parse(r.raw).data?.sandbox === 'crowded'),
        { timeoutMs: 60_000 },
      );
      expect(JSON.parse(failed.raw).data).toMatchObject({
        sandbox: 'crowded',
        trigger: 'bash',
        message: expect.stringMatching(/^bash: mkdir many/),
        reason: expect.stringContaining(`more than ${MAX_FILES} files`),
      });
      // the other sandbox's snapshot was taken meanwhile
      expect((await fetched('calm')).subjects).toEqual(['write: fine.txt']);
      // once the agent makes room (a .gitignore), the next change is committed with everything since the last good snapshot
      await crowded.write('.gitignore', 'many/\n');
      const history = await fetched('crowded');
      expect(history.subjects).toEqual(['write: .gitignore']);
      expect(history.tree).toEqual(['100644 .gitignore']);
    } finally {
      await cp.request('DELETE', `/v1/webhooks/${hook.body.id}`);
      await receiver.close();
    }
  });
});
