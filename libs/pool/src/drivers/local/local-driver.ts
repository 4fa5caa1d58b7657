import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { DirectoryUsers, FIRST_FD_PAST_DOOR, HostDoor, type HostUser, isolationArgs } from '@aileron/bubblewrap';
import { forbiddenVariables } from '@aileron/catalog';
import { procStat, processStartTime } from '../../process-start';
import {
  InstanceStartError,
  type InProcessEndpoint,
  type InstanceDriver,
  type InstanceExit,
  type InstanceSpec,
  type RunningInstance,
} from '../driver';
import { SessionSockets } from './session-sockets';

const SANDBOX_HOME = '/home/mcp';
/** where the sandbox sees its instance's session socket (read-only: it can connect, never replace it) */
const SANDBOX_RUN = '/run/aileron';
const SESSIONS_SOCKET = 'sessions.sock';
const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
const STOP_GRACE_MS = 3000;
const HEALTH_TIMEOUT_MS = 2000;
const REAP_TIMEOUT_MS = 2000;
/** just past the sandboxes' range (AILERON_SANDBOX_UID_BASE's default and its 65536 uids): the two never share a uid */
export const DEFAULT_POOL_UID_BASE = 1_879_113_728;

function sandboxInitOf(bwrapPid: number): { pid: number; start: string } | undefined {
  try {
    const pid = Number(readFileSync(`/proc/${bwrapPid}/task/${bwrapPid}/children`, 'utf8').split(' ')[0]);
    const start = pid > 0 ? processStartTime(pid) : undefined;
    return start ? { pid, start } : undefined;
  } catch {
    return undefined;
  }
}

/** Running (not zombie) processes of a process group: zombies wait for whoever reaps orphans, but run nothing. */
function processesInGroup(pgid: number): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const [state, , group] = procStat(entry);
      if (Number(group) === pgid && state !== 'Z' && state !== 'X') count++;
    } catch {
      // gone meanwhile
    }
  }
  return count;
}

/** Every instance home under the state directory (`<workspace>/<server>/home`): the owners of those are the uids taken. */
function homesUnder(stateDir: string): string[] {
  const list = (dir: string) =>
    readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(dir, entry.name));
  return list(stateDir).flatMap((workspace) => list(workspace).map((server) => join(server, 'home')));
}

/** The paths not inside another of them, in their order: what binds all of them once. */
function outermost(paths: string[]): string[] {
  const unique = [...new Set(paths)];
  return unique.filter(
    (path) => !unique.some((other) => other !== path && (path.startsWith(`${other}/`) || other === '/')),
  );
}

export interface LocalDriverOptions {
  /** per-instance homes live under `<stateDir>/<workspaceId>/<server>/home`; must not be inside anything the sandbox can see */
  stateDir: string;
  sandbox: 'bubblewrap' | 'none';
  /** default /usr/bin/bwrap */
  bwrapPath?: string;
  /** absolute path of the compiled bridge program (`dist/apps/mcp-bridge/src/main.js`) */
  bridgeScript: string;
  /** default process.execPath; also what a spec's command `node` runs, since the sandbox's PATH is fixed */
  nodeBinary?: string;
  /**
   * Host paths the sandbox may read at the same path: the node_modules the
   * bridge and the servers load from, the compiled code. Never the project
   * root, which holds the control plane's data dir.
   */
  readOnlyPaths?: string[];
  /** default 20000 */
  startTimeoutMs?: number;
  /** one line per call: the instances' stderr (scrubbed) and the driver's own events */
  log: (line: string) => void;
  /** a root control plane runs each (workspace, server) under bubblewrap as a host uid of its own, from this one up (HOST_UID_COUNT of them) */
  uidBase?: number;
}

/**
 * Runs stdio MCP servers as local processes, under bubblewrap unless told
 * otherwise. The bridge program runs in the sandbox as its session spawner:
 * each MCP session's child is started there, on a connection to the
 * instance's socket of ours, and the control plane speaks stdio to it
 * directly (session-sockets.ts).
 */
