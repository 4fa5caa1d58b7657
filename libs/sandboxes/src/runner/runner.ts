/**
 * The sandbox's runner: started by the driver inside the sandbox (bubblewrap
 * locally, the pod's container on Kubernetes), it carries out the control
 * plane's requests there, so every path resolves in the sandbox's own
 * filesystem and every command runs in its namespaces. It is bundled into
 * one file (scripts/build-bundles.mjs): nothing else of ours is mounted.
 *
 * Protocol (protocol.ts): one JSON request per line on stdin, one answer per
 * line on stdout (its long strings after it, raw). Requests run concurrently;
 * the control plane serialises the ones that change files.
 *
 * With `--listen [host:]port` (a pod's containers, which the control plane
 * reaches over the network) it speaks the same lines over TCP instead, to
 * each connection that first sends the bearer token in AILERON_RUNNER_TOKEN.
 * `--role history` makes it the runner of the container that holds the
 * sandbox's git history: it answers `git`, `receive` and `ping`, nothing else.
 */
import { spawn } from 'node:child_process';
import { createHash, timingSafeEqual } from 'node:crypto';
import { constants, createWriteStream, promises as fs } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { constants as osConstants, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { Failure } from './failure';
import { GIT_SAFETY, gitEnv } from './git-safety';
import { BINARY_FIELDS, HISTORY_ATTRIBUTES } from './protocol';
import type { RawFields, RunnerAnswer, RunnerChunk, RunnerFailure, RunnerInput, RunnerLimits, RunnerRequest, RunnerResults, RunnerRole } from './protocol';
import { TreeScanner } from './scan';

// SIGUSR1 opens Node's inspector by default, and a debugger in the runner would answer the control plane's requests as it likes; Node 20 has no --disable-sigusr1
process.on('SIGUSR1', () => undefined);

const WORKDIR = '/src';
/** a file `read` or `patch` handles at most (text) */
const MAX_TEXT_BYTES = 32 * 1024 * 1024;
const MAX_OUTPUT_BYTES = 1024 * 1024;
const MAX_ENTRIES = 10_000;
const MAX_MATCHES = 1_000;
/** `walk` (the glob tool) answers at most this many files, and this many bytes of their paths: its answer is one line the control plane parses */
const MAX_WALK_FILES = 50_000;
const MAX_WALK_BYTES = 4 * 1024 * 1024;
const GREP_TIMEOUT_MS = 30_000;
const COMMAND_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';
/** the history role's git directory (a volume the sandbox's own container never mounts) */
const HISTORY = '/history';
const GIT = '/usr/bin/git';
/** a result's strings this long or longer, and its Buffers, follow its line as raw bytes (protocol.ts RawFields) */
const RAW_MIN_CHARS = 4096;
/** listen mode: how long a connection may take to present its token, and how long that line may be */
const AUTH_TIMEOUT_MS = 10_000;
const MAX_TOKEN_LINE = 1024;

function inSandbox(path: string): string {
  return resolve(WORKDIR, path);
}

function failureOf(error: unknown, path?: string): RunnerFailure {
  if (error instanceof Failure) return { code: error.code, message: error.message };
  const code = (error as NodeJS.ErrnoException).code ?? 'FAILED';
  const where = path ? `${path}: ` : '';
  const known: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EISDIR: 'is a directory',
    ENOTDIR: 'not a directory',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EROFS: 'read-only file system (only /src, /tmp and the home directory are writable)',
    ENOSPC: 'no space left on device',
    ELOOP: 'too many levels of symbolic links',
  };
  return { code, message: `${where}${known[code] ?? (error instanceof Error ? error.message : String(error))}` };
}

