/**
 * One directory of a snapshot as a reviewer browses it: `git ls-tree -z -l`
 * of the history read into entries. git only reads the history here (never
 * /src), so what it prints are names the snapshot stored.
 */

export type TreeEntryKind = 'directory' | 'file' | 'executable' | 'symlink' | 'submodule';

export interface ListedEntry {
  name: string;
  kind: TreeEntryKind;
  /** bytes of a file or a link's target; null for a directory or a submodule */
  size: number | null;
  /** the object id, which `git cat-file` reads by */
  object: string;
}

const KINDS: Record<string, TreeEntryKind> = {
  '040000': 'directory',
  '100644': 'file',
  '100755': 'executable',
  '120000': 'symlink',
  '160000': 'submodule',
};

/** `git ls-tree -z -l <tree>`: `<mode> SP <type> SP <object> SP+ <size> TAB <name> NUL` per entry. */
export function parseTreeListing(output: string): ListedEntry[] {
  const entries: ListedEntry[] = [];
  for (const record of output.split('\0')) {
    const tab = record.indexOf('\t');
    if (tab < 0) continue;
    const [mode, , object, size] = record.slice(0, tab).split(/ +/);
    const kind = KINDS[mode ?? ''];
    if (!kind || !object) continue;
    entries.push({ name: record.slice(tab + 1), kind, size: size && size !== '-' ? Number(size) : null, object });
  }
  return entries;
}

/** Directories first, then by name in code-unit order: the order a listing pages in. */
export function compareEntries(a: ListedEntry, b: ListedEntry): number {
  const dirA = a.kind === 'directory' ? 0 : 1;
  const dirB = b.kind === 'directory' ? 0 : 1;
  return dirA - dirB || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/**
 * A path a reviewer may ask for, `''` being the root: relative, no empty,
 * `.` or `..` component (git would read `./x` after `<rev>:` against a work
 * tree), no control character, no leading `-`.
 */
export function isBrowsablePath(path: string): boolean {
  if (path === '') return true;
  // eslint-disable-next-line no-control-regex
  if (path.length > 4096 || /[\u0000-\u001f]/.test(path) || path.startsWith('/') || path.startsWith('-')) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

/** A file's bytes as text, or null when they are not text (a NUL byte, or not UTF-8). */
export function asText(bytes: Buffer): string | null {
  if (bytes.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}
