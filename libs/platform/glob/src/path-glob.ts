import { RE2JS } from 're2js';

/**
 * Path globs as the sandbox `glob` tool takes them from an agent, compiled to
 * RE2 (re2js): matching takes time linear in the path whatever the pattern.
 * picomatch compiled them to JavaScript regular expressions, which backtrack:
 * `*a*a*a*a*a*a*a*a*a*a*b` against a name of forty `a`s ran for half a minute
 * on the event loop every tenant shares.
 *
 * - `*` any run of characters within one path segment (no `/`), also none,
 *   also names that start with `.`; `?` one such character;
 * - `**` (exactly two) as a whole segment: any number of segments, also none
 *   (`**` + `/x` matches `x` and `a/b/x`; `a/**` `a` and everything below
 *   it); elsewhere (`a**b`) it is `*`;
 * - `[…]` one character of the class: ranges, `[!…]` or `[^…]` for none of
 *   them (never `/`), POSIX names (`[[:alpha:]]`); `]` first is itself;
 * - `{a,b}` either alternative, nested, possibly holding `/` and `**`; a
 *   brace without a comma is itself;
 * - `\x` the character x; parentheses, `|`, `+`, `@`, `!` are themselves,
 *   except where picomatch read an extglob (`@(`, `!(`, `+(`, `*(`, `?(`) or
 *   a leading `!` (negation): those are refused rather than silently read
 *   another way, and so are brace ranges (`{1..3}`).
 */
export interface PathGlob {
  matches(path: string): boolean;
}

/** The pattern cannot be used; the message says why, in words for whoever wrote it. */
export class GlobSyntaxError extends Error {}

/** Compiling is linear in the pattern, and matching costs up to its length per character of the path: a bound on both. */
export const MAX_GLOB_LENGTH = 1000;

/** RE2's own names inside `[[:name:]]`. */
const POSIX_CLASSES = new Set([
  'alnum',
  'alpha',
  'ascii',
  'blank',
  'cntrl',
  'digit',
  'graph',
  'lower',
  'print',
  'punct',
  'space',
  'upper',
  'word',
  'xdigit',
]);
const RANGE = /^(?:-?\d+|[A-Za-z])\.\.(?:-?\d+|[A-Za-z])(?:\.\.-?\d+)?$/;
const ANY_DEPTH = '(?:[^/]*/)*';
const ANYTHING = '(?s:.*)';

/** Throws GlobSyntaxError, saying what in the pattern cannot be used. */
export function compilePathGlob(pattern: string): PathGlob {
  const source = globSource(pattern);
  let regex: RE2JS;
  try {
    regex = RE2JS.compile(source);
  } catch (error) {
    // none known: the translation escapes what RE2 would read, but if RE2 refuses, the agent hears why
    throw new GlobSyntaxError((error as Error).message.replace(/^error parsing regexp: /, ''));
  }
  return { matches: (path) => regex.testExact(path) };
}

/** The RE2 source of a glob, for the whole path (the caller anchors it). */
function globSource(pattern: string): string {
  if (pattern.length > MAX_GLOB_LENGTH)
    throw new GlobSyntaxError(`the pattern is longer than ${MAX_GLOB_LENGTH} characters`);
  let chars = [...pattern];
  while (chars[0] === '.' && chars[1] === '/') chars = chars.slice(2);
  if (chars[0] === '!')
    throw new GlobSyntaxError(
      'a leading "!" (negation) is not supported; write "\\!" to match a name that starts with "!"',
    );
  return new Translation(chars).emit(0, chars.length, true, true);
}

class Translation {
  /** where each class `[` closes */
  private readonly classEnd = new Map<number, number>();
  /** each brace `{` that closes and holds a comma: where its commas and its `}` are */
  private readonly braces = new Map<number, { commas: number[]; close: number }>();
  private readonly escaped = new Set<number>();

  constructor(private readonly chars: string[]) {
    const open: { at: number; commas: number[] }[] = [];
    for (let i = 0; i < chars.length; i++) {
      const char = chars[i];
      if (char === '\\' && i + 1 < chars.length) {
        this.escaped.add(i);
        i++;
      } else if (char === '[') {
        const end = this.classEndFrom(i);
        if (end !== -1) {
          this.classEnd.set(i, end);
          i = end;
        }
      } else if (char === '{') {
        open.push({ at: i, commas: [] });
      } else if (char === ',' && open.length > 0) {
        open.at(-1)!.commas.push(i);
      } else if (char === '}' && open.length > 0) {
        const brace = open.pop()!;
        if (brace.commas.length > 0) this.braces.set(brace.at, { commas: brace.commas, close: i });
        else if (RANGE.test(chars.slice(brace.at + 1, i).join(''))) {
          throw new GlobSyntaxError(
            `brace ranges such as "${chars.slice(brace.at, i + 1).join('')}" are not supported; list the alternatives ("{1,2,3}")`,
          );
        }
      }
    }
  }

  /** The `]` that closes a class opened at `start`, or -1: then `[` is itself. */
  private classEndFrom(start: number): number {
    const chars = this.chars;
    let i = start + 1;
    if (chars[i] === '!' || chars[i] === '^') i++;
    // a `]` first is one of the class
    if (chars[i] === ']') i++;
    while (i < chars.length && chars[i] !== ']') {
      if (chars[i] === '\\') i += 2;
      else i = this.posixEnd(i) ?? i + 1;
    }
    return i < chars.length ? i : -1;
  }

