import { RE2JS } from 're2js';

/** Longer patterns are refused: compiling is linear in the pattern, and nobody needs a novel to match an argument. */
export const MAX_PATTERN_LENGTH = 1000;

/** A compiled argument regex: `test` says whether the value contains a match. */
export interface Pattern {
  test(value: string): boolean;
}

/**
 * Compiles a policy regex with RE2 (re2js): matching takes time linear in the
 * value, whatever the pattern. JavaScript's backtracking engine does not:
 * `^(a+)+$` against forty `a`s and a `!` runs for minutes, and policy runs on
 * every call of every tenant on one event loop. RE2 syntax is JavaScript's
 * without backreferences and lookaround, which are refused here with the
 * engine's own reason. Throws an Error saying why a pattern cannot be used.
 */
export function compilePattern(source: string): Pattern {
  if (source.length > MAX_PATTERN_LENGTH)
    throw new Error(`the pattern is longer than ${MAX_PATTERN_LENGTH} characters`);
  try {
    return RE2JS.compile(source);
  } catch (error) {
    // "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"
    throw new Error((error as Error).message.replace(/^error parsing regexp: /, ''));
  }
}
