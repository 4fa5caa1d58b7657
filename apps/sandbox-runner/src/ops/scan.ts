/**
 * The sandbox's side of a snapshot: what /src holds, as plain data (paths,
 * modes, git blob ids, bytes). It runs in the runner, inside the sandbox,
 * so nothing the agent wrote is ever interpreted outside it: no git reads
 * the tree, nested repositories are files like any other (their `.git` is
 * left out), symlinks are their text and are never followed, and a file
 * swapped for a link between the walk and the read is read as nothing.
 *
 * The runner remembers the tree of the commit it last adopted, so a scan
 * against that commit answers only the changes; files whose inode, size,
 * times and mode are those it hashed before are not read again.
 */
import { type BigIntStats, constants, type Dirent, promises as fs } from 'node:fs';
import { join } from 'node:path';
import ignore, { type Ignore } from 'ignore';
import {
  blobId,
  type RunnerResults,
  type ScanResult,
  type TreeChange,
  type TreeEntry,
  type TreeMode,
} from '@aileron/sandboxes/runner-protocol';
import { Failure } from '../failure';

/** a file larger than this is left out of snapshots, and named in the snapshot's record */
export const MAX_SNAPSHOT_FILE_BYTES = 64 * 1024 * 1024;
/** the bytes one `blobs` answer carries at most (the control plane asks in batches below it) */
export const MAX_BLOBS_BYTES = 128 * 1024 * 1024;
/** a `.gitignore` longer than this is not read */
const MAX_IGNORE_FILE_BYTES = 256 * 1024;

interface Known {
  mode: TreeMode;
  sha: string;
  size: number;
  /** what the file looked like when hashed: unchanged, it is not read again */
  stamp: string;
}

type Tree = Map<string, Known>;

export class TreeScanner {
  private adopted: { base: string; tree: Tree } | null = null;
  private pending: Tree | null = null;

  constructor(private readonly root: string) {}

  /** `maxEntries`: a tree with more files than this is not snapshotted (the snapshot fails, saying why) */
  async scan(base: string | null, maxEntries: number): Promise<ScanResult> {
    const { tree, skipped } = await this.walk(maxEntries);
    this.pending = tree;
    if (base !== null && this.adopted?.base === base)
      return { full: false, changes: changesBetween(this.adopted.tree, tree), skipped };
    return { full: true, entries: [...tree].map(([path, known]) => entryOf(path, known)), skipped };
  }

  /** The bytes of each path now; what the next adoption records is what was read here, so history and runner agree. */
  async blobs(paths: string[]): Promise<RunnerResults['blobs']> {
    const tree = this.pending ?? new Map<string, Known>();
    this.pending = tree;
    const items: RunnerResults['blobs']['items'] = [];
    const data: Buffer[] = [];
    let total = 0;
    for (const path of paths) {
      const read = await readEntry(join(this.root, path));
      if (!read || read.bytes.length > MAX_SNAPSHOT_FILE_BYTES) {
        tree.delete(path);
        items.push({ path, gone: true });
        continue;
      }
      total += read.bytes.length;
      if (total > MAX_BLOBS_BYTES)
        throw new Failure(
          'SNAPSHOT_TOO_LARGE',
          `the changed files are larger than ${MAX_BLOBS_BYTES} bytes in one request`,
        );
      const known: Known = { mode: read.mode, sha: blobId(read.bytes), size: read.bytes.length, stamp: read.stamp };
      tree.set(path, known);
      items.push(entryOf(path, known));
      data.push(read.bytes);
    }
    return { items, data: Buffer.concat(data, total) };
  }

  adopt(base: string): void {
    if (!this.pending) throw new Failure('NOTHING_TO_ADOPT', 'adopt follows a scan');
    this.adopted = { base, tree: this.pending };
    this.pending = null;
  }

