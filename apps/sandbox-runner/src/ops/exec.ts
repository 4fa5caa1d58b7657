/** Commands: `exec` (bash with the call's limits, in a namespace of its own where the local driver allows it) and `which` (what execve would run). */
import { spawn } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import { isAbsolute, join, posix, resolve } from 'node:path';
import {
  type ExecRestrictions,
  RUNNER_ISOLATE_ENV,
  type RunnerLimits,
  type RunnerRequest,
  type RunnerResults,
  SANDBOX_WORKDIR,
} from '@aileron/sandboxes/runner-protocol';
import { Failure } from '../failure';
import { COMMAND_PATH, inSandbox } from '../sandbox-paths';
import { collector, exitCodeOf } from '../streams';

/**
 * Every process of the sandbox but the runner and the namespace's init: a
 * command's whole tree, including what it detached with setsid or double
 * forks. The sandbox has its own pid namespace, so nothing else is in /proc.
 * Again until a pass finds none: a process may fork between the listing and
 * its kill.
 */
async function killEverythingElse(): Promise<void> {
  const own = new Set([1, process.pid]);
  for (let pass = 0; pass < 100; pass++) {
    let found = false;
    for (const name of await fs.readdir('/proc').catch(() => [] as string[])) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || own.has(pid)) continue;
      found = true;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (!found) return;
  }
}

/**
 * Set by the local driver, which lets this runner keep CAP_SYS_ADMIN and
 * CAP_SETPCAP in the sandbox's user namespace for this alone: each command
 * runs in a pid and mount namespace of its own, under a shell there as pid 1.
 * When its bash ends, or the timeout kills it, the kernel ends everything
 * else in the namespace, whatever detached; and a command sees none of the
 * sandbox's other processes, the runner least of all (no signal, no ptrace,
 * no pidfd can name it). Its fresh /proc has /proc/sys read-only (the
 * sysctls of the sandbox's own namespaces are its user namespace's; the
 * host's, and /proc's other knobs, belong to the host's root, never the
 * sandbox's uid), and it runs with every capability dropped and
 * no_new_privs. A mount(8) per knob would cost a process start per command.
 */
const ISOLATED = process.env[RUNNER_ISOLATE_ENV] === '1';
/**
 * The namespace's first shell: /proc/sys read-only, then the client's policy
 * (its mounts come as pairs of arguments before a `--`, never spliced into
 * the script, whatever the paths hold), then the command. A mount that fails
 * fails the command (125): it never runs wider than the policy said.
 */
const NAMESPACE_SETUP = [
  'mount --bind -o ro /proc/sys /proc/sys || exit 125',
  'while [ "$1" != -- ]; do',
  '  case $1 in',
  '    bind) mount --bind "$2" "$2" ;;',
  '    ro) mount -o remount,bind,ro,nosuid,nodev "$2" ;;',
  // in two steps: mount(8)'s own read-only bind clears nosuid and nodev, which the kernel refuses here
  '    robind) mount --bind "$2" "$2" && mount -o remount,bind,ro,nosuid,nodev "$2" ;;',
  '  esac || { echo "[aileron] the client\'s sandbox policy could not be applied to $2; the command did not run" >&2; exit 125; }',
  '  narrowed=1',
  '  shift 2',
  'done',
  'shift',
  // the working directory again, by its path: the one it was opened as stays on the mount below the new ones, writable
  '[ -z "$narrowed" ] || cd "$(pwd -P)" || exit 125',
  // SIGXFSZ ignored: past a file size limit a write fails with EFBIG instead of killing the writer
  'trap "" XFSZ; exec "$@"',
].join('\n');

/** what runs the command once the namespace is set up: no capability left, and a pid 1 of its own */
const CALL_TAIL = [
  '/usr/bin/setpriv',
  '--inh-caps=-all',
  '--ambient-caps=-all',
  '--bounding-set=-all',
  '--no-new-privs',
  '--',
  // pid 1, which a signal from inside the namespace cannot end: the command runs as its child, so a `kill -9 $$` or a CPU limit ends it as ever, and its exit (128 + signal) is what unshare hands on (`; exit $?` keeps the shell from becoming the command).
  // The command's oom_score_adj is 1000: when the sandbox's memory cgroup is full, the kernel kills the command's largest process, never pid 1 (which would end all of it) before it, nor the runner
  '/bin/sh',
  '-c',
  '({ echo 1000 > /proc/self/oom_score_adj; } 2>/dev/null; exec "$@"); exit $?',
  'aileron-init',
];

function callNamespace(mounts: string[], network: boolean): string[] {
  return [
    '/usr/bin/unshare',
    '--pid',
    '--mount',
    ...(network ? [] : ['--net']),
    '--fork',
    '--kill-child',
    '--mount-proc',
    '--',
    '/bin/sh',
    '-c',
    NAMESPACE_SETUP,
    'aileron-call',
    ...mounts,
    '--',
    ...CALL_TAIL,
  ];
}

