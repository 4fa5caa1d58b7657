import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { HostDoor } from './host-door';
import { SandboxCgroups, type CgroupsOfProcess } from './sandbox-cgroups';

const MiB = 1024 * 1024;
const LIMITS = { pids: 100, memoryBytes: 512 * MiB, cpus: 0.5 };

/** a mountinfo line for a cgroup file system */
function mountLine(id: number, mountpoint: string, type: 'cgroup' | 'cgroup2', options: string, root = '/'): string {
  return `${id} 23 0:${id} ${root} ${mountpoint.replace(/ /g, '\\040')} rw,relatime - ${type} ${type} ${options}`;
}

/**
 * A machine's cgroup file systems as directories: the kernel's files are the
 * ones a test writes beforehand (a directory made here gets none by itself).
 */
describe('SandboxCgroups on a described machine', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aileron-cgroups-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function file(path: string, text = ''): void {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }

  it('cgroup v1 with a hierarchy per controller (cpu with cpuacct): a cgroup in each under the control plane’s own, each limit in its file, no swap', () => {
    const root = join(dir, 'v1');
    const self: CgroupsOfProcess = {
      mountinfo: [
        '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
        mountLine(32, join(root, 'cpu,cpuacct'), 'cgroup', 'rw,cpu,cpuacct'),
        mountLine(33, join(root, 'cpuset'), 'cgroup', 'rw,cpuset'),
        mountLine(35, join(root, 'mem ory'), 'cgroup', 'rw,memory'),
        mountLine(39, join(root, 'pids'), 'cgroup', 'rw,pids'),
        mountLine(40, join(root, 'systemd'), 'cgroup', 'rw,name=systemd'),
        mountLine(41, join(root, 'unified'), 'cgroup2', 'rw'),
      ].join('\n'),
      cgroup: ['9:name=systemd:/', '8:pids:/', '4:memory:/session/cp', '3:cpuset:/', '2:cpu,cpuacct:/', '0::/'].join(
        '\n',
      ),
    };
    // the hybrid's cgroup2 offers none of the three
    file(join(root, 'unified', 'cgroup.controllers'), 'hugetlb\n');
    file(join(root, 'unified', 'cgroup.subtree_control'));
    // what the kernel gives a memory cgroup with swap accounting
    file(
      join(root, 'mem ory', 'session', 'cp', 'aileron-sandboxes', 'box', 'memory.memsw.limit_in_bytes'),
      '9223372036854771712\n',
    );
    file(join(root, 'mem ory', 'session', 'cp', 'aileron-sandboxes', 'box', 'memory.swappiness'), '60\n');

    const cgroups = SandboxCgroups.find('aileron-sandboxes', self);
    expect(cgroups?.controllers.sort()).toEqual(['cpu', 'memory', 'pids']);
    const procs = cgroups!.open('box', LIMITS);
    const memory = join(root, 'mem ory', 'session', 'cp', 'aileron-sandboxes', 'box');
    const cpu = join(root, 'cpu,cpuacct', 'aileron-sandboxes', 'box');
    const pids = join(root, 'pids', 'aileron-sandboxes', 'box');
    expect(procs.sort()).toEqual([cpu, memory, pids].map((group) => join(group, 'cgroup.procs')).sort());
    expect(readFileSync(join(pids, 'pids.max'), 'utf8')).toBe('100');
    expect(readFileSync(join(memory, 'memory.limit_in_bytes'), 'utf8')).toBe(String(512 * MiB));
    expect(readFileSync(join(memory, 'memory.memsw.limit_in_bytes'), 'utf8')).toBe(String(512 * MiB));
    expect(readFileSync(join(memory, 'memory.swappiness'), 'utf8')).toBe('0');
    expect(readFileSync(join(cpu, 'cpu.cfs_period_us'), 'utf8')).toBe('100000');
    expect(readFileSync(join(cpu, 'cpu.cfs_quota_us'), 'utf8')).toBe('50000');
    expect(cgroups!.directory('box', 'cpu')).toBe(cpu);
    expect(existsSync(join(root, 'unified', 'aileron-sandboxes')), 'a cgroup made where no controller is').toBe(false);
    expect(existsSync(join(root, 'cpuset', 'aileron-sandboxes'))).toBe(false);

    // no bound: the kernel's words for none
    cgroups!.open('box', { pids: 'max', memoryBytes: 'max', cpus: 'max' });
    expect(readFileSync(join(pids, 'pids.max'), 'utf8')).toBe('max');
    expect(readFileSync(join(memory, 'memory.limit_in_bytes'), 'utf8')).toBe('-1');
    expect(readFileSync(join(cpu, 'cpu.cfs_quota_us'), 'utf8')).toBe('-1');
  });

  it('pure cgroup v2: the controllers turned on for the sandboxes’ cgroups, and memory.max, memory.swap.max, cpu.max and pids.max in one directory', () => {
    const root = join(dir, 'v2');
    const own = join(root, 'system.slice', 'aileron.service');
    const self: CgroupsOfProcess = {
      mountinfo: mountLine(30, root, 'cgroup2', 'rw,nsdelegate'),
      cgroup: '0::/system.slice/aileron.service\n',
    };
    file(join(own, 'cgroup.controllers'), 'cpuset cpu io memory hugetlb pids rdma misc\n');
    file(join(own, 'cgroup.subtree_control'));
    file(join(own, 'aileron-sandboxes', 'cgroup.subtree_control'), 'cpu memory pids\n');
    file(join(own, 'aileron-sandboxes', 'box', 'memory.swap.max'), 'max\n');

    const cgroups = SandboxCgroups.find('aileron-sandboxes', self);
    expect(cgroups?.controllers.sort()).toEqual(['cpu', 'memory', 'pids']);
    const box = join(own, 'aileron-sandboxes', 'box');
    expect(cgroups!.open('box', LIMITS)).toEqual([join(box, 'cgroup.procs')]);
    expect(readFileSync(join(box, 'pids.max'), 'utf8')).toBe('100');
    expect(readFileSync(join(box, 'memory.max'), 'utf8')).toBe(String(512 * MiB));
    expect(readFileSync(join(box, 'memory.swap.max'), 'utf8')).toBe('0');
    expect(readFileSync(join(box, 'cpu.max'), 'utf8')).toBe('50000 100000');
    // the control plane's own cgroup turns them on for its children (a write per controller)
    expect(readFileSync(join(own, 'cgroup.subtree_control'), 'utf8')).toMatch(/^\+(pids|memory|cpu)$/);
    file(join(box, 'memory.events'), 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n');
    expect(cgroups!.oomKills('box')).toBe(1);
    cgroups!.open('box', { ...LIMITS, cpus: 'max' });
    expect(readFileSync(join(box, 'cpu.max'), 'utf8')).toBe('max 100000');
  });

  it('a machine with no cgroup the control plane may write (none mounted, or v2 refusing the controllers) has none: the caller keeps to rlimits', () => {
    expect(
      SandboxCgroups.find('aileron-sandboxes', { mountinfo: '31 23 0:28 / /proc rw - proc proc rw', cgroup: '0::/\n' }),
    ).toBeNull();
    const root = join(dir, 'refusing');
    file(join(root, 'cgroup.controllers'), 'cpu memory pids\n');
    // a cgroup.subtree_control that cannot be read or written, as a cgroup with processes of its own refuses controllers
    mkdirSync(join(root, 'cgroup.subtree_control'), { recursive: true });
    expect(
      SandboxCgroups.find('aileron-sandboxes', { mountinfo: mountLine(30, root, 'cgroup2', 'rw'), cgroup: '0::/\n' }),
    ).toBeNull();
    // one outside the control plane's mount root is not its to use
    expect(
      SandboxCgroups.find('aileron-sandboxes', {
        mountinfo: mountLine(39, join(dir, 'v1', 'pids'), 'cgroup', 'rw,pids', '/other'),
        cgroup: '8:pids:/mine\n',
      }),
    ).toBeNull();
  });
});

