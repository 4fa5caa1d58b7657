import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export type CgroupController = 'pids' | 'memory' | 'cpu';

const CONTROLLERS: readonly CgroupController[] = ['pids', 'memory', 'cpu'];

/** The CFS period a CPU bound is a share of (the kernel's default): short enough that a bound sandbox still answers at once. */
const CPU_PERIOD_US = 100_000;

/** What one sandbox's processes may use together. */
export interface SandboxCgroupLimits {
  /** processes and threads at once */
  pids: number | 'max';
  /** bytes of memory: every process's, and the pages of the tmpfs it writes; never swapped */
  memoryBytes: number | 'max';
  /** CPUs' worth of time (0.5: half of one CPU, 2: two), measured over each 100 ms */
  cpus: number | 'max';
}

/** What /proc/self says of the control plane's cgroups; a test gives its own. */
export interface CgroupsOfProcess {
  /** /proc/self/mountinfo */
  mountinfo: string;
  /** /proc/self/cgroup */
  cgroup: string;
}

interface Hierarchy {
  version: 1 | 2;
  /** `<the control plane's own cgroup>/<group>`: each sandbox's cgroup is made in it */
  parent: string;
  controllers: CgroupController[];
}

/**
 * A cgroup per sandbox in each hierarchy that has the pids, memory or cpu
 * controller, under the control plane's own cgroup, where the machine lets
 * it make one: cgroup v1's separate hierarchies, or v2's single one with the
 * controllers delegated. Together they bound every process of the sandbox at
 * once, which rlimits do per process only: its processes and threads, its
 * memory (the tmpfs pages it writes included, no swap) and its share of the
 * CPUs. The cgroup also lists them all, so ending a sandbox ends everything
 * it started, whatever detached.
 */
export class SandboxCgroups {
  private constructor(private readonly hierarchies: readonly Hierarchy[]) {}

  /** The hierarchies to use, or null when this machine gives the control plane none it can write. */
  static find(group = 'aileron-sandboxes', self: CgroupsOfProcess = ownProcess()): SandboxCgroups | null {
    const own = ownCgroups(self.cgroup);
    const hierarchies: Hierarchy[] = [];
    const missing = new Set(CONTROLLERS);
    for (const mount of cgroupMounts(self.mountinfo)) {
      const version = mount.type === 'cgroup2' ? 2 : 1;
      // a controller is in one hierarchy at most: v2 has those no v1 hierarchy took
      const wanted = [...missing].filter((controller) => version === 2 || mount.options.includes(controller));
      if (wanted.length === 0) continue;
      const path = own.get(version === 2 ? '' : wanted[0]!);
      if (path === undefined) continue;
      const inside = relative(mount.root, path);
      if (inside.startsWith('..')) continue;
      const here = join(mount.mountpoint, inside);
      const parent = join(here, group);
      try {
        let controllers = wanted;
        if (version === 2) {
          const offered = readFileSync(join(here, 'cgroup.controllers'), 'utf8').split(/\s+/);
          controllers = enable(
            here,
            wanted.filter((controller) => offered.includes(controller)),
          );
          if (controllers.length === 0) continue;
          mkdirSync(parent, { recursive: true });
          controllers = enable(parent, controllers);
          if (controllers.length === 0) continue;
        } else mkdirSync(parent, { recursive: true });
        // made by another user before (a root control plane's tests, say): there only if ours to write
        accessSync(parent, constants.W_OK);
        hierarchies.push({ version, parent, controllers });
        for (const controller of controllers) missing.delete(controller);
      } catch {
        // not ours to write
      }
    }
    return hierarchies.length > 0 ? new SandboxCgroups(hierarchies) : null;
  }

  /** The controllers a sandbox's cgroups have. */
  get controllers(): CgroupController[] {
    return this.hierarchies.flatMap((hierarchy) => hierarchy.controllers);
  }

  /**
   * Makes (or finds) the cgroups `name` with these limits; their
   * `cgroup.procs`, one per hierarchy, for a process to join before it
   * starts anything of the sandbox.
   */
  open(name: string, limits: SandboxCgroupLimits): string[] {
    return this.hierarchies.map((hierarchy) => {
      const dir = this.dir(hierarchy, name);
      mkdirSync(dir, { recursive: true });
      for (const controller of hierarchy.controllers) LIMITS[controller](dir, hierarchy.version, limits);
      return join(dir, 'cgroup.procs');
    });
  }

  /** The directory of the cgroup `name` in the hierarchy that has `controller` (undefined when none has it). */
  directory(name: string, controller: CgroupController): string | undefined {
    const hierarchy = this.hierarchies.find((each) => each.controllers.includes(controller));
    return hierarchy && this.dir(hierarchy, name);
  }

  /**
   * How many times the kernel killed a process of the cgroup `name` because
   * its memory was full; undefined without a memory cgroup (or a kernel that
   * does not count them: before 4.13 on cgroup v1).
   */
  oomKills(name: string): number | undefined {
    const hierarchy = this.hierarchies.find((each) => each.controllers.includes('memory'));
    if (!hierarchy) return undefined;
    try {
      const counts = readFileSync(
        join(this.dir(hierarchy, name), hierarchy.version === 2 ? 'memory.events' : 'memory.oom_control'),
        'utf8',
      );
      const kills = /^oom_kill (\d+)$/m.exec(counts)?.[1];
      return kills === undefined ? undefined : Number(kills);
    } catch {
      // not made yet, or released: nothing killed in it
      return 0;
    }
  }