/** after the command's end or its kill, how long its output may still take to close before the answer goes without it */
const CLOSE_GRACE_MS = 2_000;

function limitArgs(limits: RunnerLimits): string[] {
  const args: string[] = [];
  // the data limit counts memory a process writes; the address space would count what Node, the JVM or Go only reserve, and Node would not start under 1 GiB
  if (limits.memoryMb) args.push(`--data=${limits.memoryMb * 1024 * 1024}`);
  if (limits.cpuSeconds) args.push(`--cpu=${limits.cpuSeconds}`);
  // per uid, the runner's own threads included: the local driver gives each sandbox a uid of its own
  if (limits.pids) args.push(`--nproc=${limits.pids}`);
  if (limits.fileSizeBytes !== undefined) args.push(`--fsize=${limits.fileSizeBytes}`);
  return args;
}

/** The command's process group: its bash and what did not leave the group (isolated: also the namespace's pid 1, so the namespace). */
function killGroup(pid: number | undefined): void {
  try {
    if (pid) process.kill(-pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

function within(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}

/** Where a writable root may lie: what the sandbox lets a command write, apart from its own root's scratch. */
function rootAreas(): string[] {
  return [SANDBOX_WORKDIR, '/tmp', process.env.HOME ?? '/home/sandbox'];
}

/**
 * The mount points a command could write through: every read-write mount of
 * the sandbox (its root's own scratch file system included, where /etc's
 * directory is) but the kernel's /proc and /dev, which the command needs
 * (/dev/null) and which hold no files of the sandbox.
 */
async function writableMounts(): Promise<string[]> {
  const points = new Set<string>();
  for (const line of (await fs.readFile('/proc/self/mountinfo', 'utf8')).split('\n')) {
    const fields = line.split(' ');
    if (fields.length < 6 || !fields[5]!.split(',').includes('rw')) continue;
    const point = fields[4]!.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
    if (!within(point, '/proc') && !within(point, '/dev')) points.add(point);
  }
  return [...points];
}

/** Inside a writable root, what Codex keeps read-only (a repository's hooks and configuration, Codex's own). */
const READ_ONLY_SUBPATHS = ['.git', '.codex'];

/**
 * The mounts (pairs for NAMESPACE_SETUP) that leave the command only the
 * policy's writable roots, and a line for each root it ignores: every
 * read-write mount of the sandbox is made read-only in the command's mount
 * namespace, after each root inside it is bound on itself (its own mount,
 * which stays writable). Every path is looked at here, inside the sandbox,
 * so a symbolic link the agent made resolves as the sandbox sees it; a root
 * must be where it says (no link on the way) and inside /src, /tmp or the
 * home directory, so no bind makes writable what was not. A race with the
 * agent's own commands can at worst bind some other place of those: still
 * nothing the sandbox could not write.
 */
async function narrowing(restrictions: ExecRestrictions): Promise<{ mounts: string[]; notes: string[] }> {
  const notes: string[] = [];
  if (restrictions.tmpdir && restrictions.tmpdir !== '/tmp')
    await fs.mkdir(restrictions.tmpdir, { recursive: true, mode: 0o700 }).catch(() => undefined);
  if (!restrictions.writable) return { mounts: [], notes };
  const areas = rootAreas();
  const kept: string[] = [];
  for (const root of new Set(restrictions.writable)) {
    const normal = posix.normalize(root).replace(/(.)\/+$/, '$1');
    const real = isAbsolute(root) ? await fs.realpath(normal).catch(() => null) : null;
    let why: string | null = null;
    if (!isAbsolute(root)) why = 'not an absolute path';
    else if (real === null) why = 'it does not exist in the sandbox';
    else if (real !== normal) why = `it is or passes through a symbolic link (to ${real})`;
    else if (!areas.some((area) => within(real, area)))
      why = `it is outside what the sandbox may write (${areas.join(', ')})`;
    if (why) notes.push(`[aileron] the writable root ${root} was ignored: ${why}\n`);
    else kept.push(normal);
  }
  const points = await writableMounts();
  // each root is on the deepest mount that holds it; a root inside another kept one is writable with it
  const mountOf = (path: string): string =>
    points.filter((point) => within(path, point)).sort((a, b) => b.length - a.length)[0] ?? '/';
  const outermost = kept.filter((root) => !kept.some((other) => other !== root && within(root, other)));
  const mounts: string[] = [];
  for (const point of points) {
    const inside = outermost.filter((root) => mountOf(root) === point);
    if (inside.includes(point)) continue;
    for (const root of inside) mounts.push('bind', root);
    mounts.push('ro', point);
  }
  for (const root of kept) {
    for (const name of READ_ONLY_SUBPATHS) {
      const sub = join(root, name);
      if ((await fs.lstat(sub).catch(() => null))?.isDirectory()) mounts.push('robind', sub);
    }
  }
  return { mounts, notes };
}

export async function exec(request: Extract<RunnerRequest, { op: 'exec' }>): Promise<RunnerResults['exec']> {
  const cwd = inSandbox(request.workdir);
  const stat = await fs.stat(cwd).catch(() => null);
  if (!stat?.isDirectory())
    throw new Failure('WORKDIR_INVALID', `workdir ${request.workdir}: not a directory in the sandbox`);
  const restrictions = request.restrictions;
  // fail closed: a command under a client's policy never runs with the sandbox's wider bounds (a pod of its own
  // that the Kubernetes driver made with them asks only for TMPDIR)
  if (restrictions && !ISOLATED && (restrictions.writable || !restrictions.network))
    throw new Failure(
      'RESTRICTIONS_UNSUPPORTED',
      "this sandbox's runner cannot narrow one command's bounds (no namespaces of its own here)",
    );
  const { mounts, notes } = restrictions && ISOLATED ? await narrowing(restrictions) : { mounts: [], notes: [] };
  if (restrictions?.tmpdir && !ISOLATED)
    await fs.mkdir(restrictions.tmpdir, { recursive: true, mode: 0o700 }).catch(() => undefined);
  const limits = limitArgs(request.limits);
  const shell = ['/bin/bash', '--noprofile', '--norc', '-c', request.command];
  const argv = [
    ...(ISOLATED ? callNamespace(mounts, restrictions?.network ?? true) : []),
    ...(limits.length > 0 ? ['/usr/bin/prlimit', ...limits, '--'] : []),
    ...shell,
  ];
  return new Promise((resolveExec) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd,
      env: {
        PATH: COMMAND_PATH,
        HOME: process.env.HOME ?? '/home/sandbox',
        TMPDIR: restrictions?.tmpdir ?? '/tmp',
        LANG: 'C.UTF-8',
        TERM: 'dumb',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const stdout = collector();
    const stderr = collector();
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    let timedOut = false;
    let heldOpen = false;
    let grace: NodeJS.Timeout | undefined;
    let answered = false;
    const answer = (code: number | null, signal: NodeJS.Signals | null): void => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      clearTimeout(grace);
      child.stdout.destroy();
      child.stderr.destroy();
      const exitCode = exitCodeOf(code, signal);
      let note = timedOut
        ? `\n[aileron] the command ran longer than ${request.timeoutMs / 1000} s and was killed with everything it started\n`
        : '';
      if (heldOpen && !timedOut)
        note += '\n[aileron] a process the command left running kept its output open; the answer did not wait for it\n';
      resolveExec({
        stdout: stdout.text(),
        stderr: notes.join('') + stderr.text() + note,
        exitCode: timedOut ? 124 : exitCode,
        timedOut,
        truncated: stdout.truncated() || stderr.truncated(),
      });
    };
    // the answer waits for the output to close, but never long after the command ended or was killed, whatever still holds it
    const bound = (code: number | null, signal: NodeJS.Signals | null): void => {
      if (grace) return;
      grace = setTimeout(() => {
        heldOpen = true;
        answer(code, signal);
      }, CLOSE_GRACE_MS);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
      // without a namespace of its own, a command's processes are found among the sandbox's
      if (!ISOLATED) void killEverythingElse();
      bound(null, 'SIGKILL');
    }, request.timeoutMs);
    child.on('error', (error) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      resolveExec({
        stdout: '',
        stderr: `could not start bash: ${error.message}\n`,
        exitCode: 127,
        timedOut: false,
        truncated: false,
      });
    });
    child.on('exit', (code, signal) => bound(code, signal));
    child.on('close', (code, signal) => answer(code, signal));
  });
}

export async function which(request: Extract<RunnerRequest, { op: 'which' }>): Promise<RunnerResults['which']> {
  const workdir = inSandbox(request.workdir);
  const paths: Record<string, string | null> = {};
  for (const name of request.names) {
    paths[name] = null;
    const candidates = name.includes('/')
      ? [resolve(workdir, name)]
      : COMMAND_PATH.split(':').map((dir) => join(dir, name));
    for (const candidate of candidates) {
      try {
        await fs.access(candidate, constants.X_OK);
        if (!(await fs.stat(candidate)).isFile()) continue;
        // the file execve would load: /bin/rm and /usr/bin/rm are one program on a merged /usr
        paths[name] = await fs.realpath(candidate);
        break;
      } catch {
        // not here
      }
    }
  }
  return { paths };
}
