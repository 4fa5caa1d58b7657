import fc from 'fast-check';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { compilePathGlob, GlobSyntaxError, matchingPaths, MAX_GLOB_LENGTH } from './path-glob';

/** pattern, path, whether it matches, and where picomatch answers otherwise, why */
const TABLE: [string, string, boolean, string?][] = [
  ['*.ts', 'a.ts', true],
  ['*.ts', 'src/a.ts', false],
  ['*', '.env', true],
  ['*.*', 'a.b.c', true],
  ['a?c', 'abc', true],
  ['a?c', 'a/c', false],
  ['**', 'a/b/c', true],
  ['**/*.ts', 'a.ts', true],
  ['**/*.ts', 'src/deep/b.ts', true],
  ['**/*.ts', '.github/x.ts', true],
  ['**/.*', 'a/.env', true],
  ['src/**', 'src', true],
  ['src/**', 'src/a/b', true],
  ['src/**', 'srcs/a', false],
  ['a/**/b', 'a/b', true],
  ['a/**/b', 'a/x/y/b', true],
  ['a/**/b', 'a/xb', false],
  ['a**b', 'axxb', true],
  ['a**b', 'a/b', false],
  ['***/b', 'a/b', true],
  ['***/b', 'x/a/b', false],
  ['**b', 'a/b', false],
  ['**{a,b}', 'x/a', false, 'a "**" before a brace crosses directories there, and only there'],
  ['a/**b', 'a/xb', true],
  ['a/**b', 'a/x/b', false],
  ['*/**', 'a', true, 'a trailing "/**" is optional there except after a "*"'],
  ['./src/*.ts', 'src/a.ts', true],
  ['[abc]', 'b', true],
  ['[a-c]x', 'bx', true],
  ['[a-c]x', 'dx', false],
  ['[!a]x', 'bx', true, 'it reads "[!a]" as the class of "!" and "a"'],
  ['[!a]x', 'ax', false, 'it reads "[!a]" as the class of "!" and "a"'],
  ['[^a]x', 'bx', true],
  ['a[^b]c', 'a/c', false],
  ['[[:digit:]][[:alpha:]]', '5q', true],
  ['[]]', ']', true],
  ['[a-]', '-', true],
  ['[\\]]', ']', true],
  ['a[b', 'a[b', true],
  ['{a,b}', 'a', true],
  ['{a,b}', 'c', false],
  ['*.{ts,tsx}', 'x.tsx', true],
  ['{a,{b,c}}d', 'cd', true],
  ['{,a}b', 'b', true],
  ['{a}', '{a}', true],
  ['{a,b', '{a,b', true],
  ['src/{a,b/**}/*.ts', 'src/b/c/d.ts', true],
  ['{**/a,b}', 'x/y/a', true],
  ['{b,**/a}', 'a', true, 'inside a brace "**/" needs at least one directory'],
  ['a{b,c/d}e', 'ac/de', true],
  ['\\*', '*', true],
  ['\\*', 'a', false],
  ['a\\?', 'a?', true],
  ['a\\?', 'ab', false],
  ['app/(auth)/**', 'app/(auth)/login/page.tsx', true, 'it reads "(auth)" as a regex group'],
  ['app/(auth)/**', 'app/auth/login/page.tsx', false, 'it reads "(auth)" as a regex group'],
  ['a|b', 'a', false],
  ['a|b', 'a|b', true],
  ['a+b', 'a+b', true],
  ['a+b', 'aab', false],
  ['a.b', 'axb', false],
  ['$a^', '$a^', true],
  ['é?', 'éa', true],
  ['*', 'a\nb', true],
  ['A*', 'a', false],
];

