import { linkSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DirectoryUsers } from './directory-users';

const BASE = 1_879_300_000;

describe('DirectoryUsers (a root control plane)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aileron-directory-users-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('never gives a uid another listed directory records, and refuses, giving nothing, once the range is full', () => {
    expect(process.getuid?.(), 'only root gives directories away').toBe(0);
    // nested as the pool's homes are: <workspace>/<server>/home
    const homes = ['a', 'b', 'c'].map((workspace) => join(dir, workspace, 'server', 'home'));
    for (const home of homes) mkdirSync(home, { recursive: true });
    const users = () => new DirectoryUsers({ base: BASE, count: 2, what: 'test', directories: () => homes });
    const [a, b] = [users().of('a/server', homes[0]!).uid, users().of('b/server', homes[1]!).uid];
    expect([a, b].sort()).toEqual([BASE, BASE + 1]);
    expect(() => users().of('c/server', homes[2]!)).toThrow(`every one of the 2 test uids from ${BASE} is taken`);
    expect(statSync(homes[2]!).uid).toBe(0);
    expect(users().owner(homes[2]!)).toBeUndefined();
  });

  it('gives the tree to its uid, but never a host file hard-linked or symlinked into it', () => {
    const host = join(dir, 'host-file');
    writeFileSync(host, "the host's\n", { mode: 0o600 });
    const tree = join(dir, 'old', 'server', 'home');
    mkdirSync(join(tree, 'deep', 'er'), { recursive: true });
    writeFileSync(join(tree, 'deep', 'er', 'mine'), 'mine\n');
    // what a unit that ran as root could have left: a second name of a host file, a link to one
    linkSync(host, join(tree, 'deep', 'linked'));
    symlinkSync(host, join(tree, 'pointing'));
    const { uid } = new DirectoryUsers({ base: BASE + 10, count: 1, what: 'test', directories: () => [tree] }).of(
      'old/server',
      tree,
    );
    expect(statSync(tree).uid).toBe(uid);
    expect(statSync(join(tree, 'deep', 'er', 'mine')).uid).toBe(uid);
    expect(statSync(host).uid).toBe(0);
  });
});