  private async walk(maxEntries: number): Promise<{ tree: Tree; skipped: string[] }> {
    const tree: Tree = new Map();
    const skipped: string[] = [];
    const cached = (path: string): Known | undefined => this.pending?.get(path) ?? this.adopted?.tree.get(path);
    const visit = async (dir: string, rules: IgnoreRules[]): Promise<void> => {
      let names: Dirent[];
      try {
        names = await fs.readdir(dir ? join(this.root, dir) : this.root, { withFileTypes: true });
      } catch {
        // gone or unreadable while walking: what is not there is not in the snapshot
        return;
      }
      const own = await ignoreRulesOf(join(this.root, dir), dir);
      const here = own ? [...rules, own] : rules;
      names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const entry of names) {
        // a repository of the agent's own (or a file named so) is never part of a snapshot, whatever its case
        if (entry.name.toLowerCase() === '.git') continue;
        // a new ext4 volume (a Kubernetes sandbox's claim) has one at its root, where fsck puts what it recovers;
        // a deeper one is the agent's work
        if (!dir && entry.name === 'lost+found') continue;
        const path = dir ? `${dir}/${entry.name}` : entry.name;
        const isDir = entry.isDirectory();
        if (isIgnored(here, path, isDir)) continue;
        if (isDir) {
          await visit(path, here);
          continue;
        }
        if (!entry.isFile() && !entry.isSymbolicLink()) continue;
        const stat = await fs.lstat(join(this.root, path), { bigint: true }).catch(() => null);
        if (!stat) continue;
        if (tree.size >= maxEntries)
          throw new Failure(
            'SNAPSHOT_TOO_LARGE',
            `/src holds more than ${maxEntries} files, more than a snapshot takes (AILERON_SANDBOX_SNAPSHOT_MAX_FILES); leave some out with a .gitignore`,
          );
        const before = cached(path);
        if (before?.stamp === stampOf(stat)) {
          tree.set(path, before);
          continue;
        }
        if (stat.isFile() && stat.size > BigInt(MAX_SNAPSHOT_FILE_BYTES)) {
          skipped.push(path);
          continue;
        }
        const read = await readEntry(join(this.root, path));
        if (!read) continue;
        if (read.bytes.length > MAX_SNAPSHOT_FILE_BYTES) {
          skipped.push(path);
          continue;
        }
        tree.set(path, { mode: read.mode, sha: blobId(read.bytes), size: read.bytes.length, stamp: read.stamp });
      }
    };
    await visit('', []);
    return { tree, skipped };
  }
}

function entryOf(path: string, known: Known): TreeEntry {
  return { path, mode: known.mode, sha: known.sha, size: known.size };
}

function changesBetween(before: Tree, after: Tree): TreeChange[] {
  const changes: TreeChange[] = [];
  for (const [path, known] of after) {
    const was = before.get(path);
    if (was?.sha === known.sha && was.mode === known.mode) continue;
    changes.push({ ...entryOf(path, known), before: was?.sha ?? null });
  }
  for (const path of before.keys()) if (!after.has(path)) changes.push({ path, deleted: true });
  return changes;
}

function stampOf(stat: BigIntStats): string {
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}:${stat.mode}`;
}

/**
 * A file's bytes or a symlink's text, with its mode and the stamp it had
 * before the read. The file is opened without following a link and without
 * blocking (a FIFO swapped in is not a file), and checked to be a regular
 * file by its descriptor.
 */
async function readEntry(path: string): Promise<{ mode: TreeMode; bytes: Buffer; stamp: string } | null> {
  const stat = await fs.lstat(path, { bigint: true }).catch(() => null);
  if (!stat) return null;
  if (stat.isSymbolicLink()) {
    const target = await fs.readlink(path, { encoding: 'buffer' }).catch(() => null);
    return target ? { mode: '120000', bytes: target, stamp: stampOf(stat) } : null;
  }
  if (!stat.isFile()) return null;
  const handle = await fs
    .open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    .catch(() => null);
  if (!handle) return null;
  try {
    const opened = await handle.stat({ bigint: true });
    if (!opened.isFile() || opened.size > BigInt(MAX_SNAPSHOT_FILE_BYTES)) return null;
    const bytes = await handle.readFile();
    return { mode: (opened.mode & 0o111n) !== 0n ? '100755' : '100644', bytes, stamp: stampOf(opened) };
  } finally {
    await handle.close();
  }
}

/** One directory's `.gitignore`, its paths relative to that directory. */
interface IgnoreRules {
  dir: string;
  rules: Ignore;
}

async function ignoreRulesOf(abs: string, dir: string): Promise<IgnoreRules | null> {
  const path = join(abs, '.gitignore');
  const stat = await fs.lstat(path).catch(() => null);
  if (!stat?.isFile() || stat.size > MAX_IGNORE_FILE_BYTES) return null;
  const text = await fs.readFile(path, 'utf8').catch(() => null);
  return text === null ? null : { dir, rules: ignore({ allowRelativePaths: true }).add(text) };
}

/**
 * As git decides: the deepest `.gitignore` with a word on the path wins
 * (a `!pattern` there takes it back). A directory it leaves out is not
 * walked, so nothing under it can be taken back (git's rule too).
 */
function isIgnored(rules: IgnoreRules[], path: string, isDir: boolean): boolean {
  for (let at = rules.length - 1; at >= 0; at--) {
    const { dir, rules: matcher } = rules[at]!;
    const relative = dir ? path.slice(dir.length + 1) : path;
    const verdict = matcher.test(isDir ? `${relative}/` : relative);
    if (verdict.ignored) return true;
    if (verdict.unignored) return false;
  }
  return false;
}
