import { printable } from './shell-word';

// What a workspace's shell rules say and what a command line is decided.

export type ShellDecision = 'allow' | 'prompt' | 'forbidden';

/** One position of an argument prefix: a literal, or a list of alternatives (as in Codex). */
export type ArgPattern = string | readonly string[];

export interface ShellRule {
  /** a name such as "rm", or an absolute path such as "/usr/bin/rm" */
  readonly program: string;
  /** the argument prefix after the program */
  readonly args: readonly ArgPattern[];
  readonly decision: ShellDecision;
  readonly justification?: string;
  /**
   * For a program given by name: the absolute paths that may stand for it
   * (Codex's `host_executable`); without it, any absolute path ending in the name.
   */
  readonly paths?: readonly string[];
  /** where the rule came from, e.g. ".rules line 3" */
  readonly source?: string;
}

export interface CommandDecision {
  readonly decision: ShellDecision;
  /** the rule that decided, or null when none did */
  readonly rule: ShellRule | null;
  /** the argv that decided; a word known only at run time appears as written */
  readonly command: readonly string[];
  /** one line, fit for stderr, naming the rule */
  readonly reason: string;
}

const SEVERITY: Record<ShellDecision, number> = { allow: 0, prompt: 1, forbidden: 2 };

export function severity(decision: ShellDecision): number {
  return SEVERITY[decision];
}

/** The rule as a person would write the command it names, e.g. `git [push|fetch]`. */
export function describeRule(rule: ShellRule): string {
  const args = rule.args.map((arg) => (typeof arg === 'string' ? arg : `[${arg.join('|')}]`));
  const where = rule.source ? ` (${rule.source})` : '';
  return printable(`"${[rule.program, ...args].join(' ')}"${where}`);
}