export class LocalDriver implements InstanceDriver {
  readonly kind = 'local' as const;
  private readonly running = new Set<LocalInstance>();
  private readonly nodeBinary: string;
  private readonly bridgeScript: string;
  private readonly readOnlyPaths: string[];
  private readonly startTimeoutMs: number;
  private readonly bwrapPath: string;
  /** null unless the control plane is root and instances run under bubblewrap: then none runs as it */
  private readonly users: DirectoryUsers | null;

  constructor(private readonly options: LocalDriverOptions) {
    for (const path of [options.stateDir, options.bridgeScript, ...(options.readOnlyPaths ?? [])]) {
      if (!isAbsolute(path)) throw new Error(`LocalDriver: ${path} must be an absolute path`);
    }
    this.nodeBinary = realpathSync(options.nodeBinary ?? process.execPath);
    this.bridgeScript = realpathSync(options.bridgeScript);
    this.readOnlyPaths = (options.readOnlyPaths ?? []).map((path) => resolve(path));
    this.startTimeoutMs = options.startTimeoutMs ?? 20_000;
    this.bwrapPath = options.bwrapPath ?? '/usr/bin/bwrap';
    this.users =
      options.sandbox === 'bubblewrap' && process.getuid?.() === 0
        ? new DirectoryUsers({
            base: options.uidBase ?? DEFAULT_POOL_UID_BASE,
            what: 'pool instance',
            directories: () => homesUnder(options.stateDir),
          })
        : null;
  }

