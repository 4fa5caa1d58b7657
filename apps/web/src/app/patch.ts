import { parsePatch, type StructuredPatchHunk } from 'diff';

/** One file of a git patch (`git show --patch`): its names, whether git called it binary, its hunks. */
export interface FilePatch {
  /** the name it has after the change (before it, for a deleted file) */
  name: string;
  /** the name before a rename */
  renamedFrom: string | null;
  status: 'added' | 'deleted' | 'renamed' | 'modified';
  binary: boolean;
  /** its lines could not be read as hunks: shown as such rather than failing the page */
  unreadable: boolean;
  hunks: StructuredPatchHunk[];
}

/**
 * A git patch of several files, one entry per file. Each `diff --git` part
 * is read on its own: jsdiff alone would fold a binary file's part (which
 * has no `---` line) into its neighbour's.
 */
export function splitGitPatch(text: string): FilePatch[] {
  const parts = text.split(/^(?=diff --git )/m).filter((part) => part.startsWith('diff --git '));
  return parts.map((part) => {
    const lines = part.split('\n');
    const firstHunk = lines.findIndex((l) => l.startsWith('@@'));
    const header = firstHunk < 0 ? lines : lines.slice(0, firstHunk);
    const has = (prefix: string) => header.some((l) => l.startsWith(prefix));
    const after = (prefix: string) => header.find((l) => l.startsWith(prefix))?.slice(prefix.length) ?? null;
    const [parsed] = has('--- ') ? readable(part) : [];
    const strip = (name: string | undefined) =>
      name === undefined || name === '/dev/null' ? null : name.replace(/^[ab]\//, '');
    // `diff --git a/<p> b/<p>`: the same path twice when nothing was renamed
    const both = lines[0]!.slice('diff --git '.length);
    const path = both.slice(2, (both.length - 1) / 2);
    const same = both === `a/${path} b/${path}` ? path : null;
    const newName = after('rename to ') ?? strip(parsed?.newFileName) ?? same;
    const oldName = after('rename from ') ?? strip(parsed?.oldFileName) ?? same;
    return {
      name: newName ?? oldName ?? both,
      renamedFrom: has('rename from ') ? oldName : null,
      status: has('new file mode')
        ? 'added'
        : has('deleted file mode')
          ? 'deleted'
          : has('rename from ')
            ? 'renamed'
            : 'modified',
      binary: has('Binary files ') || has('GIT binary patch'),
      unreadable: has('--- ') && parsed === undefined,
      hunks: parsed?.hunks ?? [],
    };
  });
}

interface Side {
  line: number;
  text: string;
  changed: boolean;
}

/** A hunk as rows of two sides: unchanged lines on both, a run of removed lines beside the added lines that replace it. */
export function rowsOf(hunk: StructuredPatchHunk): { before: Side | null; after: Side | null }[] {
  const rows: { before: Side | null; after: Side | null }[] = [];
  let oldLine = hunk.oldStart;
  let newLine = hunk.newStart;
  let removed: Side[] = [];
  let added: Side[] = [];
  const flush = () => {
    for (let i = 0; i < Math.max(removed.length, added.length); i++)
      rows.push({ before: removed[i] ?? null, after: added[i] ?? null });
    removed = [];
    added = [];
  };
  for (const line of hunk.lines) {
    const text = line.slice(1);
    if (line.startsWith('-')) removed.push({ line: oldLine++, text, changed: true });
    else if (line.startsWith('+')) added.push({ line: newLine++, text, changed: true });
    else if (line.startsWith(' ')) {
      flush();
      rows.push({
        before: { line: oldLine++, text, changed: false },
        after: { line: newLine++, text, changed: false },
      });
    }
    // "\ No newline at end of file" belongs to the line before it
  }
  flush();
  return rows;
}

function readable(part: string): ReturnType<typeof parsePatch> {
  try {
    return parsePatch(part);
  } catch {
    return [];
  }
}
