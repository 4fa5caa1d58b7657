/**
 * How a bwrap command line is started on the host: as which user, in which
 * cgroup, and how host directories only root can reach are bound into it.
 *
 * A sandbox must never run as the host's root: a uid 0 inside a user
 * namespace that maps to the host's uid 0 writes the host's sysctls
 * (kernel.core_pattern: a program the host runs as root) and is exempt from
 * RLIMIT_NPROC. So a control plane that runs as root starts bwrap as an
 * unprivileged uid of the sandbox's own; bwrap then maps that uid as any
 * user's.
 *
 * That uid cannot traverse the control plane's private directories (the
 * data directory is 0700, a checkout may be under /root), so the
 * directories it must bind come through a "door": a private mount namespace
 * made as root, where each one is bound under a tmpfs on /tmp by an open
 * descriptor, before the uid changes. Nothing of that namespace is visible
 * outside, and the descriptors are closed before bwrap starts.
 */

/** Where the door's tmpfs is, in the launcher's private mount namespace only. */
const DOOR = '/tmp';
/** the shell's file descriptors 5–9 carry the door's directories while it is built; 3 and 4 are the caller's */
const FIRST_DOOR_FD = 5;
const MAX_DOORS = 5;
/** the caller's descriptors past 3 and 4 start here: the door replaces and closes 5–9 */
export const FIRST_FD_PAST_DOOR = FIRST_DOOR_FD + MAX_DOORS;
/** sh lines that write the shell's pid into each `cgroup.procs` given as its next arguments (their count first, then the paths), shifting them off */
const JOIN_CGROUPS = 'n="$1"; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 1; shift; n=$((n - 1)); done';

export interface HostUser {
  uid: number;
  gid: number;
}

export interface LaunchOptions {
  /** run as this user (a root control plane); undefined: as the control plane itself */
  user?: HostUser;
  /** the `cgroup.procs` of the sandbox's cgroup in each hierarchy, to join before anything of the sandbox starts */
  cgroupProcs?: readonly string[];
  unshare?: string;
  setpriv?: string;
}

/**
 * The directories a launch binds that the sandbox's user may not reach on
 * the host. `path` gives the name bwrap must use for each: a door path when
 * there is a user to switch to, the host path itself otherwise.
 */
export class HostDoor {
  private readonly doors = new Map<string, string>();

  constructor(private readonly options: LaunchOptions) {}

  path(hostPath: string): string {
    if (!this.options.user) return hostPath;
    let door = this.doors.get(hostPath);
    if (!door) {
      if (this.doors.size === MAX_DOORS)
        throw new Error(`at most ${MAX_DOORS} private directories can be bound into one sandbox`);
      door = `${DOOR}/aileron-door-${this.doors.size}`;
      this.doors.set(hostPath, door);
    }
    return door;
  }

  /** argv (program first) that runs `command` as the options say */
  command(command: string[]): string[] {
    const { user } = this.options;
    const cgroups = this.options.cgroupProcs ?? [];
    const joined = [String(cgroups.length), ...cgroups];
    if (!user)
      return cgroups.length > 0
        ? ['/bin/sh', '-c', `${JOIN_CGROUPS}; exec "$@"`, 'aileron-cgroups', ...joined, ...command]
        : command;
    const hosts = [...this.doors.keys()];
    const lines = ['set -e', JOIN_CGROUPS];
    // opened before the tmpfs hides /tmp, where a host directory may be
    hosts.forEach((_, at) => lines.push(`exec ${FIRST_DOOR_FD + at}<"$1"; shift`));
    lines.push(`mount -t tmpfs -o mode=0755,size=64k aileron-door ${DOOR}`);
    for (const [at, door] of [...this.doors.values()].entries()) {
      lines.push(
        `mkdir ${door}`,
        `mount --no-canonicalize --bind /proc/self/fd/${FIRST_DOOR_FD + at} ${door}`,
        `exec ${FIRST_DOOR_FD + at}<&-`,
      );
    }
    lines.push('exec "$@"');
    const setpriv = [
      this.options.setpriv ?? '/usr/bin/setpriv',
      `--reuid=${user.uid}`,
      `--regid=${user.gid}`,
      '--clear-groups',
      '--',
    ];
    return [
      this.options.unshare ?? '/usr/bin/unshare',
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
      lines.join('\n'),
      'aileron-door',
      ...joined,
      ...hosts,
      ...setpriv,
      ...command,
    ];
  }
}
