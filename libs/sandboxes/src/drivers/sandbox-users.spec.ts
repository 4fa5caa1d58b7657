import { lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SANDBOX_UID_COUNT, SandboxUsers } from './sandbox-users';

const BASE = 1_879_200_000;

describe('SandboxUsers (a root control plane)', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'aileron-users-'));
  afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

  function aSandboxDir(id: string): string {
    const src = join(stateDir, id, 'src');
    mkdirSync(src, { recursive: true });
    return src;
  }

  it('gives each sandbox a uid of its own from the range, and keeps it', () => {
    expect(process.getuid?.()).toBe(0);
    const users = new SandboxUsers(stateDir, BASE);
    const uids = ['a', 'b', 'c', 'd'].map((id) => users.of(id, aSandboxDir(id)).uid);
    expect(new Set(uids).size).toBe(4);
    for (const uid of uids) {
      expect(uid).toBeGreaterThanOrEqual(BASE);
      expect(uid).toBeLessThan(BASE + SANDBOX_UID_COUNT);
    }
    // recorded as the owner of its /src: the same uid at its next start, from a new control plane too
    expect(new SandboxUsers(stateDir, BASE).of('b', join(stateDir, 'b', 'src')).uid).toBe(uids[1]);
    expect(users.owner(join(stateDir, 'c', 'src'))).toBe(uids[2]);
  });

  it('hands a sandbox made before (files owned by root) its files, changing links but never what they point to', () => {
    const outside = join(stateDir, 'host-file');
    writeFileSync(outside, 'the host’s\n');
    const src = aSandboxDir('older');
    mkdirSync(join(src, 'deep', 'er'), { recursive: true });
    writeFileSync(join(src, 'deep', 'er', 'file.txt'), 'x');
    symlinkSync(outside, join(src, 'link-out'));
    symlinkSync(stateDir, join(src, 'dir-link-out'));
    expect(new SandboxUsers(stateDir, BASE).owner(src)).toBeUndefined();
    const { uid } = new SandboxUsers(stateDir, BASE).of('older', src);
    expect(statSync(join(src, 'deep', 'er', 'file.txt')).uid).toBe(uid);
    expect(lstatSync(join(src, 'link-out')).uid).toBe(uid);
    expect(statSync(outside).uid).toBe(0);
    expect(statSync(stateDir).uid).toBe(0);
  });
});
