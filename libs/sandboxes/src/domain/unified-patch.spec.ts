import { createTwoFilesPatch } from 'diff';
import { describe, expect, it } from 'vitest';
import { planPatch, PatchError } from './unified-patch';

const diffOf = (before: string | null, after: string | null, path = 'src/a.js') =>
  createTwoFilesPatch(
    before === null ? '/dev/null' : `a/${path}`,
    after === null ? '/dev/null' : `b/${path}`,
    before ?? '',
    after ?? '',
  );

function refused(run: () => unknown): PatchError {
  try {
    run();
  } catch (error) {
    if (error instanceof PatchError) return error;
    throw error;
  }
  throw new Error('the patch was not refused');
}

describe('planPatch', () => {
  const before = 'one\ntwo\nthree\n';
  const after = 'one\n2\nthree\n';

  it('changes a file, creates one and deletes one', () => {
    expect(planPatch('src/a.js', diffOf(before, after), before)).toEqual({
      kind: 'modify',
      content: after,
      added: 1,
      removed: 1,
    });
    expect(planPatch('src/a.js', diffOf(null, after), null)).toMatchObject({ kind: 'create', content: after });
    expect(planPatch('src/a.js', diffOf(before, null), before)).toMatchObject({ kind: 'delete', removed: 3 });
  });

  it('reports a diff applied already instead of failing or applying it twice', () => {
    expect(planPatch('src/a.js', diffOf(before, after), after)).toEqual({ kind: 'already-applied' });
    expect(planPatch('src/a.js', diffOf(null, after), after)).toEqual({ kind: 'already-applied' });
    expect(planPatch('src/a.js', diffOf(before, null), null)).toEqual({ kind: 'already-applied' });
  });

  it('refuses what does not apply, saying which line differs', () => {
    const error = refused(() => planPatch('src/a.js', diffOf(before, after), 'one\nTWO\nthree\n'));
    expect(error.code).toBe('PATCH_DOES_NOT_APPLY');
    expect(error.message).toContain('expects line 2 to be "two" but it is "TWO"');
    expect(refused(() => planPatch('src/a.js', diffOf(before, after), null)).message).toContain('does not exist');
    expect(refused(() => planPatch('src/a.js', diffOf(null, after), 'other\n')).code).toBe('PATCH_DOES_NOT_APPLY');
  });

  it('refuses text that is no unified diff, or one for several files', () => {
    expect(refused(() => planPatch('src/a.js', 'please change two to 2', before)).code).toBe('PATCH_INVALID');
    const two = diffOf(before, after) + diffOf(before, after, 'src/b.js');
    expect(refused(() => planPatch('src/a.js', two, before)).message).toContain('changes 2 files');
  });

  it('applies a diff of 20,000 changed lines intact', () => {
    const lines = Array.from({ length: 12_000 }, (_, i) => `line ${i}`);
    const old = lines.join('\n') + '\n';
    const changed = lines.map((line, i) => (i < 10_000 ? `${line} changed` : line)).join('\n') + '\n';
    // one hunk, written out as a tool would: every old line removed, every new one added
    const diff = [
      '--- a/src/a.js',
      '+++ b/src/a.js',
      '@@ -1,10000 +1,10000 @@',
      ...lines.slice(0, 10_000).map((l) => `-${l}`),
      ...lines.slice(0, 10_000).map((l) => `+${l} changed`),
      '',
    ].join('\n');
    const plan = planPatch('src/a.js', diff, old);
    expect(plan).toMatchObject({ kind: 'modify', added: 10_000, removed: 10_000 });
    expect(plan.kind === 'modify' && plan.content).toBe(changed);
  });
});
