import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compiledRunnerPath, LocalSandboxDriver, type SandboxSpec } from '@aileron/sandboxes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The security review's finding 1 asks that whatever git still runs over a
 * history runs in a bubblewrap of its own, with only that history
 * writable. The local driver's `git` is what every snapshot, import and
 * bundle uses: whatever arguments reach it (a hostile bundle's, a bug's),
 * it reaches no file of the host's, no other sandbox and no other place to
 * write.
 */
describe('the local driver’s git over a history (bubblewrap)', () => {
  let dir: string;
  let driver: LocalSandboxDriver;
  const aSandbox = (): SandboxSpec => ({
    id: randomUUID(),
    organizationId: randomUUID(),
    workspaceId: randomUUID(),
    name: 'history',
    network: 'none',
    limits: {},
  });
  let one: SandboxSpec;
  let other: SandboxSpec;
  /** a file of the host's, readable by the control plane */
  let hostFile: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-history-git-'));
    driver = new LocalSandboxDriver({
      stateDir: join(dir, 'state'),
      runnerScript: compiledRunnerPath(),
      log: () => undefined,
    });
    one = aSandbox();
    other = aSandbox();
    await driver.create(one);
    await driver.create(other);
    hostFile = join(dir, 'host-secret');
    writeFileSync(hostFile, 'the control plane’s secret\n', { mode: 0o600 });
  });

  afterAll(async () => {
    await driver?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const historyOf = (spec: SandboxSpec): string => join(dir, 'state', spec.id, 'git');

  it('writes its own history: an object hashed in is there on the host', async () => {
    const hashed = await driver.git(one, ['hash-object', '-w', '--stdin'], Buffer.from('kept\n'));
    expect(hashed.code, hashed.stderr).toBe(0);
    const sha = hashed.stdout.toString().trim();
    expect(existsSync(join(historyOf(one), 'objects', sha.slice(0, 2), sha.slice(2)))).toBe(true);
  });

  it('reads no file of the host’s, and no other sandbox’s files or history', async () => {
    mkdirSync(join(dir, 'state', other.id, 'src'), { recursive: true });
    writeFileSync(join(dir, 'state', other.id, 'src', 'theirs'), 'another sandbox’s file\n');
    for (const path of [
      hostFile,
      '/etc/shadow',
      join(dir, 'state', other.id, 'src', 'theirs'),
      join(historyOf(other), 'HEAD'),
    ]) {
      const read = await driver.git(one, ['hash-object', '--no-filters', '--', path]);
      expect(read.code, `git read ${path}`).not.toBe(0);
      expect(read.stdout.toString()).toBe('');
    }
    const listed = await driver.git(one, ['--git-dir', historyOf(other), 'rev-parse', '--absolute-git-dir']);
    expect(listed.stdout.toString()).not.toContain(other.id);
  });

  it('writes nowhere but its history: not the host, not another sandbox’s history', async () => {
    const elsewhere = join(dir, 'made-by-git');
    await driver.git(one, ['init', '--quiet', '--bare', elsewhere]);
    expect(existsSync(elsewhere)).toBe(false);
    const before = await driver.git(other, ['for-each-ref']);
    await driver.git(one, [
      '--git-dir',
      historyOf(other),
      'update-ref',
      'refs/heads/planted',
      '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
    ]);
    expect(await driver.git(other, ['for-each-ref'])).toEqual(before);
    expect(existsSync(join(historyOf(other), 'refs', 'heads', 'planted'))).toBe(false);
  });
});
