import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { blobId } from '../runner-protocol';
import { changesAgainst, fastImportStream, inBatches, isTreePath, parseLsTree, quotePath } from './snapshot-tree';

const repo = mkdtempSync(join(tmpdir(), 'aileron-fast-import-'));
const env = { PATH: '/usr/bin:/bin', HOME: repo, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
execFileSync('git', ['init', '-q', '--bare', repo]);
const git = (args: string[], input?: Buffer) =>
  execFileSync('git', [`--git-dir=${repo}`, ...args], { env, input, maxBuffer: 64 * 1024 * 1024 });
afterAll(() => rmSync(repo, { recursive: true, force: true }));

const when = new Date('2026-11-28T12:00:00Z');
const who = { name: 'Agent', email: 'agent@aileron.invalid' };

describe('snapshot trees', () => {
  it('refuses paths a tree must not hold: absolute, empty parts, . and .., .git in any case, NUL', () => {
    for (const bad of [
      '',
      '/etc/passwd',
      'a//b',
      'a/./b',
      '../x',
      'a/..',
      '.git/config',
      'x/.GIT/hooks/y',
      'x/.Git',
      'a\0b',
    ])
      expect(isTreePath(bad), bad).toBe(false);
    for (const good of [
      'a',
      'a/b.txt',
      '.gitignore',
      '.github/workflows/ci.yml',
      'x/.git-keep',
      'naïve/ü.txt',
      'with space',
      'new\nline',
      '"quoted"',
    ])
      expect(isTreePath(good), good).toBe(true);
  });

  it('builds with fast-import exactly the tree it was given, whatever the names and bytes (property, real git)', () => {
    const name = fc
      .stringMatching(/^[^/\0]{1,12}$/)
      .filter((part) => part !== '.' && part !== '..' && part.toLowerCase() !== '.git');
    const path = fc.array(name, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('/'));
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.record({ path, bytes: fc.uint8Array({ maxLength: 64 }), link: fc.boolean() }), {
          selector: (f) => f.path,
          minLength: 1,
          maxLength: 8,
        }),
        (files) => {
          // a path may not be both a file and a directory
          const paths = files.map((f) => f.path);
          fc.pre(paths.every((p) => !paths.some((q) => q.startsWith(`${p}/`))));
          const ref = `refs/heads/p${Math.random().toString(36).slice(2)}`;
          const changes = files.map((f) => ({
            path: f.path,
            mode: f.link ? ('120000' as const) : ('100644' as const),
            data: Buffer.from(f.link && f.bytes.length === 0 ? [0x78] : f.bytes),
          }));
          git(
            ['fast-import', '--quiet', '--done'],
            fastImportStream({
              ref,
              parent: null,
              author: who,
              committer: who,
              at: when,
              message: 'write: many',
              changes,
            }),
          );
          const tree = parseLsTree(git(['ls-tree', '-r', '-z', '--full-tree', ref]).toString('utf8'));
          expect([...tree.keys()].sort()).toEqual([...paths].sort());
          for (const change of changes)
            expect(tree.get(change.path)).toEqual({ mode: change.mode, sha: blobId(change.data) });
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a name cannot end a command early or start another: a newline, a quote, a backslash and a fake command in it stay a name', () => {
    const hostile = 'a\nD README.md\nM 100644 inline "x"\\';
    expect(quotePath(hostile)).toBe('"a\\012D README.md\\012M 100644 inline \\"x\\"\\\\"');
    const ref = 'refs/heads/hostile';
    const stream = fastImportStream({
      ref,
      parent: null,
      author: { name: 'Evil <x@y>\nmark :1', email: 'e>vil@x' },
      committer: who,
      at: when,
      message: 'write: x\ndone\n',
      changes: [
        { path: 'README.md', mode: '100644', data: Buffer.from('kept\n') },
        { path: hostile, mode: '100644', data: Buffer.from('data 5\nhello') },
      ],
    });
    git(['fast-import', '--quiet', '--done'], stream);
    expect([...parseLsTree(git(['ls-tree', '-r', '-z', '--full-tree', ref]).toString('utf8')).keys()].sort()).toEqual(
      ['README.md', hostile].sort(),
    );
    expect(git(['log', '-1', '--format=%an <%ae>%n%B', ref]).toString('utf8')).toBe(
      'Evil x@ymark :1 <evil@x>\nwrite: x\ndone\n\n',
    );
  });

  it('changes against a tree: added, modified, mode changed, deleted; nothing for what is the same', () => {
    const before = new Map([
      ['same', { mode: '100644', sha: 'a'.repeat(40) }],
      ['changed', { mode: '100644', sha: 'b'.repeat(40) }],
      ['chmod', { mode: '100644', sha: 'c'.repeat(40) }],
      ['gone', { mode: '100644', sha: 'd'.repeat(40) }],
    ]);
    const changes = changesAgainst(before, [
      { path: 'same', mode: '100644', sha: 'a'.repeat(40), size: 1 },
      { path: 'changed', mode: '100644', sha: 'e'.repeat(40), size: 1 },
      { path: 'chmod', mode: '100755', sha: 'c'.repeat(40), size: 1 },
      { path: 'new', mode: '120000', sha: 'f'.repeat(40), size: 1 },
    ]);
    expect(changes).toEqual([
      { path: 'changed', mode: '100644', sha: 'e'.repeat(40), size: 1, before: 'b'.repeat(40) },
      { path: 'chmod', mode: '100755', sha: 'c'.repeat(40), size: 1, before: 'c'.repeat(40) },
      { path: 'new', mode: '120000', sha: 'f'.repeat(40), size: 1, before: null },
      { path: 'gone', deleted: true },
    ]);
  });

  it('batches by bytes, a larger item alone', () => {
    expect(
      inBatches([{ size: 4 }, { size: 4 }, { size: 20 }, { size: 1 }], 10).map((b) => b.map((i) => i.size)),
    ).toEqual([[4, 4], [20], [1]]);
  });
});
