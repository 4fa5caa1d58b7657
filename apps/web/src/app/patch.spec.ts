import { describe, expect, it } from 'vitest';
import { rowsOf, splitGitPatch } from './patch';

/** What `git show --format= --patch --root -M` prints for a snapshot that deletes, adds a binary and renames with a change. */
const PATCH = [
  'diff --git a/gone.txt b/gone.txt',
  'deleted file mode 100644',
  'index 587be6b..0000000',
  '--- a/gone.txt',
  '+++ /dev/null',
  '@@ -1 +0,0 @@',
  '-x',
  'diff --git a/logo.png b/logo.png',
  'new file mode 100644',
  'index 0000000..1082cb2',
  'Binary files /dev/null and b/logo.png differ',
  'diff --git a/notes.txt b/notes2.txt',
  'similarity index 50%',
  'rename from notes.txt',
  'rename to notes2.txt',
  'index e5c5c55..f903b0d 100644',
  '--- a/notes.txt',
  '+++ b/notes2.txt',
  '@@ -1,3 +1,2 @@',
  ' line one',
  '-line two',
  '-line three',
  '+line 2',
  '\\ No newline at end of file',
  'diff --git a/a b.txt b/a b.txt',
  'new file mode 100644',
  'index 0000000..e69de29',
  '',
].join('\n');

describe('a snapshot patch, file by file', () => {
  it('keeps every file apart, a binary one and one without lines included', () => {
    expect(
      splitGitPatch(PATCH).map(({ name, renamedFrom, status, binary, hunks }) => ({
        name,
        renamedFrom,
        status,
        binary,
        hunks: hunks.length,
      })),
    ).toEqual([
      { name: 'gone.txt', renamedFrom: null, status: 'deleted', binary: false, hunks: 1 },
      { name: 'logo.png', renamedFrom: null, status: 'added', binary: true, hunks: 0 },
      { name: 'notes2.txt', renamedFrom: 'notes.txt', status: 'renamed', binary: false, hunks: 1 },
      { name: 'a b.txt', renamedFrom: null, status: 'added', binary: false, hunks: 0 },
    ]);
    expect(splitGitPatch('')).toEqual([]);
    // hunks that do not add up are named as unreadable, not thrown at the page
    const broken = splitGitPatch('diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a\n+b\n+c\n');
    expect(broken).toMatchObject([{ name: 'x', unreadable: true, hunks: [] }]);
  });

  it('puts removed lines beside the lines that replaced them, unchanged lines on both sides', () => {
    const renamed = splitGitPatch(PATCH)[2]!;
    expect(rowsOf(renamed.hunks[0]!)).toEqual([
      { before: { line: 1, text: 'line one', changed: false }, after: { line: 1, text: 'line one', changed: false } },
      { before: { line: 2, text: 'line two', changed: true }, after: { line: 2, text: 'line 2', changed: true } },
      { before: { line: 3, text: 'line three', changed: true }, after: null },
    ]);
    const deleted = splitGitPatch(PATCH)[0]!;
    expect(rowsOf(deleted.hunks[0]!)).toEqual([{ before: { line: 1, text: 'x', changed: true }, after: null }]);
  });
});
