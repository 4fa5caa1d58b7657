import { MULTI_CALL } from './runner-grammars';
import type { ArgPattern } from './shell-rule';
import { basename, type ShellWord } from './shell-word';

/** For a program name, the absolute paths that stand for it (Codex's `host_executable`). */
export type HostPaths = ReadonlyMap<string, readonly string[]>;

/** The host paths the rules carry; the last rule that gives them for a name wins, as in Codex. */
export function hostPathsOf(
  rules: Iterable<{ readonly program: string; readonly paths?: readonly string[] }>,
): HostPaths {
  const paths = new Map<string, readonly string[]>();
  for (const rule of rules) if (rule.paths) paths.set(rule.program, rule.paths);
  return paths;
}

/**
 * How a rule's program names the program a command runs, in the order Codex
 * consults them; a later tier decides only when no rule of an earlier one
 * matched the command:
 *  0. the same string (Codex's exact match);
 *  1. an absolute path whose last part is the rule's name, among the rule's
 *     host paths when it has them (Codex's basename fallback);
 *  2. beyond Codex: a relative path ending in the name, or a name or path that
 *     resolves in the sandbox (`resolved`: its real path, null when not found)
 *     to the same file as the rule's program.
 * Tier 2 can only make a decision stricter, since a command no rule names is allowed.
 */
export function programTier(
  ruleProgram: string,
  program: string,
  resolved: ReadonlyMap<string, string | null>,
  hosts: HostPaths,
): 0 | 1 | 2 | null {
  if (ruleProgram === program) return 0;
  const bareRule = !ruleProgram.includes('/');
  if (bareRule && codexFallback(ruleProgram, program, hosts)) return 1;
  if (bareRule && !hosts.has(ruleProgram) && !program.startsWith('/') && basename(program) === ruleProgram) return 2;
  return sameFile(ruleProgram, program, resolved) ? 2 : null;
}

export function programMatches(
  ruleProgram: string,
  program: string,
  resolved: ReadonlyMap<string, string | null>,
  hosts: HostPaths,
): boolean {
  return programTier(ruleProgram, program, resolved, hosts) !== null;
}

/**
 * The rules Codex consults for a program, without the sandbox (tiers 0 and 1):
 * those for the same string, then for an absolute path those for its last part,
 * when the host paths let that path stand for it.
 */
export function codexCandidates<T>(
  program: string,
  byProgram: ReadonlyMap<string, readonly T[]>,
  hosts: HostPaths,
): readonly T[] {
  const exact = byProgram.get(program) ?? [];
  const name = fileName(program);
  if (name === null || name === program || !codexFallback(name, program, hosts)) return exact;
  return [...exact, ...(byProgram.get(name) ?? [])];
}

function codexFallback(name: string, program: string, hosts: HostPaths): boolean {
  if (!program.startsWith('/') || fileName(program) !== name) return false;
  const paths = hosts.get(name);
  return !paths || paths.some((path) => samePath(path, program));
}

function sameFile(ruleProgram: string, program: string, resolved: ReadonlyMap<string, string | null>): boolean {
  const ruleFile = resolved.get(ruleProgram) ?? null;
  const file = resolved.get(program) ?? null;
  if (ruleFile === null || ruleFile !== file) return false;
  // One file called by many names (busybox, a multi-call coreutils) acts as the name it is
  // called by: the same file matches only where it is known by one of the two names, and a
  // multi-call binary called by its own name runs its first argument, decided on its own.
  const name = basename(file);
  if (MULTI_CALL.has(name)) return basename(program) === basename(ruleProgram);
  return name === basename(program) || name === basename(ruleProgram);
}

// A path's parts as Rust's Path compares them: repeated and trailing slashes and `.` parts do not count.
function parts(path: string): string[] {
  return path.split('/').filter((part, index) => part !== '' && (part !== '.' || index === 0));
}

export function samePath(a: string, b: string): boolean {
  const [left, right] = [parts(a), parts(b)];
  return (
    a.startsWith('/') === b.startsWith('/') &&
    left.length === right.length &&
    left.every((part, i) => part === right[i])
  );
}

/** The last part of a path as Rust's `Path::file_name` gives it: null when that is `..` or there is none. */
export function fileName(path: string): string | null {
  const last = parts(path).at(-1);
  return last === undefined || last === '..' || last === '.' ? null : last;
}

/** Names whose real path step 2 needs: every program written and every rule's program. */
export function programNames(programs: Iterable<string>, rules: Iterable<{ readonly program: string }>): string[] {
  const names = new Set<string>();
  for (const program of programs) names.add(program);
  for (const rule of rules) names.add(rule.program);
  return [...names];
}

export type ArgsMatch = 'yes' | 'no' | { readonly unknown: ShellWord };

/** Codex's prefix match; a word only known at run time may be anything, even several words or none. */
export function argsMatch(patterns: readonly ArgPattern[], args: readonly ShellWord[]): ArgsMatch {
  for (let index = 0; index < patterns.length; index++) {
    const arg = args[index];
    if (!arg) return 'no';
    if (arg.kind === 'dynamic') return { unknown: arg };
    const pattern = patterns[index]!;
    if (typeof pattern === 'string' ? pattern !== arg.value : !pattern.includes(arg.value)) return 'no';
  }
  return 'yes';
}
