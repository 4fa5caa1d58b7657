import { applyPatch, parsePatch, reversePatch, type StructuredPatch } from 'diff';

/** What applying a diff to one file comes to. */
export type PatchPlan =
  | { kind: 'create' | 'modify'; content: string; added: number; removed: number }
  | { kind: 'delete'; added: 0; removed: number }
  /** the file already reads as the diff would leave it: nothing to do, and said so */
  | { kind: 'already-applied' };

/** A diff that cannot be applied; nothing was changed. */
export class PatchError extends Error {
  constructor(
    readonly code: 'PATCH_INVALID' | 'PATCH_DOES_NOT_APPLY',
    message: string,
  ) {
    super(message);
  }
}

const DEV_NULL = /^(a\/|b\/)?\/dev\/null$/;

function counts(patch: StructuredPatch): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const hunk of patch.hunks) {
    for (const line of hunk.lines) {
      if (line.startsWith('+')) added++;
      else if (line.startsWith('-')) removed++;
    }
  }
  return { added, removed };
}

/**
 * Plans a unified diff against one file's current text (null: the file does
 * not exist). The diff may create the file (`--- /dev/null`), delete it
 * (`+++ /dev/null`) or change it; hunks must apply exactly, since a fuzzy
 * match in someone else's code is a silent corruption. A diff that is
 * already applied is recognised by applying its reverse.
 */
export function planPatch(path: string, diff: string, current: string | null): PatchPlan {
  let patches: StructuredPatch[];
  try {
    patches = parsePatch(diff);
  } catch (error) {
    throw new PatchError(
      'PATCH_INVALID',
      `the diff is not a valid unified diff: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const withHunks = patches.filter((p) => p.hunks.length > 0);
  if (withHunks.length === 0)
    throw new PatchError(
      'PATCH_INVALID',
      'the diff has no hunks (expected a unified diff with "@@ -a,b +c,d @@" headers)',
    );
  if (withHunks.length > 1)
    throw new PatchError(
      'PATCH_INVALID',
      `the diff changes ${withHunks.length} files; patch takes one file's diff (this one: ${path})`,
    );
  const patch = withHunks[0]!;
  const creates = DEV_NULL.test(patch.oldFileName ?? '');
  const deletes = DEV_NULL.test(patch.newFileName ?? '');
  const { added, removed } = counts(patch);

  if (deletes) {
    if (current === null) return { kind: 'already-applied' };
    if (applyPatch(current, patch) === false)
      throw new PatchError(
        'PATCH_DOES_NOT_APPLY',
        `the diff deletes ${path}, but its content differs from what the diff removes`,
      );
    return { kind: 'delete', added: 0, removed };
  }
  if (creates && current !== null) {
    const created = applyPatch('', patch);
    if (created !== false && created === current) return { kind: 'already-applied' };
    throw new PatchError('PATCH_DOES_NOT_APPLY', `the diff creates ${path}, which exists already with other content`);
  }
  if (current === null && !creates)
    throw new PatchError(
      'PATCH_DOES_NOT_APPLY',
      `${path} does not exist (a diff that creates a file starts with "--- /dev/null")`,
    );

  const result = applyPatch(current ?? '', patch);
  if (result !== false) return { kind: creates ? 'create' : 'modify', content: result, added, removed };
  if (current !== null && applyPatch(current, reversePatch(patch)) !== false) return { kind: 'already-applied' };
  throw new PatchError(
    'PATCH_DOES_NOT_APPLY',
    `the diff does not apply to ${path}: ${firstMismatch(patch, current ?? '')}`,
  );
}

/** Which hunk fails, and where: what an agent needs to fix its diff. */
function firstMismatch(patch: StructuredPatch, content: string): string {
  const lines = content.split('\n');
  for (const [index, hunk] of patch.hunks.entries()) {
    const expected = hunk.lines.filter((l) => !l.startsWith('+') && !l.startsWith('\\')).map((l) => l.slice(1));
    const at = hunk.oldStart - 1;
    const mismatch = expected.findIndex((line, i) => lines[at + i] !== line);
    if (mismatch >= 0)
      return `hunk ${index + 1} (@@ -${hunk.oldStart},${hunk.oldLines}) expects line ${at + mismatch + 1} to be ${JSON.stringify(expected[mismatch])} but it is ${JSON.stringify(lines[at + mismatch] ?? '<end of file>')}`;
  }
  return 'its context lines do not match the file';
}