  /** After a `[:name:]` that starts at `at`, or null when none does. */
  private posixEnd(at: number): number | null {
    const chars = this.chars;
    if (chars[at] !== '[' || chars[at + 1] !== ':') return null;
    const close = chars.indexOf(']', at + 2);
    return close > at + 3 && chars[close - 1] === ':' ? close + 1 : null;
  }

  /** `chars[from, to)` as RE2; `segmentStart`/`segmentEnd`: a `/` or the pattern's edge lies just outside. */
  emit(from: number, to: number, segmentStart: boolean, segmentEnd: boolean): string {
    const chars = this.chars;
    let out = '';
    let i = from;
    while (i < to) {
      const char = chars[i]!;
      if (this.escaped.has(i)) {
        out += literal(chars[i + 1]!);
        i += 2;
      } else if (this.classEnd.has(i)) {
        const end = this.classEnd.get(i)!;
        out += this.characterClass(i + 1, end);
        i = end + 1;
      } else if (this.braces.has(i)) {
        const { commas, close } = this.braces.get(i)!;
        const starts = [i + 1, ...commas.map((c) => c + 1)];
        const ends = [...commas, close];
        const before = i === from ? segmentStart : chars[i - 1] === '/';
        const after = close + 1 === to ? segmentEnd : chars[close + 1] === '/';
        out += `(?:${starts.map((s, k) => this.emit(s, ends[k]!, before, after)).join('|')})`;
        i = close + 1;
      } else if (char === '*') {
        let end = i;
        while (end < to && chars[end] === '*') end++;
        this.refuseExtglob(end);
        const wholeSegment =
          (i === from ? segmentStart : chars[i - 1] === '/') && (end === to ? segmentEnd : chars[end] === '/');
        if (end - i !== 2 || !wholeSegment) {
          out += '[^/]*';
          i = end;
        } else if (end < to) {
          // `**/`: any number of whole segments, also none
          out += ANY_DEPTH;
          i = end + 1;
        } else {
          out += ANYTHING;
          i = end;
        }
      } else if (char === '/' && to === chars.length && to - i === 3 && chars[i + 1] === '*' && chars[i + 2] === '*') {
        // a trailing `/**`: the directory itself too, as picomatch has it
        out += `(?:/${ANYTHING})?`;
        i = to;
      } else if (char === '?') {
        this.refuseExtglob(i + 1);
        out += '[^/]';
        i++;
      } else {
        if (char === '@' || char === '+' || char === '!') this.refuseExtglob(i + 1);
        out += literal(char);
        i++;
      }
    }
    return out;
  }

  private refuseExtglob(at: number): void {
    if (this.chars[at] === '(') {
      throw new GlobSyntaxError(
        `extglobs such as "${this.chars[at - 1]}(…)" are not supported; use braces ("{a,b}"), or write "\\(" to match a parenthesis`,
      );
    }
  }

  /** The class between `[` and `]` (exclusive) as an RE2 class; a negated one never matches `/`. */
  private characterClass(from: number, to: number): string {
    const chars = this.chars;
    let i = from;
    const negated = chars[i] === '!' || chars[i] === '^';
    if (negated) i++;
    let items = '';
    while (i < to) {
      const posix = this.posixEnd(i);
      if (posix !== null) {
        const name = chars.slice(i + 2, posix - 2).join('');
        if (!POSIX_CLASSES.has(name))
          throw new GlobSyntaxError(`"[:${name}:]" is not a character class; known: ${[...POSIX_CLASSES].join(', ')}`);
        items += `[:${name}:]`;
        i = posix;
        continue;
      }
      const [low, next] = this.classChar(i, to);
      if (chars[next] === '-' && next + 1 < to) {
        const [high, after] = this.classChar(next + 1, to);
        if (low.codePointAt(0)! > high.codePointAt(0)!)
          throw new GlobSyntaxError(`the range "${low}-${high}" runs backwards`);
        items += `${classLiteral(low)}-${classLiteral(high)}`;
        i = after;
      } else {
        items += classLiteral(low);
        i = next;
      }
    }
    return negated ? `[^${items}/]` : `[${items}]`;
  }

  /** One character of a class (escaped or not) and where the next begins. */
  private classChar(at: number, to: number): [string, number] {
    return this.chars[at] === '\\' && at + 1 < to ? [this.chars[at + 1]!, at + 2] : [this.chars[at]!, at + 1];
  }
}

function literal(char: string): string {
  return /[\\.+*?()|[\]{}^$]/.test(char) ? `\\${char}` : char;
}

function classLiteral(char: string): string {
  return /[\\\]^[-]/.test(char) ? `\\${char}` : char;
}

/** How long one slice of matching may hold the event loop before other requests get a turn. */
const SLICE_MS = 10;

/**
 * The paths `glob` matches, in order. Matching is linear, but a walk's worth
 * of paths still costs a noticeable while: it goes in slices, letting other
 * requests in between, and stops (null) once `signal` aborts.
 */
export async function matchingPaths(
  glob: PathGlob,
  paths: readonly string[],
  signal?: AbortSignal,
): Promise<string[] | null> {
  const found: string[] = [];
  let sliceStart = performance.now();
  for (let i = 0; i < paths.length; i++) {
    if (glob.matches(paths[i]!)) found.push(paths[i]!);
    if ((i & 63) === 63 && performance.now() - sliceStart > SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (signal?.aborted) return null;
      sliceStart = performance.now();
    }
  }
  return found;
}