/** a text file's bytes (not decoded: a whole-file read sends them as they are) */
async function readTextBytes(path: string): Promise<Buffer> {
  const stat = await fs.stat(path);
  if (stat.isDirectory()) throw new Failure('EISDIR', `${path}: is a directory`);
  if (stat.size > MAX_TEXT_BYTES) throw new Failure('TOO_LARGE', `${path}: ${stat.size} bytes, more than the ${MAX_TEXT_BYTES} a text tool reads`);
  const buffer = await fs.readFile(path);
  if (buffer.includes(0)) throw new Failure('NOT_TEXT', `${path}: a binary file`);
  return buffer;
}

async function readText(path: string): Promise<string> {
  return (await readTextBytes(path)).toString('utf8');
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

const NEWLINE = 0x0a;

/** what splitLines(bytes.toString()).length would be */
function countLines(bytes: Buffer): number {
  let count = 0;
  for (let at = bytes.indexOf(NEWLINE); at !== -1; at = bytes.indexOf(NEWLINE, at + 1)) count++;
  return bytes.length === 0 || bytes[bytes.length - 1] === NEWLINE ? count : count + 1;
}

async function walk(root: string, recursive: boolean, visit: (path: string, type: 'file' | 'dir' | 'symlink' | 'other', size: number) => boolean): Promise<boolean> {
  // breadth-first, never following symlinks: a link to / would otherwise list the whole root
  const queue = [root];
  while (queue.length > 0) {
    const dir = queue.shift()!;
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (dir === root) throw error;
      continue;
    }
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      const path = join(dir, entry.name);
      const type = entry.isSymbolicLink() ? 'symlink' : entry.isDirectory() ? 'dir' : entry.isFile() ? 'file' : 'other';
      const size = type === 'file' ? (await fs.lstat(path).catch(() => ({ size: 0 }))).size : 0;
      if (!visit(path, type, size)) return true;
      if (recursive && type === 'dir') queue.push(path);
    }
  }
  return false;
}

/** Collects a stream up to the cap; what is cut is counted, not kept. */
function collector(): { push(chunk: Buffer): void; text(): string; truncated(): boolean } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let cut = false;
  return {
    push(chunk) {
      if (kept >= MAX_OUTPUT_BYTES) {
        cut = true;
        return;
      }
      const room = MAX_OUTPUT_BYTES - kept;
      chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
      kept += Math.min(chunk.length, room);
      if (chunk.length > room) cut = true;
    },
    text: () => Buffer.concat(chunks).toString('utf8'),
    truncated: () => cut,
  };
}

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
const ISOLATED = process.env.AILERON_RUNNER_ISOLATE === '1';
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

async function exec(request: Extract<RunnerRequest, { op: 'exec' }>): Promise<RunnerResults['exec']> {
  const cwd = inSandbox(request.workdir);
  const stat = await fs.stat(cwd).catch(() => null);
  if (!stat?.isDirectory()) throw new Failure('WORKDIR_INVALID', `workdir ${request.workdir}: not a directory in the sandbox`);
  const limits = limitArgs(request.limits);
  const shell = ['/bin/bash', '--noprofile', '--norc', '-c', request.command];
  const argv = [...(ISOLATED ? CALL_NAMESPACE : []), ...(limits.length > 0 ? ['/usr/bin/prlimit', ...limits, '--'] : []), ...shell];
  return new Promise((resolveExec) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd,
      env: { PATH: COMMAND_PATH, HOME: process.env.HOME ?? '/home/sandbox', TMPDIR: '/tmp', LANG: 'C.UTF-8', TERM: 'dumb' },
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
      const exitCode = code ?? (signal ? 128 + (osConstants.signals[signal] ?? 9) : 1);
      let note = timedOut ? `\n[aileron] the command ran longer than ${request.timeoutMs / 1000} s and was killed with everything it started\n` : '';
      if (heldOpen && !timedOut) note += '\n[aileron] a process the command left running kept its output open; the answer did not wait for it\n';
      resolveExec({ stdout: stdout.text(), stderr: stderr.text() + note, exitCode: timedOut ? 124 : exitCode, timedOut, truncated: stdout.truncated() || stderr.truncated() });
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
      resolveExec({ stdout: '', stderr: `could not start bash: ${error.message}\n`, exitCode: 127, timedOut: false, truncated: false });
    });
    child.on('exit', (code, signal) => bound(code, signal));
    child.on('close', (code, signal) => answer(code, signal));
  });
}

