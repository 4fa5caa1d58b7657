/** The file tools' requests: read, readText, write, remove, ls and walk, each on a path in the sandbox. */
import { type Dirent, promises as fs } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type { RunnerRequest, RunnerResults } from '@aileron/sandboxes/runner-protocol';
import { Failure } from '../failure';
import { inSandbox } from '../sandbox-paths';

/** a file `read` or `patch` handles at most (text) */
const MAX_TEXT_BYTES = 32 * 1024 * 1024;
const MAX_ENTRIES = 10_000;
/** `walk` (the glob tool) answers at most this many files, and this many bytes of their paths: its answer is one line the control plane parses */
const MAX_WALK_FILES = 50_000;
const MAX_WALK_BYTES = 4 * 1024 * 1024;
const NEWLINE = 0x0a;

type Request<O extends RunnerRequest['op']> = Extract<RunnerRequest, { op: O }>;

/** The lines asked for; the whole file (the usual read) as its bytes, sent as they are (raw, read as text by the control plane): no decoding, no split and join of every line. */
export async function read(
  request: Request<'read'>,
): Promise<Omit<RunnerResults['read'], 'content'> & { content: string | Buffer }> {
  const bytes = await readTextBytes(inSandbox(request.path));
  if (request.offset === 0 && request.limit === null) {
    const lines = countLines(bytes);
    return {
      content:
        bytes.length === 0 || bytes[bytes.length - 1] === NEWLINE ? bytes : Buffer.concat([bytes, Buffer.from('\n')]),
      lines,
      totalLines: lines,
    };
  }
  const lines = splitLines(bytes.toString('utf8'));
  const slice = lines.slice(request.offset, request.limit === null ? undefined : request.offset + request.limit);
  return { content: slice.join('\n') + (slice.length > 0 ? '\n' : ''), lines: slice.length, totalLines: lines.length };
}

export async function readText(request: Request<'readText'>): Promise<RunnerResults['readText']> {
  const path = inSandbox(request.path);
  const exists = await fs.lstat(path).then(
    () => true,
    (error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? false : Promise.reject(error)),
  );
  return { exists, content: exists ? (await readTextBytes(path)).toString('utf8') : null };
}

export async function write(request: Request<'write'>): Promise<RunnerResults['write']> {
  const path = inSandbox(request.path);
  const created = !(await fs.lstat(path).then(
    () => true,
    () => false,
  ));
  await fs.mkdir(dirname(path), { recursive: true });
  await fs.writeFile(path, request.content);
  return { bytes: Buffer.byteLength(request.content), created };
}

export async function remove(request: Request<'remove'>): Promise<RunnerResults['remove']> {
  const path = inSandbox(request.path);
  const existed = await fs.lstat(path).then(
    () => true,
    () => false,
  );
  if (existed) await fs.unlink(path);
  return { existed };
}

export async function ls(request: Request<'ls'>): Promise<RunnerResults['ls']> {
  const root = inSandbox(request.path);
  if (!(await fs.stat(root)).isDirectory()) {
    const stat = await fs.lstat(root);
    return {
      entries: [{ path: request.path, type: stat.isSymbolicLink() ? 'symlink' : 'file', size: stat.size }],
      truncated: false,
    };
  }
  const entries: RunnerResults['ls']['entries'] = [];
  const truncated = await walkTree(root, request.recursive, (path, type, size) => {
    entries.push({ path: relative(root, path), type, size });
    return entries.length < MAX_ENTRIES;
  });
  return { entries, truncated };
}

export async function walk(request: Request<'walk'>): Promise<RunnerResults['walk']> {
  const root = inSandbox(request.path);
  const files: string[] = [];
  let bytes = 0;
  const truncated = await walkTree(root, true, (path, type) => {
    if (type === 'dir') return true;
    const file = relative(root, path);
    bytes += Buffer.byteLength(file);
    if (bytes > MAX_WALK_BYTES) return false;
    files.push(file);
    return files.length < MAX_WALK_FILES;
  });
  return { files, truncated };
}

/** a text file's bytes (not decoded: a whole-file read sends them as they are) */
async function readTextBytes(path: string): Promise<Buffer> {
  const stat = await fs.stat(path);
  if (stat.isDirectory()) throw new Failure('EISDIR', `${path}: is a directory`);
  if (stat.size > MAX_TEXT_BYTES)
    throw new Failure('TOO_LARGE', `${path}: ${stat.size} bytes, more than the ${MAX_TEXT_BYTES} a text tool reads`);
  const buffer = await fs.readFile(path);
  if (buffer.includes(0)) throw new Failure('NOT_TEXT', `${path}: a binary file`);
  return buffer;
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** what splitLines(bytes.toString()).length would be */
function countLines(bytes: Buffer): number {
  let count = 0;
  for (let at = bytes.indexOf(NEWLINE); at !== -1; at = bytes.indexOf(NEWLINE, at + 1)) count++;
  return bytes.length === 0 || bytes[bytes.length - 1] === NEWLINE ? count : count + 1;
}

async function walkTree(
  root: string,
  recursive: boolean,
  visit: (path: string, type: 'file' | 'dir' | 'symlink' | 'other', size: number) => boolean,
): Promise<boolean> {
  // breadth-first, never following symlinks: a link to / would otherwise list the whole root
  const queue = [root];
  while (queue.length > 0) {
    const dir = queue.shift()!;
    let entries: Dirent[];
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
