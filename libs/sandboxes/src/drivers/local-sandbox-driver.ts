import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  endProcessesOfUser,
  HostDoor,
  type HostUser,
  isolationArgs,
  SandboxCgroups,
  type SandboxCgroupLimits,
  tmpfsArgs,
} from '@aileron/bubblewrap';
import { compiledGitHelperPath } from '../bundles';
import {
  gitEnv,
  type GitHelperAnswer,
  type GitHelperRequest,
  HISTORY_DIR,
  historyGitArgs,
  RUNNER_ISOLATE_ENV,
  type RunnerAnswer,
  type RunnerLimits,
  type RunnerOp,
  type RunnerRequest,
  type RunnerResult,
  SANDBOX_WORKDIR,
  writeHistoryInfo,
} from '../runner-protocol';
import {
  type GitResult,
  RunnerError,
  type SandboxDriver,
  type SandboxRunner,
  type SandboxSpec,
  SandboxSourceError,
  SandboxStartError,
} from './driver';
import { readMessages } from './frames';
import { egressCommand, type EgressOptions } from './local-egress';
import { MemoryBound, PIDS_RESERVE, SANDBOX_UID, sandboxMemoryMb, SrcBound, withDefaultLimits } from './local-limits';
import { SandboxUsers } from './sandbox-users';

const HOME = '/home/sandbox';
const RUNNER_DIR = '/opt/aileron-runner';
const START_TIMEOUT_MS = 20_000;
/** where a lent file (withFileForGit) is inside the history's git's bubblewrap, beside the history at HISTORY_DIR */
const LENT_FILE = '/lent';
/** the largest input passed through the git helper's lines */
const HELPER_MAX_INPUT_BYTES = 4 * 1024 * 1024;
/** commands whose output grows with the sandbox's tree (a listing, a diff): never through the helper's lines either */
const LARGE_OUTPUT: ReadonlySet<string> = new Set(['ls-tree', 'diff-tree', 'show']);
/** what programs commonly need of /etc: certificates, name resolution, the alternatives Debian links through */
const ETC = [
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/ld.so.cache',
];

export interface LocalSandboxOptions {
  /** each sandbox's files under `<stateDir>/<id>/src`, its history under `<stateDir>/<id>/git` */
  stateDir: string;
  /** the bundled runner (compiledRunnerPath()), alone in its directory: that directory is bound into every sandbox */
  runnerScript: string;
  /** the bundled git helper; compiledGitHelperPath() unless named */
  gitHelperScript?: string;
  bwrapPath?: string;
  nodeBinary?: string;
  gitBinary?: string;
  /** how `network: egress` reaches out (see local-egress.ts) */
  egress?: EgressOptions;
  log: (line: string) => void;
  /** a root control plane runs each sandbox as a host uid of its own, from this one up (SANDBOX_UID_COUNT of them) */
  uidBase?: number;
  /** the size of /tmp and of the home directory, each a tmpfs, in MiB */
  tmpfsMb?: number;
  /** at most this many bytes in /src (see SrcBound); undefined: no bound */
  srcMaxBytes?: number;
  /** each limit a sandbox's create request did not name (a Kubernetes pod is bounded by its own resources instead) */
  defaultLimits?: RunnerLimits;
  /** the CPUs' worth of time each sandbox may take at once, where there is a cpu cgroup (0.5: half of one); undefined: no bound */
  cpus?: number;
}

const DEFAULT_UID_BASE = 1_879_048_192;
const DEFAULT_TMPFS_MB = 512;

export { RunnerError };

/**
 * Sandboxes as bubblewrap processes on this machine: /src read-write (a
 * directory of ours), the system read-only, a private /tmp and home, pid and
 * ipc namespaces, no network unless asked, gone with the control plane.
 */
