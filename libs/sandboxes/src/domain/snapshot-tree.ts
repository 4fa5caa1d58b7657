/**
 * A snapshot as data: the changes a sandbox's runner reports, checked and
 * turned into a `git fast-import` stream that builds the commit in the
 * history's bare repository. No git ever reads the agent's files: the
 * runner hashes and reads them inside the sandbox, and fast-import only
 * stores the bytes and paths it is given.
 */
import type { TreeChange, TreeEntry, TreeMode } from '../runner-protocol';

const MODES: ReadonlySet<string> = new Set<TreeMode>(['100644', '100755', '120000']);
const SHA = /^[0-9a-f]{40}$/;

/** A change as the commit takes it: bytes to store, an object the history has, or a path to remove. */
export type CommitChange =
  | { path: string; mode: TreeMode; data: Buffer }
  | { path: string; mode: TreeMode; sha: string }
  | { path: string; deleted: true };

export interface CommitRequest {
  ref: string;
  parent: string | null;
  author: { name: string; email: string };
  committer: { name: string; email: string };
  at: Date;
  message: string;
  changes: CommitChange[];
}

/**
 * A path a tree may hold: relative, no empty, `.` or `..` component, no
 * `.git` component in any case, no NUL. The runner never reports another,
 * but it lives in the agent's sandbox: what it says is checked here.
 */
export function isTreePath(path: string): boolean {
  if (path === '' || path.length > 4096 || path.includes('\0') || path.startsWith('/')) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..' && part.toLowerCase() !== '.git');
}

export function isTreeEntry(entry: TreeEntry): boolean {
  return (
    isTreePath(entry.path) &&
    MODES.has(entry.mode) &&
    SHA.test(entry.sha) &&
    Number.isSafeInteger(entry.size) &&
    entry.size >= 0
  );
}

/** `git ls-tree -r -z --full-tree` output as path → blob */
export function parseLsTree(output: string): Map<string, { mode: string; sha: string }> {
  const tree = new Map<string, { mode: string; sha: string }>();
  for (const record of output.split('\0')) {
    const tab = record.indexOf('\t');
    if (tab < 0) continue;
    const [mode, type, sha] = record.slice(0, tab).split(' ');
    if (type === 'blob' && mode && sha) tree.set(record.slice(tab + 1), { mode, sha });
  }
  return tree;
}

/** What turns `before` (a commit's tree) into `entries` (a full scan). */
export function changesAgainst(before: Map<string, { mode: string; sha: string }>, entries: TreeEntry[]): TreeChange[] {
  const changes: TreeChange[] = [];
  const now = new Set<string>();
  for (const entry of entries) {
    now.add(entry.path);
    const was = before.get(entry.path);
    if (was?.sha === entry.sha && was.mode === entry.mode) continue;
    changes.push({ ...entry, before: was?.sha ?? null });
  }
  for (const path of before.keys()) if (!now.has(path)) changes.push({ path, deleted: true });
  return changes;
}

/** Groups paths into requests of at most `maxBytes` each (a larger file alone). */
export function inBatches<T extends { size: number }>(items: T[], maxBytes: number): T[][] {
  const batches: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    if (current.length > 0 && bytes + item.size > maxBytes) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += item.size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/**
 * The fast-import stream of one commit on `ref`. Every path is C-quoted, so
 * no name (a newline, a quote, a leading `"`) can end a command early or
 * start another; every payload is sized, never delimited.
 */
export function fastImportStream(commit: CommitRequest): Buffer {
  const parts: Buffer[] = [];
  const text = (value: string): void => void parts.push(Buffer.from(value, 'utf8'));
  const data = (bytes: Buffer): void => {
    text(`data ${bytes.length}\n`);
    parts.push(bytes);
    text('\n');
  };
  const seconds = Math.floor(commit.at.getTime() / 1000);
  text(`commit ${commit.ref}\n`);
  text(`author ${person(commit.author)} ${seconds} +0000\n`);
  text(`committer ${person(commit.committer)} ${seconds} +0000\n`);
  data(Buffer.from(commit.message, 'utf8'));
  if (commit.parent) text(`from ${commit.parent}\n`);
  for (const change of commit.changes) {
    if ('deleted' in change) text(`D ${quotePath(change.path)}\n`);
    else if ('sha' in change) text(`M ${change.mode} ${change.sha} ${quotePath(change.path)}\n`);
    else {
      text(`M ${change.mode} inline ${quotePath(change.path)}\n`);
      data(change.data);
    }
  }
  text('done\n');
  return Buffer.concat(parts);
}

/** `Name <email>` with nothing that would end either early */
function person(who: { name: string; email: string }): string {
  const clean = (value: string): string => value.replace(/[<>\n\r\0]/g, '').trim();
  return `${clean(who.name) || 'unknown'} <${clean(who.email)}>`;
}

/** git's C-style quoting: the quote, the backslash and every control byte escaped, the rest as UTF-8 */
export function quotePath(path: string): string {
  let quoted = '"';
  for (const byte of Buffer.from(path, 'utf8')) {
    if (byte === 0x22) quoted += '\\"';
    else if (byte === 0x5c) quoted += '\\\\';
    else if (byte < 0x20 || byte === 0x7f) quoted += `\\${byte.toString(8).padStart(3, '0')}`;
    else quoted += String.fromCharCode(byte);
  }
  // bytes ≥ 0x80 were kept one char each: back to the UTF-8 they were
  return `${Buffer.from(quoted, 'latin1').toString('utf8')}"`;
}
