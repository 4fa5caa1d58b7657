import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HostDoor } from './host-door';

const UID = 1_879_000_123;

describe('HostDoor', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aileron-door-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** runs a door's command line; what it printed */
  function run(command: string[]): string {
    const [file, ...args] = command;
    return execFileSync(file!, args, {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  it('without a user to switch to, names host paths as they are and runs the command itself', () => {
    const door = new HostDoor({});
    expect(door.path('/var/lib/x')).toBe('/var/lib/x');
    expect(door.command(['/usr/bin/bwrap', '--version'])).toEqual(['/usr/bin/bwrap', '--version']);
  });

  it.each([
    ['without a user', undefined],
    ['as a user', { uid: UID, gid: UID }],
  ])(
    '%s, the command joins every cgroup given (one cgroup.procs per hierarchy) before it runs, and does not run when one refuses it',
    (_, user) => {
      // files standing for the hierarchies' cgroup.procs; a space in a path as mountinfo may give one
      const procs = [join(dir, 'pids.procs'), join(dir, 'memory procs'), join(dir, 'cpu.procs')];
      for (const file of procs) writeFileSync(file, '');
      const pid = run(new HostDoor({ user, cgroupProcs: procs }).command(['/bin/sh', '-c', 'echo $$'])).trim();
      expect(pid).toMatch(/^\d+$/);
      for (const file of procs) expect(readFileSync(file, 'utf8'), file).toBe(`${pid}\n`);
      expect(() =>
        run(
          new HostDoor({ user, cgroupProcs: [procs[0]!, join(dir, 'no-such-hierarchy', 'cgroup.procs')] }).command([
            '/bin/sh',
            '-c',
            'echo ran',
          ]),
        ),
      ).toThrow(/no-such-hierarchy/);
    },
  );

  it('lets an unprivileged uid reach a directory under a root-only one, by its door path, and nothing else of the host’s private tree', () => {
    expect(process.getuid?.(), 'a root control plane is what the door is for').toBe(0);
    const secret = join(dir, 'private');
    const shared = join(secret, 'src');
    mkdirSync(shared, { recursive: true });
    chmodSync(secret, 0o700);
    writeFileSync(join(shared, 'file.txt'), 'through the door\n');
    writeFileSync(join(secret, 'key'), 'not for the sandbox\n');
    const door = new HostDoor({ user: { uid: UID, gid: UID } });
    const inside = door.path(shared);
    expect(inside).not.toContain(secret);
    const script = `id -u; cat ${inside}/file.txt; cat ${shared}/file.txt 2>/dev/null || echo "host path: refused"; for fd in 5 6 7 8 9; do [ -e /proc/self/fd/$fd ] && echo "fd $fd open"; done; echo end`;
    const [file, ...args] = door.command(['/bin/sh', '-c', script]);
    const out = execFileSync(file!, args, { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
    // the descriptors that opened the door (5 and up) are closed before the command: it holds no handle on the host's tree
    expect(out).toBe(`${UID}\nthrough the door\nhost path: refused\nend\n`);
  });
});