export class LocalSandboxDriver implements SandboxDriver {
  readonly kind = 'local' as const;
  /**
   * A client's tighter bounds are applied by the sandbox's runner, inside the
   * sandbox, in the command's own namespaces (the runner's ops/exec.ts): a
   * path the policy names is never resolved or bound here on the host, where
   * a link the agent made in /src would point into the host's files.
   */
  readonly narrowing = 'runner' as const;
  private readonly running = new Map<string, Promise<LocalRunner>>();
  private readonly bwrapPath: string;
  private readonly nodeBinary: string;
  private readonly gitBinary: string;
  private helper: GitHelper | undefined;
  /** null unless the control plane is root: then no sandbox runs as it */
  private readonly users: SandboxUsers | null;
  /** null where this machine gives no cgroup to write */
  private readonly cgroups: SandboxCgroups | null;
  /** the sandboxes whose cgroups this driver made (an unpack makes them too, without a runner to stop) */
  private readonly opened = new Set<string>();
  private readonly bounds = new Map<string, SrcBound>();
  /** by sandbox id: the file its history's gits may read (withFileForGit) */
  private readonly lent = new Map<string, string>();

  constructor(private readonly options: LocalSandboxOptions) {
    this.bwrapPath = options.bwrapPath ?? '/usr/bin/bwrap';
    this.nodeBinary = options.nodeBinary ?? process.execPath;
    this.gitBinary = options.gitBinary ?? '/usr/bin/git';
    this.users =
      process.getuid?.() === 0 ? new SandboxUsers(options.stateDir, options.uidBase ?? DEFAULT_UID_BASE) : null;
    this.cgroups = SandboxCgroups.find();
    const missing = (['pids', 'memory', 'cpu'] as const).filter(
      (controller) => !this.cgroups?.controllers.includes(controller),
    );
    if (!this.cgroups)
      options.log(
        'no cgroup to write on this machine: a sandbox is bounded per process only (rlimits: memory_mb, cpu_seconds, pids), not as a whole',
      );
    else
      options.log(
        `sandboxes' cgroups: ${this.cgroups.description}${missing.length > 0 ? `; no ${missing.join(' or ')} controller to write, so no such bound on a sandbox as a whole` : ''}`,
      );
  }

  private paths(spec: SandboxSpec): { src: string; git: string } {
    return { src: join(this.options.stateDir, spec.id, 'src'), git: join(this.options.stateDir, spec.id, 'git') };
  }

  async create(spec: SandboxSpec): Promise<void> {
    const { src, git } = this.paths(spec);
    mkdirSync(src, { recursive: true, mode: 0o700 });
    if (!existsSync(join(git, 'HEAD'))) {
      mkdirSync(git, { recursive: true, mode: 0o700 });
      const init = await this.git(spec, ['init', '--quiet', `--initial-branch=${SNAPSHOT_BRANCH}`, '--bare']);
      if (init.code !== 0) throw new SandboxStartError(`git init failed: ${init.stderr.trim()}`);
    }
    await writeHistoryInfo(git);
  }

  runner(spec: SandboxSpec): Promise<SandboxRunner> {
    let pending = this.running.get(spec.id);
    if (!pending) {
      pending = this.start(spec);
      this.running.set(spec.id, pending);
      pending.then(
        (runner) => void runner.ended.then(() => this.running.get(spec.id) === pending && this.running.delete(spec.id)),
        () => this.running.delete(spec.id),
      );
    }
    return pending;
  }

  private async start(spec: SandboxSpec): Promise<LocalRunner> {
    if (!existsSync(this.bwrapPath))
      throw new SandboxStartError(`bubblewrap (${this.bwrapPath}) is not installed: sandboxes need it`);
    if (!existsSync(this.options.runnerScript))
      throw new SandboxStartError(`the sandbox runner is not built (${this.options.runnerScript}): run npm run build`);
    const { src, git } = this.paths(spec);
    if (!existsSync(src)) await this.create(spec);
    // at every start, as the Kubernetes history runner at its every init: a history made before these files gets them too
    else await writeHistoryInfo(git);
    const child = this.spawnInside(spec, this.runnerArgs(), this.runnerCommand());
    const runner = new LocalRunner(
      child,
      (line) => this.options.log(`[sandbox ${spec.name}] ${line}`),
      this.options.defaultLimits,
      this.bound(spec),
      this.memoryBound(spec),
    );
    try {
      await runner.ready(START_TIMEOUT_MS);
    } catch (error) {
      await runner.stop();
      throw error;
    }
    this.options.log(`[sandbox ${spec.name}] started (pid ${child.pid}, bubblewrap, network ${spec.network})`);
    return runner;
  }