  async start(spec: InstanceSpec): Promise<RunningInstance<InProcessEndpoint>> {
    if (spec.run.kind !== 'command') throw new InstanceStartError('images need the kubernetes pool driver');
    const sandboxed = this.options.sandbox === 'bubblewrap';
    if (sandboxed && !existsSync(this.bwrapPath)) {
      throw new InstanceStartError(
        `bubblewrap (${this.bwrapPath}) is not installed: install it, or set AILERON_POOL_SANDBOX=none on a machine that serves a single tenant`,
      );
    }
    for (const segment of [spec.workspaceId, spec.server, spec.id]) {
      // These become directory names; anything else could climb out of stateDir.
      if (!/^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(segment))
        throw new InstanceStartError(`cannot run an instance named ${JSON.stringify(segment)} locally`);
    }
    const serverDir = join(this.options.stateDir, spec.workspaceId, spec.server);
    const home = join(serverDir, 'home');
    mkdirSync(home, { recursive: true, mode: 0o700 });
    chmodSync(this.options.stateDir, 0o700);
    chmodSync(home, 0o700);
    // Without bubblewrap there is no private /tmp: a directory per start stands in for it.
    const tmp = sandboxed ? undefined : join(serverDir, `tmp-${spec.id}`);
    if (tmp) mkdirSync(tmp, { mode: 0o700 });

    // Entries stored before such names were refused must not start either.
    const forbidden = forbiddenVariables(spec.env);
    if (forbidden.length > 0) throw new InstanceStartError(forbidden.map((f) => f.reason).join('; '));

    // bwrap (and without a sandbox the bridge) starts on the host: it gets a fixed
    // environment of ours, never the entry's, whose LD_PRELOAD would run on the host.
    // The entry's variables reach the bridge on a pipe, and from it only the servers
    // inside; a command line would be world-readable in /proc.
    const own = { PATH: SANDBOX_PATH, HOME: sandboxed ? SANDBOX_HOME : home, TMPDIR: tmp ?? '/tmp' };
    const handed = JSON.stringify({ env: spec.env });
    // under bubblewrap 3 and 4 are /etc/passwd and /etc/group, and a HostDoor takes 5–9 while it opens
    const envFd = sandboxed ? FIRST_FD_PAST_DOOR : 3;
    const command = spec.run.command === 'node' ? this.nodeBinary : spec.run.command;
    // the sessions' socket: in a directory of the start's own, the instance's user's, bound read-only into the sandbox
    const run = join(serverDir, `run-${spec.id}`);
    const socketPath = join(run, SESSIONS_SOCKET);
    const bridge = [
      this.nodeBinary,
      this.bridgeScript,
      '--env-fd',
      String(envFd),
      '--sessions-socket',
      sandboxed ? `${SANDBOX_RUN}/${SESSIONS_SOCKET}` : socketPath,
      '--',
      command,
      ...spec.run.args,
    ];
    const removeDirs = () => {
      rmSync(run, { recursive: true, force: true });
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    };

    let user: HostUser | undefined;
    let launch: string[] | undefined;
    let sockets: SessionSockets;
    try {
      // the home, and what the instance wrote there, is its uid's; everything else it sees stays root's
      user = sandboxed ? this.users?.of(`${spec.workspaceId}/${spec.server}`, home) : undefined;
      mkdirSync(run, { mode: 0o700 });
      if (user) chownSync(run, user.uid, user.gid);
      sockets = await SessionSockets.listen(socketPath, user);
      if (sandboxed) launch = this.sandboxCommand(home, run, own, user, bridge);
    } catch (error) {
      removeDirs();
      throw new InstanceStartError(
        `the instance's host user and directories could not be set up: ${error instanceof Error ? error.message : String(error)}`,
      );
    }

    let child: ChildProcess;
    try {
      // detached: the instance is its own process group, so nothing it forks outlives it.
      // cwd /: a bwrap of another uid may not reach the control plane's working directory
      child = launch
        ? spawn(launch[0]!, launch.slice(1), {
            env: { PATH: SANDBOX_PATH },
            cwd: '/',
            stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe', ...Array<'ignore'>(envFd - 5).fill('ignore'), 'pipe'],
            detached: true,
          })
        : spawn(bridge[0]!, bridge.slice(1), {
            env: own,
            cwd: home,
            stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
            detached: true,
          });
    } catch (error) {
      sockets.close();
      removeDirs();
      throw new InstanceStartError(
        `could not start the instance: ${(error as NodeJS.ErrnoException).code ?? 'spawn failed'}`,
      );
    }
    (child.stdio as unknown as NodeJS.WritableStream[])[envFd]!.end(handed);
    if (sandboxed) {
      // Some programs look the user up (os.userInfo(), getpass); give them one that names the sandbox home.
      // bwrap maps the uid it runs as to itself: the one the server sees inside.
      const uid = user?.uid ?? process.getuid?.() ?? 0;
      const gid = user?.gid ?? process.getgid?.() ?? 0;
      (child.stdio[3] as NodeJS.WritableStream).end(`mcp:x:${uid}:${gid}:mcp:${SANDBOX_HOME}:/usr/sbin/nologin\n`);
      (child.stdio[4] as NodeJS.WritableStream).end(`mcp:x:${gid}:\n`);
    }

    const instance = new LocalInstance(spec, child, sockets, sandboxed, this.startTimeoutMs, this.options.log, () => {
      this.running.delete(instance);
      sockets.close();
      removeDirs();
    });
    this.running.add(instance);
    try {
      await instance.ready(this.startTimeoutMs);
    } catch (error) {
      await instance.stop();
      throw error;
    }
    this.options.log(
      `[${spec.id}] started (pid ${instance.pid}, ${sandboxed ? `bubblewrap${user ? `, host uid ${user.uid}` : ''}` : 'no sandbox'}), sessions on ${socketPath}`,
    );
    return instance;
  }

  async close(): Promise<void> {
    await Promise.all([...this.running].map((instance) => instance.stop()));
  }