describe('compilePathGlob', () => {
  it.each(TABLE)('%j against %j: %j', (pattern, path, expected) => {
    expect(compilePathGlob(pattern).matches(path)).toBe(expected);
  });

  it('answers as picomatch did on the table, except where the table says why not', () => {
    for (const [pattern, path, expected, differs] of TABLE) {
      // picomatch also matches any path equal to the pattern itself
      const picomatchSays = differs || pattern === path ? !expected : expected;
      if (pattern !== path || differs)
        expect(
          picomatch(pattern, { dot: true })(path),
          `${pattern} against ${path}${differs ? `: ${differs}` : ''}`,
        ).toBe(picomatchSays);
    }
  });

  it('answers as picomatch does on random patterns and paths', () => {
    const token = fc.constantFrom(
      'a',
      'b',
      '.',
      '-',
      '/',
      '*',
      '**',
      '?',
      '[ab]',
      '[a-b]',
      '[^a]',
      '[[:alpha:]]',
      '[]a]',
      '{a,b}',
      '{,.}',
      '{b,a/}',
      '{a,{b,*}}',
      '\\*',
      '\\.',
      'a/**',
      '**/',
    );
    const pattern = fc.array(token, { minLength: 1, maxLength: 8 }).map((parts) => parts.join(''));
    // segments picomatch treats alike: none empty, none `.` or `..` (a walk makes none of those)
    const segment = fc.stringMatching(/^[ab.*\]-]{1,4}$/).filter((s) => s !== '.' && s !== '..');
    const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => parts.join('/'));
    fc.assert(
      fc.property(pattern, path, (p, s) => {
        // the table's differences, which random patterns would find again
        fc.pre(p !== s && !p.includes('**{') && !p.endsWith('*/**'));
        expect(compilePathGlob(p).matches(s), `${p} against ${s}`).toBe(picomatch(p, { dot: true })(s));
      }),
      { numRuns: 5000, seed: 29 },
    );
  });

  it('is linear where picomatch backtracks: a long name against many stars answers at once', () => {
    const glob = compilePathGlob('*a*a*a*a*a*a*a*a*a*a*b');
    const started = performance.now();
    for (let i = 0; i < 100; i++) expect(glob.matches('a'.repeat(40 + i))).toBe(false);
    expect(glob.matches(`${'a'.repeat(40)}b`)).toBe(true);
    // picomatch takes about half a minute on the first name alone
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it.each([
    ['!*.ts', 'a leading "!" (negation) is not supported'],
    ['@(a|b)', 'extglobs such as "@(…)" are not supported'],
    ['x*(a)', 'extglobs such as "*(…)" are not supported'],
    ['?(a)', 'extglobs such as "?(…)" are not supported'],
    ['a+(b)', 'extglobs such as "+(…)" are not supported'],
    ['a!(b)', 'extglobs such as "!(…)" are not supported'],
    ['file{1..3}', 'brace ranges such as "{1..3}" are not supported'],
    ['[z-a]', 'the range "z-a" runs backwards'],
    ['[[:nope:]]', '"[:nope:]" is not a character class'],
  ])('refuses %s, saying why', (pattern, reason) => {
    expect(() => compilePathGlob(pattern)).toThrow(GlobSyntaxError);
    expect(() => compilePathGlob(pattern)).toThrow(reason);
  });

  it(`refuses a pattern longer than ${MAX_GLOB_LENGTH} characters`, () => {
    expect(() => compilePathGlob(`${'*a'.repeat(MAX_GLOB_LENGTH / 2)}b`)).toThrow(
      `the pattern is longer than ${MAX_GLOB_LENGTH} characters`,
    );
  });

  it('escaped, the refused forms are plain characters', () => {
    expect(compilePathGlob('\\!x').matches('!x')).toBe(true);
    expect(compilePathGlob('@\\(a)').matches('@(a)')).toBe(true);
    expect(compilePathGlob('f\\{1..3}').matches('f{1..3}')).toBe(true);
  });
});

describe('matchingPaths', () => {
  // as many as a walk answers at most
  const paths = Array.from({ length: 50_000 }, (_, i) => `src/dir${i % 100}/file-${i}.${i % 2 ? 'ts' : 'js'}`);

  it('keeps the matching paths in order, letting other work in while it goes through a walk’s worth', async () => {
    let otherWorkRan = false;
    setImmediate(() => (otherWorkRan = true));
    const found = await matchingPaths(compilePathGlob('**/*.ts'), paths);
    expect(found).toEqual(paths.filter((p) => p.endsWith('.ts')));
    expect(otherWorkRan).toBe(true);
  });

  it('stops when the caller gives up', async () => {
    const abort = new AbortController();
    setImmediate(() => abort.abort());
    expect(await matchingPaths(compilePathGlob('**/*.ts'), paths, abort.signal)).toBeNull();
  });
});