  /** The host pids in the cgroup (none when it does not exist). */
  pids(name: string): number[] {
    const pids = new Set<number>();
    for (const hierarchy of this.hierarchies) {
      try {
        for (const pid of readFileSync(join(this.dir(hierarchy, name), 'cgroup.procs'), 'utf8').split('\n'))
          if (pid) pids.add(Number(pid));
      } catch {
        // not made, or gone
      }
    }
    return [...pids];
  }

  /** Removes the cgroups if nothing is left in them. */
  release(name: string): void {
    this.remove(name);
  }

  /**
   * Kills every process in the cgroup, again until none is left (a process
   * may fork between the listing and its kill), then removes it.
   */
  async end(name: string): Promise<void> {
    for (let pass = 0; pass < 200; pass++) {
      const pids = this.pids(name);
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      if (this.remove(name)) return;
      // what was killed has not finished exiting
      await sleep(pids.length > 0 ? 5 : 20);
    }
  }

  get description(): string {
    return this.hierarchies
      .map((hierarchy) => `${hierarchy.controllers.join(', ')} (cgroup v${hierarchy.version} ${hierarchy.parent})`)
      .join('; ');
  }

  /** rmdir in every hierarchy; true when none is left */
  private remove(name: string): boolean {
    let left = false;
    for (const hierarchy of this.hierarchies) {
      try {
        rmdirSync(this.dir(hierarchy, name));
      } catch (error) {
        // EBUSY: something is still in it
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') left = true;
      }
    }
    return !left;
  }

  private dir(hierarchy: Hierarchy, name: string): string {
    if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`not a cgroup name: ${name}`);
    return join(hierarchy.parent, name);
  }
}

/** Each controller's files, as each version names them. */
const LIMITS: Record<CgroupController, (dir: string, version: 1 | 2, limits: SandboxCgroupLimits) => void> = {
  pids: (dir, _, { pids }) => writeFileSync(join(dir, 'pids.max'), String(pids)),
  memory: (dir, version, { memoryBytes }) => {
    if (version === 2) {
      writeFileSync(join(dir, 'memory.max'), String(memoryBytes));
      // swap would let the sandbox hold more than its bound, out of the host's swap
      optionally(join(dir, 'memory.swap.max'), '0');
      return;
    }
    const limit = memoryBytes === 'max' ? '-1' : String(memoryBytes);
    // memory and swap together may never be under memory alone: lifted first, so the limit may go either way
    const withSwap = join(dir, 'memory.memsw.limit_in_bytes');
    optionally(withSwap, '-1');
    writeFileSync(join(dir, 'memory.limit_in_bytes'), limit);
    optionally(withSwap, limit);
    optionally(join(dir, 'memory.swappiness'), '0');
  },
  cpu: (dir, version, { cpus }) => {
    const quota = cpus === 'max' ? undefined : Math.max(1000, Math.round(cpus * CPU_PERIOD_US));
    if (version === 2) return writeFileSync(join(dir, 'cpu.max'), `${quota ?? 'max'} ${CPU_PERIOD_US}`);
    writeFileSync(join(dir, 'cpu.cfs_period_us'), String(CPU_PERIOD_US));
    try {
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quota ?? -1));
    } catch (error) {
      // v1 refuses a quota over an ancestor's (a container of fewer CPUs): that ancestor's, smaller, bounds the sandbox then
      if ((error as NodeJS.ErrnoException).code !== 'EINVAL') throw error;
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), '-1');
    }
  },
};

/** A file some kernels lack or refuse (swap accounting off, a v1 swappiness a parent fixes): written where it can be. */
function optionally(file: string, value: string): void {
  if (!existsSync(file)) return;
  try {
    writeFileSync(file, value);
  } catch {
    // not writable here
  }
}

/** v2: turns the controllers on for the children of `dir`; those it could */
function enable(dir: string, controllers: CgroupController[]): CgroupController[] {
  const control = join(dir, 'cgroup.subtree_control');
  const on = (): string[] => readFileSync(control, 'utf8').split(/\s+/);
  return controllers.filter((controller) => {
    if (on().includes(controller)) return true;
    try {
      writeFileSync(control, `+${controller}`);
      return true;
    } catch {
      // not delegated to us, or our cgroup has processes of its own (v2 allows none beside enabled controllers)
      return false;
    }
  });
}

function ownProcess(): CgroupsOfProcess {
  return { mountinfo: readFileSync('/proc/self/mountinfo', 'utf8'), cgroup: readFileSync('/proc/self/cgroup', 'utf8') };
}

/** controller (v1) or '' (v2) → the control plane's cgroup path */
function ownCgroups(text: string): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of text.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (path === undefined) continue;
    for (const controller of controllers!.split(',')) own.set(controller, path);
  }
  return own;
}

function cgroupMounts(text: string): { root: string; mountpoint: string; type: string; options: string[] }[] {
  const mounts = [];
  for (const line of text.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!before || !after) continue;
    const fields = before.split(' ');
    const [type, , superOptions] = after.split(' ');
    if (type !== 'cgroup' && type !== 'cgroup2') continue;
    mounts.push({
      root: unescape(fields[3]!),
      mountpoint: unescape(fields[4]!),
      type,
      options: (superOptions ?? '').split(','),
    });
  }
  return mounts;
}

/** mountinfo's octal escapes (a space is \040) */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}
