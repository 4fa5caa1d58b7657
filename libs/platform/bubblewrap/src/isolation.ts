import { systemRootArgs } from './system-root';

export interface Isolation {
  /** keep the network namespace bwrap starts in; without it, a loopback of its own and nothing else */
  network: boolean;
  /**
   * A user namespace that cannot make another (no nested namespace to climb
   * out through), with the ids the program sees inside: bwrap's own when
   * not given.
   */
  user?: { id?: number };
  /** the whole environment the program sees */
  env: Readonly<Record<string, string>>;
  /** /tmp's size in MiB; unbounded (memory permitting) when not given */
  tmpMb?: number;
  /** a /proc of its own namespace: anything that lists or signals its own processes needs it */
  proc?: boolean;
  /** the files of /etc besides the system root (systemRootArgs) */
  etc?: readonly string[];
  /**
   * /etc/passwd and /etc/group read from fds 3 and 4, which the caller
   * writes: programs that look their user up (git, ssh, os.userInfo()) find
   * the one inside, never the host's list of users.
   */
  accounts?: boolean;
}

/**
 * bubblewrap's arguments for a program kept apart from the host, shared by
 * every process we isolate (pool instances, sandboxes, the git of a
 * sandbox's history), so a hardening reaches all of them: namespaces of
 * its own, no capability even when we are root, no variable of ours, a
 * private /dev and /tmp and the read-only system root. What each one binds
 * beside that (its home, its files, its program) comes after these.
 */
export function isolationArgs(isolation: Isolation): string[] {
  const args = ['--unshare-all', ...(isolation.network ? ['--share-net'] : [])];
  if (isolation.user) {
    args.push('--unshare-user', '--disable-userns');
    const id = isolation.user.id;
    if (id !== undefined) args.push('--uid', String(id), '--gid', String(id));
  }
  // the program dies with whoever started it, and cannot reach the terminal it was started from (TIOCSTI)
  args.push('--die-with-parent', '--new-session');
  args.push('--clearenv');
  for (const [name, value] of Object.entries(isolation.env)) args.push('--setenv', name, value);
  // run as root, bwrap would otherwise keep every capability inside
  args.push('--cap-drop', 'ALL');
  if (isolation.proc) args.push('--proc', '/proc');
  args.push('--dev', '/dev', ...tmpfsArgs('/tmp', isolation.tmpMb), ...systemRootArgs(isolation.etc));
  if (isolation.accounts) args.push('--ro-bind-data', '3', '/etc/passwd', '--ro-bind-data', '4', '/etc/group');
  return args;
}

/** a private tmpfs at `path`, of at most `mb` MiB when given (it counts against the host's memory, and the sandbox's) */
export function tmpfsArgs(path: string, mb?: number): string[] {
  return [...(mb === undefined ? [] : ['--size', String(mb * 1024 * 1024)]), '--tmpfs', path];
}