  /**
   * bubblewrap's arguments for the sandbox's namespaces and filesystem, up to
   * the program to run. Host directories are named as `door` gives them (see
   * HostDoor: a sandbox of a root control plane cannot reach them by path).
   */
  private sandboxArgs(spec: SandboxSpec, door: HostDoor): string[] {
    const network = spec.network === 'egress';
    const tmpfsMb = this.options.tmpfsMb ?? DEFAULT_TMPFS_MB;
    const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME, LANG: 'C.UTF-8' };
    // never uid 0 inside, and never the host's root outside (spawnInside)
    const args = isolationArgs({
      network,
      user: { id: SANDBOX_UID },
      env,
      tmpMb: tmpfsMb,
      proc: true,
      etc: ETC,
      accounts: true,
    });
    const nodeDir = dirname(this.nodeBinary);
    if (!nodeDir.startsWith('/usr/')) args.push('--ro-bind', door.path(nodeDir), nodeDir);
    // a host path, bound by bubblewrap here on the host: only the sandbox's own directory, never a path the agent named
    args.push(...tmpfsArgs(HOME, tmpfsMb), '--bind', door.path(this.paths(spec).src), SANDBOX_WORKDIR);
    args.push('--chdir', SANDBOX_WORKDIR);
    return args;
  }

  /**
   * A sandbox-side process of its own: /etc/passwd and /etc/group on fds 3
   * and 4, as bwrap was told. A root control plane starts it as the
   * sandbox's own host uid (SandboxUsers), in the sandbox's cgroups where
   * there are some: bwrap, and so everything in the sandbox, is never the
   * host's root. `extra`'s bind sources come through the door too.
   */
  private spawnInside(spec: SandboxSpec, extra: string[], program: string[]): ChildProcess {
    let door: HostDoor;
    try {
      door = new HostDoor({
        user: this.hostUser(spec),
        cgroupProcs: this.cgroups?.open(spec.id, this.cgroupLimits(spec)),
      });
      this.opened.add(spec.id);
    } catch (error) {
      throw new SandboxStartError(
        `the sandbox's host user or cgroup could not be set up: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    const bwrap = [this.bwrapPath, ...this.sandboxArgs(spec, door), ...throughDoor(extra, door), ...program];
    const command = door.command(bwrap);
    // a bwrap that keeps a network shares the wrapper's namespace, never the host's
    const [file, ...args] = bwrap.includes('--share-net') ? egressCommand(command, this.options.egress) : command;
    const child = spawn(file!, args, {
      env: { PATH: '/usr/bin:/bin' },
      stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
      detached: true,
    });
    // some programs look the user up (git, ssh, os.userInfo()): one that names the sandbox's home
    (child.stdio[3] as NodeJS.WritableStream).end(
      `sandbox:x:${SANDBOX_UID}:${SANDBOX_UID}:sandbox:${HOME}:/bin/bash\n`,
    );
    (child.stdio[4] as NodeJS.WritableStream).end(`sandbox:x:${SANDBOX_UID}:\n`);
    for (const stream of child.stdio) stream?.on('error', () => undefined);
    return child;
  }

  /**
   * The runner's own: its directory (the bundle alone), and what it needs to
   * give each command a pid and mount namespace of its own
   * (apps/sandbox-runner's ops/exec.ts, CALL_NAMESPACE): CAP_SYS_ADMIN and
   * CAP_SETPCAP in the sandbox's user namespace, which commands never have.
   */
  private runnerArgs(): string[] {
    return [
      '--ro-bind',
      dirname(this.options.runnerScript),
      RUNNER_DIR,
      '--cap-add',
      'CAP_SYS_ADMIN',
      '--cap-add',
      'CAP_SETPCAP',
      '--setenv',
      RUNNER_ISOLATE_ENV,
      '1',
    ];
  }

  /** the runner as the sandbox sees it, where runnerArgs binds it */
  private runnerCommand(): string[] {
    return [this.nodeBinary, join(RUNNER_DIR, basename(this.options.runnerScript))];
  }

  /** What the sandbox's processes may use together (see sandboxMemoryMb for its memory). */
  private cgroupLimits(spec: SandboxSpec): SandboxCgroupLimits {
    const pids = spec.limits.pids ?? this.options.defaultLimits?.pids;
    const memoryMb = this.sandboxMemoryMb(spec);
    return {
      pids: pids ? pids + PIDS_RESERVE : 'max',
      memoryBytes: memoryMb ? memoryMb * 1024 * 1024 : 'max',
      cpus: this.options.cpus ?? 'max',
    };
  }

  private sandboxMemoryMb(spec: SandboxSpec): number | undefined {
    const memoryMb = spec.limits.memoryMb ?? this.options.defaultLimits?.memoryMb;
    return memoryMb ? sandboxMemoryMb(memoryMb, this.options.tmpfsMb ?? DEFAULT_TMPFS_MB) : undefined;
  }

  /** how the sandbox's answers learn of its memory cgroup's kills; undefined where it has none */
  private memoryBound(spec: SandboxSpec): MemoryBound | undefined {
    const mb = this.sandboxMemoryMb(spec);
    const cgroups = this.cgroups;
    if (!mb || !cgroups?.controllers.includes('memory')) return undefined;
    return new MemoryBound(mb, () => cgroups.oomKills(spec.id));
  }

  /** the host user the sandbox runs as; undefined: the control plane's own (it is not root) */
  private hostUser(spec: SandboxSpec): HostUser | undefined {
    return this.users?.of(spec.id, this.paths(spec).src);
  }

  private bound(spec: SandboxSpec): SrcBound | undefined {
    if (this.options.srcMaxBytes === undefined) return undefined;
    let bound = this.bounds.get(spec.id);
    if (!bound) {
      const du = (args: string[]): Promise<GitResult> =>
        this.gitHelper().run({ file: '/usr/bin/du', args, cwd: '/', env: { PATH: '/usr/bin:/bin', LANG: 'C' } });
      bound = new SrcBound(this.paths(spec).src, this.options.srcMaxBytes, du, (line) =>
        this.options.log(`[sandbox ${spec.name}] ${line}`),
      );
      this.bounds.set(spec.id, bound);
    }
    return bound;
  }

  /** Unpacks an archive inside the sandbox, so no member's path or link can land outside /src. */
  async unpack(spec: SandboxSpec, archive: NodeJS.ReadableStream, options: { gzip: boolean }): Promise<void> {
    // --ignore-zeros: to the end of its input, as the runner's (an early exit at the end marker would break the pipe)
    const child = this.spawnInside(
      spec,
      [],
      [
        '/usr/bin/tar',
        options.gzip ? '-xzf' : '-xf',
        '-',
        '--ignore-zeros',
        '-C',
        SANDBOX_WORKDIR,
        '--no-same-owner',
        '--no-same-permissions',
        '--delay-directory-restore',
      ],
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number>((resolveCode) => child.on('close', (exit) => resolveCode(exit ?? 1)));
    const fed = await pipeline(archive, child.stdin!).then(
      () => undefined,
      (error: Error) => error,
    );
    // the archive failed while tar runs: tar must not take what came so far for the whole
    if (fed && child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    const code = await exited;
    if (code === 0 && !fed) return;
    // tar that stops reading breaks the pipe: what it said is the reason
    const said = stderr.trim().split('\n').slice(-2).join(' ');
    if (said || !fed)
      throw new SandboxSourceError(`the archive could not be unpacked: ${said || `tar exited with ${code}`}`);
    throw fed;
  }

  /** The file is bound read-only into the history's gits (gitCommand) while `use` runs. */
  async withFileForGit<T>(spec: SandboxSpec, file: string, use: (path: string) => Promise<T>): Promise<T> {
    this.lent.set(spec.id, file);
    try {
      return await use(LENT_FILE);
    } finally {
      this.lent.delete(spec.id);
    }
  }

  async git(spec: SandboxSpec, args: string[], input?: Buffer | NodeJS.ReadableStream): Promise<GitResult> {
    const stdin = Buffer.isBuffer(input) ? input : input ? await buffered(input as NodeJS.ReadableStream) : undefined;
    // a large input (a snapshot's files) or output goes to a git of its own: the shared helper takes one line per
    // request, and a line of hundreds of megabytes would end it, and every other sandbox's git with it
    if ((stdin && stdin.length > HELPER_MAX_INPUT_BYTES) || LARGE_OUTPUT.has(args[0] ?? ''))
      return this.gitDirect(spec, args, stdin ?? Buffer.alloc(0));
    const [file, ...command] = this.gitCommand(spec, args);
    return this.gitHelper().run({
      file: file!,
      args: command,
      cwd: '/',
      env: { PATH: '/usr/bin:/bin' },
      ...(stdin ? { stdin: stdin.toString('base64') } : {}),
    });
  }

  private gitDirect(spec: SandboxSpec, args: string[], stdin: Buffer): Promise<GitResult> {
    const child = this.spawnGit(spec, args);
    const stdout: Buffer[] = [];
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4000)));
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(stdin);
    return new Promise((resolveGit) => {
      child.on('error', (error) => resolveGit({ code: 127, stdout: Buffer.alloc(0), stderr: error.message }));
      child.on('close', (code) => resolveGit({ code: code ?? 1, stdout: Buffer.concat(stdout), stderr }));
    });
  }

  /** The helper that spawns git (apps/git-helper), started on first use and again if it died. */
  private gitHelper(): GitHelper {
    if (!this.helper?.alive)
      this.helper = new GitHelper(this.nodeBinary, this.options.gitHelperScript ?? compiledGitHelperPath());
    return this.helper;
  }

  /**
   * git over the sandbox's history, in a bubblewrap of its own: the history
   * (a bare repository, no work tree) is the one place it can write, and it
   * sees nothing else of the machine: not /src, not another sandbox, not the
   * control plane's data or environment, no network, no capability even
   * when the control plane is root. What it reads is ours (fast-import's
   * stream, checked path by path) or a bundle being imported (lent,
   * read-only); should either lead git astray, the sandbox's own history is
   * all it can reach.
   */
  private gitCommand(spec: SandboxSpec, args: string[]): string[] {
    const lent = this.lent.get(spec.id);
    return [
      this.bwrapPath,
      ...isolationArgs({ network: false, env: gitEnv(HISTORY_DIR), etc: [] }),
      ...['--bind', this.paths(spec).git, HISTORY_DIR, '--chdir', HISTORY_DIR],
      ...(lent ? ['--ro-bind', lent, LENT_FILE] : []),
      '--',
      this.gitBinary,
      ...historyGitArgs(args),
    ];
  }

  /** As the Kubernetes driver's: a git that fails ends the stream with an error (its stderr) rather than a short output that looks whole. */
  gitStream(spec: SandboxSpec, args: string[]): NodeJS.ReadableStream {
    const child = this.spawnGit(spec, args);
    child.stdin!.end();
    const out = new PassThrough();
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4000)));
    child.stdout!.pipe(out, { end: false });
    child.on('error', (error) => out.destroy(error));
    child.on('close', (code) => {
      if (out.destroyed) return;
      if (code === 0) out.end();
      else out.destroy(new Error(`git ${args[0] ?? ''} exited with code ${code}: ${stderr.trim()}`));
    });
    // a reader that gives up stops git
    out.once('close', () => child.exitCode === null && child.kill('SIGKILL'));
    return out;
  }

  /** git straight from this process: for a bundle's stream, too large to pass through the helper's lines */
  private spawnGit(spec: SandboxSpec, args: string[]): ChildProcess {
    const [file, ...command] = this.gitCommand(spec, args);
    return spawn(file!, command, { cwd: '/', env: { PATH: '/usr/bin:/bin' }, stdio: ['pipe', 'pipe', 'pipe'] });
  }

  async stop(spec: SandboxSpec): Promise<void> {
    const pending = this.running.get(spec.id);
    this.running.delete(spec.id);
    if (pending) await (await pending.catch(() => null))?.stop();
    // an idle sandbox keeps no empty cgroup; one still in use (an unpack) keeps it
    this.cgroups?.release(spec.id);
  }

  async remove(spec: SandboxSpec): Promise<void> {
    await this.stop(spec);
    // and whatever else of the sandbox runs (an unpack, anything that left the runner's namespace)
    if (this.cgroups) await this.cgroups.end(spec.id);
    const uid = this.users?.owner(this.paths(spec).src);
    if (uid !== undefined) await endProcessesOfUser(uid);
    this.bounds.delete(spec.id);
    this.opened.delete(spec.id);
    rmSync(join(this.options.stateDir, spec.id), { recursive: true, force: true });
  }

  async close(): Promise<void> {
    this.helper?.close();
    const all = [...this.running.entries()];
    this.running.clear();
    await Promise.all(all.map(async ([, pending]) => (await pending.catch(() => null))?.stop()));
    // every empty one, a sandbox's that only unpacked included: nothing of ours starts now
    for (const id of this.opened) this.cgroups?.release(id);
    this.opened.clear();
  }
}

export const SNAPSHOT_BRANCH = 'aileron/snapshots';

/** bwrap arguments with their bind sources named as the door gives them */
function throughDoor(args: string[], door: HostDoor): string[] {
  return args.map((arg, at) =>
    at > 0 &&
    /^--(ro-|dev-)?bind(-try)?$/.test(args[at - 1]!) &&
    (at < 2 || !/^--(ro-|dev-)?bind(-try)?$/.test(args[at - 2]!))
      ? door.path(arg)
      : arg,
  );
}

async function buffered(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** The git helper process and its answers, by request id. */
class GitHelper {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, (result: GitResult) => void>();
  private nextId = 0;
  alive = true;

  constructor(node: string, script: string) {
    this.child = spawn(node, ['--max-old-space-size=64', script], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { PATH: '/usr/bin:/bin' },
    });
    this.child.stdin!.on('error', () => undefined);
    readMessages<GitHelperAnswer>(
      this.child.stdout!,
      (answer) => {
        this.pending.get(answer.id)?.({
          code: answer.code,
          stdout: Buffer.from(answer.stdout, 'base64'),
          stderr: answer.stderr,
        });
        this.pending.delete(answer.id);
      },
      // its waiters learn it stopped when it exits
      () => this.child.kill('SIGKILL'),
    );
    this.child.on('exit', () => {
      this.alive = false;
      for (const settle of this.pending.values())
        settle({ code: 127, stdout: Buffer.alloc(0), stderr: 'the git helper stopped' });
      this.pending.clear();
    });
    this.child.on('error', () => undefined);
  }

  run(request: Omit<GitHelperRequest, 'id'>): Promise<GitResult> {
    const id = this.nextId++;
    return new Promise((resolveRun) => {
      this.pending.set(id, resolveRun);
      this.child.stdin!.write(`${JSON.stringify({ id, ...request })}\n`);
    });
  }

  close(): void {
    this.child.stdin!.end();
  }
}

class LocalRunner implements SandboxRunner {
  readonly ended: Promise<void>;
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  private nextId = 0;
  private gone: string | null = null;
  /** why the control plane ended the runner itself, said to its waiters instead of the signal */
  private endedBy: string | null = null;
  private stderr = '';

  /** the memory cgroup's kills the answers have told of (see MemoryBound) */
  private oomMark: number;

  constructor(
    private readonly child: ChildProcess,
    log: (line: string) => void,
    private readonly defaultLimits?: RunnerLimits,
    private readonly bound?: SrcBound,
    private readonly memory?: MemoryBound,
  ) {
    this.oomMark = memory?.mark() ?? 0;
    for (const stream of child.stdio) stream?.on('error', () => undefined);
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString('utf8')).slice(-4000);
    });
    readMessages<RunnerAnswer>(
      child.stdout!,
      (answer) => this.receive(answer),
      (reason) => {
        log(`runner ended: ${reason}`);
        this.endedBy = reason;
        this.kill();
      },
    );
    this.ended = new Promise((resolveEnded) => {
      child.once('exit', (code, signal) => {
        // the runner, killed by the kernel for the sandbox's memory (bwrap hands its SIGKILL on as 137)
        const outOfMemory =
          !this.endedBy && (signal === 'SIGKILL' || code === 137) && this.memory?.killedSince(this.oomMark);
        this.gone =
          this.endedBy ??
          (outOfMemory
            ? `${this.memory!.reason()}; the next call starts it again`
            : signal
              ? `killed by ${signal}`
              : `exited with code ${code}`);
        if (outOfMemory) log(`runner ended: ${this.gone}`);
        else if (code !== 0 && this.stderr.trim())
          log(`runner ${this.gone}: ${this.stderr.trim().split('\n').slice(-3).join(' | ')}`);
        for (const waiter of this.pending.values())
          waiter.reject(new RunnerError({ code: 'SANDBOX_STOPPED', message: `the sandbox stopped (${this.gone})` }));
        this.pending.clear();
        resolveEnded();
      });
      child.once('error', (error) => {
        this.gone = error.message;
        resolveEnded();
      });
    });
  }

  async ready(timeoutMs: number): Promise<void> {
    const timer = new Promise<never>((_, reject) =>
      setTimeout(
        () => reject(new SandboxStartError(`the sandbox did not start within ${timeoutMs} ms`)),
        timeoutMs,
      ).unref(),
    );
    try {
      await Promise.race([this.call({ op: 'ping' }), timer]);
    } catch (error) {
      if (error instanceof RunnerError)
        throw new SandboxStartError(`the sandbox did not start: ${this.stderr.trim() || error.message}`);
      throw error;
    }
  }

  call<O extends RunnerOp>(request: Extract<RunnerRequest, { op: O }>): Promise<RunnerResult<O>> {
    if (this.gone)
      return Promise.reject(
        new RunnerError({ code: 'SANDBOX_STOPPED', message: `the sandbox stopped (${this.gone})` }),
      );
    request = withDefaultLimits(request, this.defaultLimits);
    const bound = request.op === 'write' || request.op === 'exec' ? this.bound : undefined;
    let sent = request;
    try {
      if (bound) sent = bound.apply(request);
    } catch (error) {
      return Promise.reject(error as Error);
    }
    const memory = request.op === 'exec' ? this.memory : undefined;
    const mark = memory?.mark() ?? 0;
    const answered = this.send(sent);
    if (bound) void answered.finally(() => bound.changed()).catch(() => undefined);
    if (request.op !== 'exec') return answered;
    return answered.then((result) => {
      const ran = result as RunnerResult<'exec'>;
      const note = (bound?.note() ?? '') + (memory?.note(mark) ?? '');
      if (memory) this.oomMark = Math.max(this.oomMark, memory.mark());
      return (note ? { ...ran, stderr: ran.stderr + note } : ran) as RunnerResult<O>;
    });
  }

  private send<O extends RunnerOp>(request: Extract<RunnerRequest, { op: O }>): Promise<RunnerResult<O>> {
    const id = this.nextId++;
    return new Promise<RunnerResult<O>>((resolveCall, reject) => {
      this.pending.set(id, { resolve: resolveCall as (value: unknown) => void, reject });
      this.child.stdin!.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  private receive(answer: RunnerAnswer): void {
    const waiter = this.pending.get(answer.id);
    if (!waiter) return;
    this.pending.delete(answer.id);
    if ('error' in answer) waiter.reject(new RunnerError(answer.error));
    else waiter.resolve(answer.result);
  }

  async stop(): Promise<void> {
    if (this.gone) return;
    // the runner exits when its stdin closes; bwrap then tears the namespace down, killing what is left
    this.child.stdin!.end();
    const timer = setTimeout(() => this.kill(), 3000);
    await this.ended;
    clearTimeout(timer);
  }

  /** bwrap and everything in the sandbox: they form the runner's process group */
  private kill(): void {
    try {
      process.kill(-this.child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }
}
