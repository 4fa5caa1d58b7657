/**
 * Name globs for servers and tools (policy rules, caveat tokens): `*` is any
 * run of characters (also none), `?` exactly one, everything else literal; the
 * whole name must match, case matters. A character is a Unicode code point, so
 * `?` matches one emoji.
 */
export function isNameGlob(pattern: string): boolean {
  return pattern.includes('*') || pattern.includes('?');
}

const ANY_RUN = -1;
const ANY_ONE = -2;

export type NameGlob = (name: string) => boolean;

/**
 * Compiles a glob once. Not a RegExp: `^.*a.*a.*a.*b$` backtracks in
 * polynomial time on a long name, and the name comes from the caller. This
 * two-pointer match is O(name × pattern) at worst and allocates nothing.
 */
export function compileNameGlob(pattern: string): NameGlob {
  const codes: number[] = [];
  for (const char of pattern) {
    const code = char === '*' ? ANY_RUN : char === '?' ? ANY_ONE : char.codePointAt(0)!;
    // `**` means the same as `*`; one is enough for the backtracking below
    if (code === ANY_RUN && codes[codes.length - 1] === ANY_RUN) continue;
    codes.push(code);
  }
  return (name) => matchCodes(codes, name);
}

function matchCodes(codes: readonly number[], name: string): boolean {
  let p = 0;
  let n = 0;
  // where the last `*` was seen, and where in the name it is retried from
  let starP = -1;
  let starN = 0;
  while (n < name.length) {
    const code = name.codePointAt(n)!;
    const expected = p < codes.length ? codes[p] : undefined;
    if (expected === ANY_RUN) {
      starP = p++;
      starN = n;
    } else if (expected === ANY_ONE || expected === code) {
      p++;
      n += width(code);
    } else if (starP >= 0) {
      p = starP + 1;
      starN += width(name.codePointAt(starN)!);
      n = starN;
    } else {
      return false;
    }
  }
  while (p < codes.length && codes[p] === ANY_RUN) p++;
  return p === codes.length;
}

function width(code: number): number {
  return code > 0xffff ? 2 : 1;
}
