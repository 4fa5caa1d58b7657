import { accessSync, constants, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A pids cgroup per sandbox, under the control plane's own cgroup, where the
 * machine lets it make one (cgroup v1's pids hierarchy, or v2 with the pids
 * controller delegated). It bounds every process and thread of the sandbox
 * together, which RLIMIT_NPROC does per uid only, and it lists them all, so
 * ending a sandbox ends everything it started, whatever detached.
 */
export class PidsCgroups {
  private constructor(
    private readonly parent: string,
    private readonly version: 1 | 2,
  ) {}

  /** The hierarchy to use, or null when this machine gives the control plane none it can write. */
  static find(group = 'aileron-sandboxes'): PidsCgroups | null {
    const own = ownCgroups();
    for (const mount of cgroupMounts()) {
      const version = mount.type === 'cgroup2' ? 2 : mount.options.includes('pids') ? 1 : null;
      if (!version) continue;
      const path = own.get(version === 2 ? '' : 'pids');
      if (path === undefined) continue;
      const inside = relative(mount.root, path);
      if (inside.startsWith('..')) continue;
      const parent = join(mount.mountpoint, inside, group);
      try {
        if (version === 2) {
          if (!readFileSync(join(mount.mountpoint, inside, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('pids')) continue;
          enable(join(mount.mountpoint, inside));
          mkdirSync(parent, { recursive: true });
          enable(parent);
        } else mkdirSync(parent, { recursive: true });
        // made by another user before (a root control plane's tests, say): there only if ours to write
        accessSync(parent, constants.W_OK);
        return new PidsCgroups(parent, version);
      } catch {
        // not ours to write
      }
    }
    return null;
  }

  /** Makes (or finds) the cgroup `name` with at most `max` processes and threads; its `cgroup.procs` to join. */
  open(name: string, max: number | 'max'): string {
    const dir = this.dir(name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'pids.max'), String(max));
    return join(dir, 'cgroup.procs');
  }

  /** The host pids in the cgroup (none when it does not exist). */
  pids(name: string): number[] {
    try {
      return readFileSync(join(this.dir(name), 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  /** Removes the cgroup if nothing is left in it. */
  release(name: string): void {
    try {
      rmdirSync(this.dir(name));
    } catch {
      // in use, or gone
    }
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
      try {
        rmdirSync(this.dir(name));
        return;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return;
        // EBUSY: what was killed has not finished exiting
        await sleep(pids.length > 0 ? 5 : 20);
      }
    }
  }

  private dir(name: string): string {
    if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`not a cgroup name: ${name}`);
    return join(this.parent, name);
  }

  get description(): string {
    return `cgroup v${this.version} ${this.parent}`;
  }
}

function enable(dir: string): void {
  const control = join(dir, 'cgroup.subtree_control');
  if (!readFileSync(control, 'utf8').split(/\s+/).includes('pids')) writeFileSync(control, '+pids');
}

/** controller (v1) or '' (v2) → the control plane's cgroup path */
function ownCgroups(): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (path === undefined) continue;
    for (const controller of controllers!.split(',')) own.set(controller, path);
  }
  return own;
}

function cgroupMounts(): { root: string; mountpoint: string; type: string; options: string[] }[] {
  const mounts = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [before, after] = line.split(' - ');
    if (!before || !after) continue;
    const fields = before.split(' ');
    const [type, , superOptions] = after.split(' ');
    if (type !== 'cgroup' && type !== 'cgroup2') continue;
    mounts.push({ root: unescape(fields[3]!), mountpoint: unescape(fields[4]!), type, options: (superOptions ?? '').split(',') });
  }
  return mounts;
}

/** mountinfo's octal escapes (a space is \040) */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}
