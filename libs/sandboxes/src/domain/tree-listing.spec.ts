import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { asText, compareEntries, isBrowsablePath, parseTreeListing } from './tree-listing';

const repo = mkdtempSync(join(tmpdir(), 'aileron-tree-listing-'));
const env = { PATH: '/usr/bin:/bin', HOME: repo, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
const git = (args: string[], input?: string) =>
  execFileSync('git', [`--git-dir=${repo}`, ...args], { env, input, encoding: 'utf8' });
execFileSync('git', ['init', '-q', '--bare', repo], { env });
afterAll(() => rmSync(repo, { recursive: true, force: true }));

/** A tree as git itself writes it: the listing below is real `ls-tree -z -l` output. */
function aTree(): string {
  const blob = (text: string) => git(['hash-object', '-w', '--stdin'], text).trim();
  const sub = git(['mktree', '-z'], `100644 blob ${blob('inner\n')}\tinner.txt\0`).trim();
  return git(
    ['mktree', '-z'],
    [
      `100644 blob ${blob('hello\n')}\tname with\ttab and spaces.md`,
      `100755 blob ${blob('#!/bin/sh\n')}\trun.sh`,
      `120000 blob ${blob('run.sh')}\tlink`,
      `040000 tree ${sub}\tlib`,
    ]
      .map((line) => `${line}\0`)
      .join(''),
  ).trim();
}

describe('a directory of a snapshot', () => {
  it('reads every kind of entry, its size and its name whatever characters it holds', () => {
    const entries = parseTreeListing(git(['ls-tree', '-z', '-l', aTree()]));
    expect(entries.sort(compareEntries).map(({ name, kind, size }) => ({ name, kind, size }))).toEqual([
      { name: 'lib', kind: 'directory', size: null },
      { name: 'link', kind: 'symlink', size: 6 },
      { name: 'name with\ttab and spaces.md', kind: 'file', size: 6 },
      { name: 'run.sh', kind: 'executable', size: 10 },
    ]);
    expect(entries.every((e) => /^[0-9a-f]{40}$/.test(e.object))).toBe(true);
  });

  it('takes only relative paths without empty, "." or ".." parts, nor a leading "-"', () => {
    for (const good of ['', 'a', 'src/a.ts', 'dir/.hidden', 'a b/c'])
      expect(isBrowsablePath(good), JSON.stringify(good)).toBe(true);
    for (const bad of ['/etc', '../x', 'a/../b', './a', 'a//b', 'a/', '-n', 'a\nb', 'a\0b'])
      expect(isBrowsablePath(bad), JSON.stringify(bad)).toBe(false);
  });

  it('shows text as text and anything else as binary', () => {
    expect(asText(Buffer.from('héllo\n'))).toBe('héllo\n');
    expect(asText(Buffer.from([0x68, 0x00, 0x69]))).toBeNull();
    expect(asText(Buffer.from([0xff, 0xfe, 0x41]))).toBeNull();
  });
});