async function grep(request: Extract<RunnerRequest, { op: 'grep' }>): Promise<RunnerResults['grep']> {
  const root = inSandbox(request.path);
  await fs.stat(root);
  // GNU grep: a DFA matcher, so an agent's pattern cannot stall the runner
  const args = ['-rnIE', '--color=never', '--no-messages', ...(request.include ? [`--include=${request.include}`] : []), '-e', request.pattern, '--', root];
  return new Promise((resolveGrep, reject) => {
    const child = spawn('/usr/bin/grep', args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: COMMAND_PATH, LANG: 'C.UTF-8' } });
    const out = collector();
    const err = collector();
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), GREP_TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 2) return reject(new Failure('GREP_FAILED', err.text().trim() || 'grep failed'));
      const matches: RunnerResults['grep']['matches'] = [];
      for (const line of out.text().split('\n')) {
        const found = /^(.*?):(\d+):(.*)$/.exec(line);
        if (!found) continue;
        if (matches.length === MAX_MATCHES) break;
        matches.push({ path: found[1]!, line: Number(found[2]), text: found[3]!.slice(0, 2000) });
      }
      resolveGrep({ matches, truncated: out.truncated() || matches.length === MAX_MATCHES });
    });
  });
}

async function which(names: string[], workdir: string): Promise<RunnerResults['which']> {
  const paths: Record<string, string | null> = {};
  for (const name of names) {
    paths[name] = null;
    const candidates = name.includes('/') ? [resolve(workdir, name)] : COMMAND_PATH.split(':').map((dir) => join(dir, name));
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

/**
 * git on the history, its work tree the sandbox's files (read-only in the
 * history container). `init` names its directory itself. A streamed request
 * hands stdout to `stream` piece by piece, waiting for each to be taken.
 */
function git(request: Extract<RunnerRequest, { op: 'git' }>, stream?: (chunk: Buffer) => Promise<void>): Promise<RunnerResults['git']> {
  // no work tree: git here reads the history and the data it is given, never the agent's files
  const place = request.args[0] === 'init' ? [] : [`--git-dir=${HISTORY}`];
  return new Promise((resolveGit) => {
    const child = spawn(GIT, [...GIT_SAFETY, ...place, ...request.args], {
      cwd: HISTORY,
      env: gitEnv(process.env.HOME ?? '/tmp'),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    const stderr = collector();
    child.stdout.on('data', (chunk: Buffer) => {
      if (!request.stream || !stream) return void stdout.push(chunk);
      child.stdout.pause();
      void stream(chunk).then(() => child.stdout.resume());
    });
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.stdin.on('error', () => undefined);
    child.stdin.end(request.stdin ? Buffer.from(request.stdin, 'base64') : undefined);
    child.on('error', (error) => resolveGit({ stdout: '', stderr: `could not start git: ${error.message}\n`, code: 127 }));
    child.on('close', (code, signal) => {
      const exitCode = code ?? (signal ? 128 + (osConstants.signals[signal] ?? 9) : 1);
      const answer = { stdout: Buffer.concat(stdout).toString('base64'), stderr: stderr.text(), code: exitCode };
      // at every start (init is idempotent): a history made before these files gets them too
      if (request.args[0] !== 'init' || exitCode !== 0) return resolveGit(answer);
      writeHistoryInfo().then(
        () => resolveGit(answer),
        (error: unknown) => resolveGit({ ...answer, stderr: `could not write ${HISTORY}/info: ${failureOf(error).message}\n`, code: 1 }),
      );
    });
  });
}

async function writeHistoryInfo(): Promise<void> {
  await fs.mkdir(join(HISTORY, 'info'), { recursive: true });
  await fs.writeFile(join(HISTORY, 'info', 'attributes'), HISTORY_ATTRIBUTES);
}

/** Passes a stream's bytes on, failing with `tooLarge` once more than `maxBytes` went through. */
function bounded(maxBytes: number, tooLarge: () => Failure): { counter: Transform; bytes(): number } {
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (bytes > maxBytes) done(tooLarge());
      else done(null, chunk);
    },
  });
  return { counter, bytes: () => bytes };
}

/**
 * A tar (or tar.gz) into /src, unpacked by GNU tar as the sandbox's user, in
 * the sandbox: tar itself drops a leading `/` and refuses (exit 2) members
 * whose path has `..`, and places links pointing elsewhere only after every
 * file, so no member is written through one. Decompressed here, to count it:
 * an archive that unpacks to more than `maxBytes` is stopped there.
 */
async function unpack(request: Extract<RunnerRequest, { op: 'unpack' }>, input: Readable): Promise<RunnerResults['unpack']> {
  // --ignore-zeros: tar reads its input to the end instead of exiting at the archive's end marker, which
  // would close its stdin while the input's last lines are on their way and fail an archive it took whole
  const child = spawn('/usr/bin/tar', ['-x', '--ignore-zeros', '-f', '-', '-C', WORKDIR, '--no-same-owner', '--no-same-permissions', '--delay-directory-restore'], {
    cwd: WORKDIR,
    env: { PATH: COMMAND_PATH, LANG: 'C.UTF-8' },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  const stderr = collector();
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  const exited = new Promise<number>((resolveExit) => {
    child.on('error', () => resolveExit(127));
    child.on('close', (code) => resolveExit(code ?? 1));
  });
  const said = (): string => stderr.text().trim().split('\n').filter((line) => !/Exiting with failure status/.test(line)).slice(-3).join('; ');
  const count = bounded(request.maxBytes, () => new Failure('TOO_LARGE', `the archive unpacks to more than ${request.maxBytes} bytes, what /src holds`));
  try {
    if (request.gzip) await pipeline(input, createGunzip(), count.counter, child.stdin);
    else await pipeline(input, count.counter, child.stdin);
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    if (error instanceof Failure) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (code.startsWith('Z_')) throw new Failure('NOT_GZIP', `not a gzip-compressed archive (${(error as Error).message})`);
    throw new Failure('UNPACK_FAILED', said() || (error as Error).message);
  }
  const code = await exited;
  if (code !== 0) throw new Failure('UNPACK_FAILED', said() || `tar exited with code ${code}`);
  return { bytes: count.bytes() };
}

/**
 * An input written to a directory of its own in this container's /tmp (its
 * scratch space: not /src, not the history), for git to read by path; the
 * directory goes when the connection closes (`keep`), or at once if the
 * input fails or is larger than `maxBytes`.
 */
async function receiveFile(request: Extract<RunnerRequest, { op: 'receive' }>, input: Readable, keep: (path: string) => void): Promise<RunnerResults['receive']> {
  const dir = await fs.mkdtemp(join(tmpdir(), 'aileron-input-'));
  keep(dir);
  const path = join(dir, 'input');
  const count = bounded(request.maxBytes, () => new Failure('TOO_LARGE', `the file is larger than ${request.maxBytes} bytes, what the history container's scratch space holds`));
  try {
    await pipeline(input, count.counter, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
  } catch (error) {
    await fs.rm(dir, { recursive: true, force: true });
    throw error;
  }
  return { path, bytes: count.bytes() };
}

/**
 * The inputs of the requests on one connection that take one, by id. A full
 * input holds back reading from the connection until it drains; an input
 * whose request has ended swallows what is still on its way. What was kept
 * of them as files is removed when the connection closes.
 */
class Inputs {
  private readonly streams = new Map<number, PassThrough>();
  private readonly kept: string[] = [];

  constructor(private readonly source: { pause(): unknown; resume(): unknown }) {}

  open(id: number): Readable {
    const input = new PassThrough();
    this.streams.set(id, input);
    return input;
  }

  feed(message: RunnerInput): void {
    const input = this.streams.get(message.id);
    if (!input) return;
    if ('end' in message) return void input.end();
    if (!input.write(Buffer.from(message.chunk, 'base64'))) {
      this.source.pause();
      input.once('drain', () => this.source.resume());
    }
  }

  discard(id: number): void {
    const input = this.streams.get(id);
    if (!input) return;
    this.streams.delete(id);
    input.destroy();
    this.source.resume();
  }

  /** a path of this connection's, removed with it */
  keep(path: string): void {
    this.kept.push(path);
  }

  close(): void {
    for (const id of [...this.streams.keys()]) this.discard(id);
    for (const path of this.kept.splice(0)) void fs.rm(path, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The requests whose input follows them. */
const TAKES_INPUT: ReadonlySet<RunnerRequest['op']> = new Set(['unpack', 'receive']);

/** What this runner's role does not answer: the sandbox never touches the history, the history runs nothing but git (and keeps files for it). */
function refusedByRole(request: RunnerRequest): Failure | undefined {
  if (request.op === 'ping') return undefined;
  const history = request.op === 'git' || request.op === 'receive';
  if (ROLE === 'history' && !history) return new Failure('WRONG_ROLE', `the history runner answers ping, git and receive only, not ${request.op}`);
  if (ROLE === 'sandbox' && history) return new Failure('WRONG_ROLE', `${request.op} runs in the history container, not in the sandbox`);
  return undefined;
}

async function handle(request: RunnerRequest, stream?: (chunk: Buffer) => Promise<void>, input?: Readable, inputs?: Inputs): Promise<unknown> {
  const refused = refusedByRole(request);
  if (refused) throw refused;
  switch (request.op) {
    case 'ping':
      return { pid: process.pid, ...(VERSION ? { version: VERSION } : {}), ...(LISTEN !== undefined ? { role: ROLE } : {}) };
    case 'read': {
      const bytes = await readTextBytes(inSandbox(request.path));
      // the whole file (the usual read) is the file's bytes, sent as they are: no decoding, no split and join of every line
      if (request.offset === 0 && request.limit === null) {
        const lines = countLines(bytes);
        return { content: bytes.length === 0 || bytes[bytes.length - 1] === NEWLINE ? bytes : Buffer.concat([bytes, Buffer.from('\n')]), lines, totalLines: lines };
      }
      const lines = splitLines(bytes.toString('utf8'));
      const slice = lines.slice(request.offset, request.limit === null ? undefined : request.offset + request.limit);
      return { content: slice.join('\n') + (slice.length > 0 ? '\n' : ''), lines: slice.length, totalLines: lines.length };
    }
    case 'readText': {
      const path = inSandbox(request.path);
      const exists = await fs.lstat(path).then(
        () => true,
        (error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? false : Promise.reject(error)),
      );
      return { exists, content: exists ? await readText(path) : null };
    }
    case 'write': {
      const path = inSandbox(request.path);
      const created = !(await fs.lstat(path).then(() => true, () => false));
      await fs.mkdir(dirname(path), { recursive: true });
      await fs.writeFile(path, request.content);
      return { bytes: Buffer.byteLength(request.content), created };
    }
    case 'remove': {
      const path = inSandbox(request.path);
      const existed = await fs.lstat(path).then(() => true, () => false);
      if (existed) await fs.unlink(path);
      return { existed };
    }
    case 'ls': {
      const root = inSandbox(request.path);
      if (!(await fs.stat(root)).isDirectory()) {
        const stat = await fs.lstat(root);
        return { entries: [{ path: request.path, type: stat.isSymbolicLink() ? 'symlink' : 'file', size: stat.size }], truncated: false };
      }
      const entries: RunnerResults['ls']['entries'] = [];
      const truncated = await walk(root, request.recursive, (path, type, size) => {
        entries.push({ path: relative(root, path), type, size });
        return entries.length < MAX_ENTRIES;
      });
      return { entries, truncated };
    }
    case 'walk': {
      const root = inSandbox(request.path);
      const files: string[] = [];
      let bytes = 0;
      const truncated = await walk(root, true, (path, type) => {
        if (type === 'dir') return true;
        const file = relative(root, path);
        bytes += Buffer.byteLength(file);
        if (bytes > MAX_WALK_BYTES) return false;
        files.push(file);
        return files.length < MAX_WALK_FILES;
      });
      return { files, truncated };
    }
    case 'grep':
      return grep(request);
    case 'exec':
      return exec(request);
    case 'which':
      return which(request.names, inSandbox(request.workdir));
    case 'git':
      return git(request, stream);
    case 'scan':
      return scanner.scan(request.base, request.maxEntries);
    case 'blobs':
      return scanner.blobs(request.paths);
    case 'adopt':
      scanner.adopt(request.base);
      return {};
    case 'unpack':
      if (!input) throw new Failure('NO_INPUT', 'unpack takes its archive on the same connection');
      return unpack(request, input);
    case 'receive':
      if (!input || !inputs) throw new Failure('NO_INPUT', 'receive takes its file on the same connection');
      return receiveFile(request, input, (path) => inputs.keep(path));
  }
}

/** One request line in, its answer out through `answer`; a streamed git's stdout through `stream`; an input line to its request. */
function receive(line: string, answer: (message: RunnerAnswer) => void, inputs: Inputs, stream?: (id: number, chunk: Buffer) => Promise<void>): void {
  let id = -1;
  try {
    const message = JSON.parse(line) as (RunnerRequest & { id: number }) | RunnerInput;
    if (!('op' in message)) return inputs.feed(message);
    const request = message;
    id = request.id;
    const path = 'path' in request ? request.path : undefined;
    const input = TAKES_INPUT.has(request.op) ? inputs.open(id) : undefined;
    handle(request, stream ? (chunk) => stream(id, chunk) : undefined, input, inputs)
      .then(
        (result) => answer({ id, result }),
        (error: unknown) => answer({ id, error: failureOf(error, path) }),
      )
      .finally(() => inputs.discard(id));
  } catch (error) {
    answer({ id, error: failureOf(error) });
  }
}

function option(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

function fatal(message: string): never {
  process.stderr.write(`runner: ${message}\n`);
  process.exit(2);
}

const ROLE: RunnerRole = ((): RunnerRole => {
  const role = option('--role') ?? 'sandbox';
  if (role !== 'sandbox' && role !== 'history') fatal(`--role ${role}: sandbox or history`);
  return role;
})();
const LISTEN = option('--listen');
/** what the sandbox's files were at the last snapshot, as this runner knows it */
const scanner = new TreeScanner(WORKDIR);
const VERSION = process.env.AILERON_MCP_VERSION || undefined;

/** Compares through digests, so neither the time taken nor a length mismatch says anything of the token. */
function sameSecret(presented: string, expected: string): boolean {
  const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(presented), digest(expected));
}

/**
 * A message as it goes out: its line, then the result's long strings and its
 * Buffers as raw bytes, listed in the line's `raw`. The parts are written in
 * one go, so answers to concurrent requests never interleave.
 */
function framed(message: RunnerAnswer | RunnerChunk): (string | Buffer)[] {
  const line = (value: unknown): string => `${JSON.stringify(value)}\n`;
  if (!('result' in message) || message.result === null || typeof message.result !== 'object') return [line(message)];
  const result: Record<string, unknown> = {};
  const raw: RawFields = [];
  const bytes: Buffer[] = [];
  for (const [field, value] of Object.entries(message.result)) {
    const long = Buffer.isBuffer(value) ? value : typeof value === 'string' && value.length >= RAW_MIN_CHARS ? Buffer.from(value) : null;
    if (!long) {
      result[field] = value;
      continue;
    }
    raw.push(Buffer.isBuffer(value) && BINARY_FIELDS.has(field) ? [field, long.length, 1] : [field, long.length]);
    bytes.push(long);
  }
  return raw.length === 0 ? [line(message)] : [line({ id: message.id, result, raw }), ...bytes];
}

/**
 * Listen mode: every connection presents the token on its first line, then
 * speaks JSON lines as stdin and stdout do. A connection that ends leaves the
 * runner (and what it started) running: the control plane reconnects.
 */
function listen(at: string): void {
  const token = process.env.AILERON_RUNNER_TOKEN ?? '';
  // without a token anyone who reaches the port would run commands here
  if (token.length < 16) fatal('AILERON_RUNNER_TOKEN is unset or shorter than 16 characters; not listening');
  const colon = at.lastIndexOf(':');
  const host = colon >= 0 ? at.slice(0, colon).replace(/^\[(.*)\]$/, '$1') : undefined;
  const port = Number(colon >= 0 ? at.slice(colon + 1) : at);
  if (!Number.isInteger(port) || port < 1 || port > 65535) fatal(`--listen ${at}: [host:]port`);
  const server = createServer((socket) => accept(socket, token));
  server.on('error', (error) => fatal(`cannot listen on ${at}: ${error.message}`));
  server.listen({ port, ...(host ? { host } : {}) }, () => process.stderr.write(`runner: ${ROLE} runner listening on ${host ?? '*'}:${port}\n`));
}

function accept(socket: Socket, token: string): void {
  socket.setNoDelay(true);
  socket.setEncoding('utf8');
  socket.on('error', () => undefined);
  /** false when the socket's buffer is full (a streamed git waits for its drain) */
  const write = (message: RunnerAnswer | RunnerChunk): boolean => {
    if (!socket.writable) return false;
    let room = true;
    for (const part of framed(message)) room = socket.write(part);
    return room;
  };
  let authenticated = false;
  let refused = false;
  const refuse = (message: string): void => {
    refused = true;
    clearTimeout(timer);
    write({ id: -1, error: { code: 'UNAUTHORIZED', message } });
    socket.destroySoon();
  };
  const timer = setTimeout(() => refuse('no token in time'), AUTH_TIMEOUT_MS);
  timer.unref();
  const stream = (id: number, chunk: Buffer): Promise<void> =>
    new Promise((resolveWritten) => {
      if (write({ id, chunk: chunk.toString('base64') }) || !socket.writable) return resolveWritten();
      // the control plane reads slower than git writes: git waits
      const done = (): void => {
        socket.off('drain', done);
        socket.off('close', done);
        resolveWritten();
      };
      socket.on('drain', done);
      socket.on('close', done);
    });
  const inputs = new Inputs(socket);
  socket.on('close', () => inputs.close());
  // lines by hand: the first one is bounded until the token is checked, the later ones (a git input) may be large
  let partial: string[] = [];
  let partialLength = 0;
  socket.on('data', (data: string) => {
    if (refused) return;
    let from = 0;
    for (let end = data.indexOf('\n'); end >= 0; end = data.indexOf('\n', from)) {
      const line = partial.join('') + data.slice(from, end);
      partial = [];
      partialLength = 0;
      from = end + 1;
      if (authenticated) {
        if (line.trim() !== '') receive(line, write, inputs, stream);
        continue;
      }
      if (!sameSecret(line.replace(/\r$/, ''), token)) return refuse('wrong token');
      authenticated = true;
      clearTimeout(timer);
    }
    partial.push(data.slice(from));
    partialLength += data.length - from;
    if (!authenticated && partialLength > MAX_TOKEN_LINE) refuse('token line too long');
  });
}

function main(): void {
  if (LISTEN !== undefined) return listen(LISTEN);
  const answer = (message: RunnerAnswer): void => {
    for (const part of framed(message)) process.stdout.write(part);
  };
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const inputs = new Inputs(process.stdin);
  lines.on('line', (line) => receive(line, answer, inputs));
  // the control plane closed our stdin: it is gone or stopping us
  lines.on('close', () => process.exit(0));
}

main();
