import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
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
});
