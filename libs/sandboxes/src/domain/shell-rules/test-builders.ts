import { analyzeCommand } from './command-analysis';
import { decideCommand, programsToResolve } from './command-decision';
import type { ArgPattern, CommandDecision, ShellDecision, ShellRule } from './shell-rule';

// Builders for the specs: rules, a sandbox's file system as the control plane
// would resolve names in it, and the two steps run together.

export function shellRule(command: string, decision: ShellDecision, extra: Partial<ShellRule> = {}): ShellRule {
  const [program, ...args] = command.split(' ') as [string, ...ArgPattern[]];
  return {
    program,
    args: args.map((arg) => (typeof arg === 'string' && arg.includes('|') ? arg.split('|') : arg)),
    decision,
    ...extra,
  };
}

/**
 * A sandbox: what PATH lookup then realpath gives for a name or a path. By
 * default a Debian-like system with merged /usr (/bin → /usr/bin).
 */
export type Sandbox = (nameOrPath: string) => string | null;

const DEBIAN_PROGRAMS = [
  'rm',
  'git',
  'ls',
  'cat',
  'echo',
  'env',
  'bash',
  'nice',
  'xargs',
  'find',
  'sudo',
  'timeout',
  'curl',
  'npm',
];

export const debianSandbox: Sandbox = (name) => {
  if (name === 'sh' || name === '/bin/sh' || name === '/usr/bin/sh') return '/usr/bin/dash';
  const path = name.includes('/') ? name.replace(/^\/bin\//, '/usr/bin/') : `/usr/bin/${name}`;
  return DEBIAN_PROGRAMS.some((program) => path === `/usr/bin/${program}`) ? path : null;
};

/** A sandbox whose names are exactly the given ones (anything else is not found). */
export function sandboxOf(files: Readonly<Record<string, string>>): Sandbox {
  return (name) => files[name] ?? null;
}

export function decide(
  command: string,
  rules: readonly ShellRule[],
  sandbox: Sandbox = debianSandbox,
): CommandDecision {
  const analysis = analyzeCommand(command);
  const resolved = new Map(programsToResolve(analysis, rules).map((name) => [name, sandbox(name)] as const));
  return decideCommand(analysis, rules, resolved);
}

/** The programs of every simple command found, as written (a word known only at run time in angle brackets). */
export function programsOf(command: string): string[] {
  return analyzeCommand(command).commands.map(({ words: [program] }) =>
    program?.kind === 'static' ? program.value : `<${program?.text}>`,
  );
}