  /**
   * The command that starts the instance's bwrap. A root control plane starts
   * it as the (workspace, server)'s own host uid through a HostDoor: bwrap, and
   * so everything in the sandbox, is never the host's root, and the directories
   * it binds that root-only parents hide (the data directory, a checkout under
   * /root) come through the door. unshare, the door's shell, setpriv and env
   * each exec the next: the spawned pid ends up bwrap's own, whose child is
   * the sandbox's init that LocalInstance waits for.
   */
  private sandboxCommand(
    home: string,
    run: string,
    env: Record<string, string>,
    user: HostUser | undefined,
    bridge: string[],
  ): string[] {
    const door = new HostDoor({ user });
    const bwrap = [this.bwrapPath, ...this.bwrapArgs(home, run, env, door), ...bridge];
    // the door's shell exports its PWD: bwrap on the host keeps the environment of ours alone
    return door.command(user ? ['/usr/bin/env', '-u', 'PWD', ...bwrap] : bwrap);
  }

  private bwrapArgs(home: string, run: string, env: Record<string, string>, door: HostDoor): string[] {
    // only our own, non-secret variables are named in env; the entry's come on the bridge's pipe
    const args = isolationArgs({ network: true, user: {}, env, proc: true, accounts: true });
    const nodeDir = dirname(this.nodeBinary);
    const shared = [
      ...(nodeDir.startsWith('/usr/') ? [] : [nodeDir]),
      ...this.readOnlyPaths,
      dirname(this.bridgeScript),
    ];
    // one bind (and one door) for a path another one already holds: the door has few places
    for (const path of outermost(shared)) args.push('--ro-bind', door.path(path), path);
    args.push('--bind', door.path(home), SANDBOX_HOME, '--chdir', SANDBOX_HOME);
    args.push('--ro-bind', door.path(run), SANDBOX_RUN);
    return args;
  }
}

class LocalInstance implements RunningInstance<InProcessEndpoint> {
  readonly id: string;
  readonly pid: number | undefined;
  readonly exited: Promise<InstanceExit>;
  /** each upstream session's transport becomes the stdio of a child of its own */
  readonly endpoint: InProcessEndpoint = {
    attach: async (transport) => {
      if (this.gone) throw new Error('the server instance stopped');
      this.sockets.attach(
        transport,
        { open: (tag) => this.command({ open: tag }), close: (tag) => this.command({ close: tag }) },
        this.startTimeoutMs,
      );
    },
  };
  private stopRequested = false;
  /** the spawner said it is ready: `ready()` resolves, sessions may be asked for */
  private isReady = false;
  private onReady: (() => void) | undefined;
  /** pings sent (`healthy`) and waiting for their pong */
  private readonly pongs = new Map<number, () => void>();
  private pings = 0;
  private stopping: Promise<void> | undefined;
  private gone = false;
  /** the sandbox's init (bwrap's child), identified by pid and start time so a reused pid is not mistaken for it */
  private sandboxInit: { pid: number; start: string } | undefined;

  constructor(
    spec: InstanceSpec,
    private readonly child: ChildProcess,
    private readonly sockets: SessionSockets,
    private readonly sandboxed: boolean,
    private readonly startTimeoutMs: number,
    log: (line: string) => void,
    cleanup: () => void,
  ) {
    this.id = spec.id;
    this.pid = child.pid;
    // Longest first, so a secret that contains another is not half-replaced.
    const secrets = spec.secrets.filter((secret) => secret.length > 0).sort((a, b) => b.length - a.length);
    const scrub = (line: string) => secrets.reduce((text, secret) => text.split(secret).join('[redacted]'), line);
    createInterface({ input: child.stderr!, crlfDelay: Infinity }).on('line', (line) =>
      log(`[${spec.id}] ${scrub(line)}`),
    );

    for (const stream of child.stdio) stream?.on('error', () => {}); // EPIPE/ECONNRESET once the other end is gone; the exit says why
    createInterface({ input: child.stdout!, crlfDelay: Infinity }).on('line', (line) => this.heard(line));

    this.exited = new Promise<InstanceExit>((resolveExit) => {
      const finish = async (reason: string) => {
        if (this.gone) return;
        this.gone = true;
        await this.reapLeftovers();
        cleanup();
        log(`[${spec.id}] ${reason}${this.stopRequested ? ' (stopped)' : ''}`);
        resolveExit({ reason, requested: this.stopRequested });
      };
      child.once('exit', (code, signal) => void finish(signal ? `killed by ${signal}` : `exited with code ${code}`));
      child.once(
        'error',
        (error: NodeJS.ErrnoException) => void finish(`could not be started (${error.code ?? 'spawn failed'})`),
      );
    });
  }

