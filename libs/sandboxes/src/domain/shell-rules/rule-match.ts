import { MULTI_CALL } from './runner-grammars';
import type { ArgPattern } from './shell-rule';
import { basename, type ShellWord } from './shell-word';

/**
 * Whether a rule's program names the program a command runs. `resolved` maps
 * a name or path to its real path in the sandbox (null: not found). A name in
 * a rule also matches any path ending in that name, as Codex's basename
 * fallback does; that can only make a decision stricter, since a command no
 * rule names is allowed anyway.
 */
export function programMatches(
  ruleProgram: string,
  program: string,
  resolved: ReadonlyMap<string, string | null>,
): boolean {
  if (ruleProgram === program) return true;
  if (!ruleProgram.includes('/') && basename(program) === ruleProgram) return true;
  const ruleFile = resolved.get(ruleProgram) ?? null;
  const file = resolved.get(program) ?? null;
  if (ruleFile === null || ruleFile !== file) return false;
  // One file called by many names (busybox, a multi-call coreutils) acts as the name it is
  // called by: the same file matches only where it is known by one of the two names, and a
  // multi-call binary called by its own name runs its first argument, decided on its own.
  const fileName = basename(file);
  if (MULTI_CALL.has(fileName)) return basename(program) === basename(ruleProgram);
  return fileName === basename(program) || fileName === basename(ruleProgram);
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
