/**
 * The sandbox's runner: started by the driver inside the sandbox (bubblewrap
 * locally, the pod's container on Kubernetes), it carries out the control
 * plane's requests there, so every path resolves in the sandbox's own
 * filesystem and every command runs in its namespaces. Node built-ins only:
 * it runs from the build output, with nothing else of ours mounted.
 *
 * Protocol (protocol.ts): one JSON request per line on stdin, one answer per
 * line on stdout. Requests run concurrently; the control plane serialises the
 * ones that change files.
 */
import { spawn } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { RunnerAnswer, RunnerFailure, RunnerLimits, RunnerRequest, RunnerResults } from './protocol';

const WORKDIR = '/src';
/** a file `read` or `patch` handles at most (text) */
const MAX_TEXT_BYTES = 32 * 1024 * 1024;
const MAX_OUTPUT_BYTES = 1024 * 1024;
const MAX_ENTRIES = 10_000;
const MAX_MATCHES = 1_000;
const GREP_TIMEOUT_MS = 30_000;
const COMMAND_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';

class Failure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

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

async function readText(path: string): Promise<string> {
  const stat = await fs.stat(path);
  if (stat.isDirectory()) throw new Failure('EISDIR', `${path}: is a directory`);
  if (stat.size > MAX_TEXT_BYTES) throw new Failure('TOO_LARGE', `${path}: ${stat.size} bytes, more than the ${MAX_TEXT_BYTES} a text tool reads`);
  const buffer = await fs.readFile(path);
  if (buffer.includes(0)) throw new Failure('NOT_TEXT', `${path}: a binary file`);
  return buffer.toString('utf8');
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
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
 */
async function killEverythingElse(): Promise<void> {
  const own = new Set([1, process.pid]);
  for (const name of await fs.readdir('/proc').catch(() => [] as string[])) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || own.has(pid)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

function limitArgs(limits: RunnerLimits): string[] {
  const args: string[] = [];
  if (limits.memoryMb) args.push(`--as=${limits.memoryMb * 1024 * 1024}`);
  if (limits.cpuSeconds) args.push(`--cpu=${limits.cpuSeconds}`);
  if (limits.pids) args.push(`--nproc=${limits.pids}`);
  return args;
}

async function exec(request: Extract<RunnerRequest, { op: 'exec' }>): Promise<RunnerResults['exec']> {
  const cwd = inSandbox(request.workdir);
  const stat = await fs.stat(cwd).catch(() => null);
  if (!stat?.isDirectory()) throw new Failure('WORKDIR_INVALID', `workdir ${request.workdir}: not a directory in the sandbox`);
  const limits = limitArgs(request.limits);
  const shell = ['/bin/bash', '--noprofile', '--norc', '-c', request.command];
  const argv = limits.length > 0 ? ['/usr/bin/prlimit', ...limits, '--', ...shell] : shell;
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
    const timer = setTimeout(() => {
      timedOut = true;
      void killEverythingElse();
    }, request.timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolveExec({ stdout: '', stderr: `could not start bash: ${error.message}\n`, exitCode: 127, timedOut: false, truncated: false });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const exitCode = code ?? (signal ? 128 + (osConstants.signals[signal] ?? 9) : 1);
      const note = timedOut ? `\n[aileron] the command ran longer than ${request.timeoutMs / 1000} s and was killed with everything it started\n` : '';
      resolveExec({ stdout: stdout.text(), stderr: stderr.text() + note, exitCode: timedOut ? 124 : exitCode, timedOut, truncated: stdout.truncated() || stderr.truncated() });
    });
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

async function which(names: string[]): Promise<RunnerResults['which']> {
  const paths: Record<string, string | null> = {};
  for (const name of names) {
    paths[name] = null;
    const candidates = name.includes('/') ? [inSandbox(name)] : COMMAND_PATH.split(':').map((dir) => join(dir, name));
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

async function handle(request: RunnerRequest): Promise<unknown> {
  switch (request.op) {
    case 'ping':
      return { pid: process.pid };
    case 'read': {
      const lines = splitLines(await readText(inSandbox(request.path)));
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
      const truncated = await walk(root, true, (path, type) => {
        if (type !== 'dir') files.push(relative(root, path));
        return files.length < MAX_ENTRIES * 5;
      });
      return { files, truncated };
    }
    case 'grep':
      return grep(request);
    case 'exec':
      return exec(request);
    case 'which':
      return which(request.names);
  }
}

function main(): void {
  const answer = (message: RunnerAnswer): void => void process.stdout.write(`${JSON.stringify(message)}\n`);
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', (line) => {
    let id = -1;
    try {
      const request = JSON.parse(line) as RunnerRequest & { id: number };
      id = request.id;
      const path = 'path' in request ? request.path : undefined;
      handle(request).then(
        (result) => answer({ id, result }),
        (error: unknown) => answer({ id, error: failureOf(error, path) }),
      );
    } catch (error) {
      answer({ id, error: failureOf(error) });
    }
  });
  // the control plane closed our stdin: it is gone or stopping us
  lines.on('close', () => process.exit(0));
}

main();