describe('SandboxCgroups on this machine (root, cgroup v1 or v2)', () => {
  const group = `aileron-spec-${randomBytes(4).toString('hex')}`;
  const cgroups = SandboxCgroups.find(group);
  afterAll(async () => {
    await cgroups?.end('box');
    cgroups?.release('wide');
    for (const controller of ['pids', 'memory', 'cpu'] as const) {
      const box = cgroups?.directory('box', controller);
      if (box) rmdirSync(dirname(box));
    }
  });

  it('bounds a process tree’s memory together, counts the kill, lists the processes, and ends them all', async () => {
    expect(process.getuid?.(), 'a root control plane writes the cgroups').toBe(0);
    expect(cgroups?.controllers.sort(), 'these machines give the control plane pids, memory and cpu').toEqual([
      'cpu',
      'memory',
      'pids',
    ]);
    const procs = cgroups!.open('box', { pids: 50, memoryBytes: 64 * MiB, cpus: 0.5 });
    // two processes of 40 MiB each: either fits alone, not both
    // (the shell outlives them: on a machine short of memory the kernel may take both, and the tree is still listed)
    const script = `perl -e '$x = "a"; $x x= (40 << 20); sleep 60' & perl -e '$x = "a"; $x x= (40 << 20); sleep 60' & wait; sleep 60`;
    const [file, ...args] = new HostDoor({ cgroupProcs: procs }).command(['/bin/sh', '-c', script]);
    const child = spawn(file!, args, { stdio: 'ignore', detached: true });
    try {
      await vi.waitFor(() => expect(cgroups!.oomKills('box')).toBeGreaterThanOrEqual(1), {
        timeout: 30_000,
        interval: 20,
      });
      const listed = cgroups!.pids('box');
      expect(listed).toContain(child.pid);
      for (const controller of ['pids', 'memory', 'cpu'] as const) {
        expect(
          readFileSync(join(cgroups!.directory('box', controller)!, 'cgroup.procs'), 'utf8').split('\n'),
          controller,
        ).toContain(String(child.pid));
      }
      await cgroups!.end('box');
      expect(cgroups!.pids('box')).toEqual([]);
      for (const controller of ['pids', 'memory', 'cpu'] as const)
        expect(existsSync(cgroups!.directory('box', controller)!), controller).toBe(false);
    } finally {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    }
  });

  it('a CPU bound over one the control plane’s own cgroups already have is no error: theirs, smaller, bounds the sandbox', () => {
    const cpu = dirname(cgroups!.directory('wide', 'cpu')!);
    const v2 = existsSync(join(cpu, 'cpu.max'));
    // half a CPU for every sandbox together, as a container of fewer CPUs than the setting would have
    writeFileSync(join(cpu, v2 ? 'cpu.max' : 'cpu.cfs_quota_us'), v2 ? '50000 100000' : '50000');
    try {
      expect(() => cgroups!.open('wide', { pids: 'max', memoryBytes: 'max', cpus: 2 })).not.toThrow();
      const box = join(cpu, 'wide');
      // v1 refuses the wider quota (the ancestor's holds), v2 keeps it and applies the smaller
      expect(readFileSync(join(box, v2 ? 'cpu.max' : 'cpu.cfs_quota_us'), 'utf8').trim()).toBe(
        v2 ? '200000 100000' : '-1',
      );
    } finally {
      writeFileSync(join(cpu, v2 ? 'cpu.max' : 'cpu.cfs_quota_us'), v2 ? 'max 100000' : '-1');
    }
  });
});
