/** Commands: `exec` (bash with the call's limits, in a namespace of its own where the local driver allows it) and `which` (what execve would run). */
import { spawn } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  RUNNER_ISOLATE_ENV,
  type RunnerLimits,
  type RunnerRequest,
  type RunnerResults,
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
const CALL_NAMESPACE = [
  '/usr/bin/unshare',
  '--pid',
  '--mount',
  '--fork',
  '--kill-child',
  '--mount-proc',
  '--',
  '/bin/sh',
  '-c',
  // SIGXFSZ ignored: past a file size limit a write fails with EFBIG instead of killing the writer
  'mount --bind -o ro /proc/sys /proc/sys || exit 125; trap "" XFSZ; exec "$@"',
  'aileron-call',
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

export async function exec(request: Extract<RunnerRequest, { op: 'exec' }>): Promise<RunnerResults['exec']> {
  const cwd = inSandbox(request.workdir);
  const stat = await fs.stat(cwd).catch(() => null);
  if (!stat?.isDirectory())
    throw new Failure('WORKDIR_INVALID', `workdir ${request.workdir}: not a directory in the sandbox`);
  const limits = limitArgs(request.limits);
  const shell = ['/bin/bash', '--noprofile', '--norc', '-c', request.command];
  const argv = [
    ...(ISOLATED ? CALL_NAMESPACE : []),
    ...(limits.length > 0 ? ['/usr/bin/prlimit', ...limits, '--'] : []),
    ...shell,
  ];
  return new Promise((resolveExec) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd,
      env: {
        PATH: COMMAND_PATH,
        HOME: process.env.HOME ?? '/home/sandbox',
        TMPDIR: '/tmp',
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
        stderr: stderr.text() + note,
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
