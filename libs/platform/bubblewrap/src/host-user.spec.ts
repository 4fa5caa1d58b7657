import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HostDoor } from './host-user';

const UID = 1_879_000_123;

describe('HostDoor', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aileron-door-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('without a user to switch to, names host paths as they are and runs the command itself (joining the cgroup first when given one)', () => {
    const door = new HostDoor({});
    expect(door.path('/var/lib/x')).toBe('/var/lib/x');
    expect(door.command(['/usr/bin/bwrap', '--version'])).toEqual(['/usr/bin/bwrap', '--version']);
    expect(new HostDoor({ cgroupProcs: '/sys/fs/cgroup/pids/a/cgroup.procs' }).command(['/usr/bin/bwrap'])).toEqual(['/bin/sh', '-c', 'echo $$ > "$0" && exec "$@"', '/sys/fs/cgroup/pids/a/cgroup.procs', '/usr/bin/bwrap']);
  });

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
