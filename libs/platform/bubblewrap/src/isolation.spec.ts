import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isolationArgs, type Isolation } from './isolation';

/** runs a shell script under bwrap with `isolation`, with the accounts on fds 3 and 4 when asked */
function inside(isolation: Isolation, script: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'aileron-isolation-'));
  const fds = ['sandbox:x:1000:1000::/home/sandbox:/bin/sh\n', 'sandbox:x:1000:\n'].map((text, at) => {
    writeFileSync(join(dir, String(at)), text);
    return openSync(join(dir, String(at)), 'r');
  });
  try {
    const run = spawnSync('/usr/bin/bwrap', [...isolationArgs(isolation), '/bin/sh', '-c', script], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', SECRET: 'of the control plane' },
      stdio: ['ignore', 'pipe', 'pipe', ...fds],
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    return run.stdout;
  } finally {
    for (const fd of fds) closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('isolationArgs', () => {
  it('keeps no capability, no variable of ours and no network of the host even when we are root', () => {
    expect(process.getuid?.(), 'the capabilities matter for a root control plane').toBe(0);
    const out = inside(
      { network: false, user: {}, env: { ONLY: 'this' }, proc: true },
      'grep CapEff /proc/self/status; env | sort; ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1',
    );
    expect(out).toMatch(/CapEff:\s+0+\n/);
    expect(out).toContain('ONLY=this');
    expect(out).not.toContain('SECRET');
    expect(out).not.toMatch(/eth|ens|enp|wl/);
  });

  it('runs with the id asked for, cannot make another user namespace, and sees the accounts it was given', () => {
    const out = inside(
      { network: false, user: { id: 1000 }, env: {}, proc: true, accounts: true },
      'id -u; id -g; cat /etc/passwd; unshare -U true 2>/dev/null && echo nested || echo refused',
    );
    expect(out.split('\n').slice(0, 3)).toEqual(['1000', '1000', 'sandbox:x:1000:1000::/home/sandbox:/bin/sh']);
    expect(out).toContain('refused');
    expect(out).not.toContain('root:x:0');
  });

  it('bounds /tmp when asked, and shows nothing of the host beyond the system root', () => {
    const out = inside(
      { network: false, env: {}, tmpMb: 1, etc: [] },
      'head -c 2000000 /dev/zero > /tmp/big 2>/dev/null && echo fit || echo full; ls /; test -e /etc && echo etc; true',
    );
    expect(out).toContain('full');
    expect(out).not.toMatch(/\b(root|home|var|work|opt)\b/);
    expect(out).not.toContain('etc');
  });
});