  /**
   * "Exited" must mean nothing of the instance still runs. Without a sandbox the
   * instance is its own process group: kill what is left of it. Under bubblewrap
   * the outer bwrap reports the exit while the sandbox's init is still tearing
   * the namespace down (killing every process in it): wait for that init.
   */
  private async reapLeftovers(): Promise<void> {
    const pgid = this.child.pid;
    if (pgid) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // the group is already empty
      }
    }
    const groupAlive = () => pgid !== undefined && processesInGroup(pgid) > 0;
    const initAlive = () =>
      this.sandboxInit !== undefined && processStartTime(this.sandboxInit.pid) === this.sandboxInit.start;
    for (
      const deadline = performance.now() + REAP_TIMEOUT_MS;
      (groupAlive() || initAlive()) && performance.now() < deadline;
    ) {
      await new Promise((wake) => setTimeout(wake, 5));
    }
  }

  /** A line of the spawner's: its readiness, a session's end, an answer to a ping. */
  private heard(line: string): void {
    let said: { ready?: { sessions?: unknown }; ended?: { tag?: unknown; why?: unknown }; pong?: unknown };
    try {
      said = JSON.parse(line) as typeof said;
    } catch {
      return;
    }
    if (typeof said.ready?.sessions === 'string') {
      if (this.sandboxed && this.child.pid) this.sandboxInit = sandboxInitOf(this.child.pid);
      this.isReady = true;
      this.onReady?.();
    } else if (typeof said.ended?.tag === 'string' && typeof said.ended.why === 'string') {
      this.sockets.ended(said.ended.tag, said.ended.why);
    } else if (typeof said.pong === 'number') {
      this.pongs.get(said.pong)?.();
    }
  }

  /** One command to the spawner, on its stdin. */
  private command(command: object): void {
    if (!this.gone && this.child.stdin!.writable) this.child.stdin!.write(`${JSON.stringify(command)}\n`);
  }

  /** Resolves on the spawner's `{"ready":…}` line; rejects with InstanceStartError otherwise. */
  ready(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolveReady, reject) => {
      const timer = setTimeout(() => {
        settle(new InstanceStartError(`the instance did not become ready within ${timeoutMs} ms`));
        this.kill();
      }, timeoutMs);
      const settle = (error?: Error) => {
        clearTimeout(timer);
        this.onReady = undefined;
        if (error) reject(error);
        else resolveReady();
      };
      if (this.isReady) return settle();
      this.onReady = () => settle();
      void this.exited.then((exit) =>
        settle(new InstanceStartError(`the instance ended before it was ready: ${exit.reason}`)),
      );
    });
  }

  /** The spawner answers a ping: its event loop turns, it can start sessions. */
  async healthy(): Promise<boolean> {
    if (this.gone || !this.isReady) return false;
    const ping = ++this.pings;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => answer(false), HEALTH_TIMEOUT_MS);
      const answer = (ok: boolean) => {
        clearTimeout(timer);
        this.pongs.delete(ping);
        resolve(ok);
      };
      this.pongs.set(ping, () => answer(true));
      this.command({ ping });
    });
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.gone) return;
      this.stopRequested = true;
      // Closing stdin is the spawner's signal to stop its servers and exit; a SIGTERM to
      // bwrap would not be forwarded, it would only tear the sandbox down unannounced.
      this.child.stdin!.end();
      const timer = setTimeout(() => this.kill(), STOP_GRACE_MS);
      await this.exited;
      clearTimeout(timer);
    })();
    return this.stopping;
  }

  private kill(): void {
    try {
      this.child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}
