import type { CommandAnalysis, SimpleCommand } from './command-analysis';
import { possibleProgramArguments } from './inner-commands';
import { argsMatch, hostPathsOf, programMatches, programNames, programTier, type HostPaths } from './rule-match';
import { describeRule, severity, type CommandDecision, type ShellDecision, type ShellRule } from './shell-rule';
import { basename, displayCommand, printable, renderWords, staticValue, type ShellWord } from './shell-word';

// Arguments of programs the analysis does not know, resolved besides the programs; past this
// many in one line the rest are compared by name and path only.
const MAX_ARGUMENTS_RESOLVED = 256;

/** The names and paths step 2 needs resolved in the sandbox (PATH lookup, then realpath). */
export function programsToResolve(analysis: CommandAnalysis, rules: readonly ShellRule[]): string[] {
  const programs = analysis.commands.flatMap(({ words: [program] }) =>
    program?.kind === 'static' ? [program.value] : [],
  );
  if (!rules.some((rule) => rule.decision !== 'allow')) return programNames(programs, rules);
  const programArguments = analysis.commands.flatMap(({ words }) =>
    possibleProgramArguments(words).map((index) => (words[index] as { value: string }).value),
  );
  return programNames(
    [...programs, ...new Set(programArguments)].slice(0, programs.length + MAX_ARGUMENTS_RESOLVED),
    rules,
  );
}

/**
 * Step 2: the strictest decision over every simple command (forbidden > prompt
 * > allow; the first written among equals). A name missing from `resolved`
 * counts as not found.
 */
export function decideCommand(
  analysis: CommandAnalysis,
  rules: readonly ShellRule[],
  resolved: ReadonlyMap<string, string | null>,
): CommandDecision {
  const anyStrictRule = rules.some((rule) => rule.decision !== 'allow');
  const hosts = hostPathsOf(rules);
  let decided: CommandDecision | null = null;
  for (const command of analysis.commands) {
    const decision = decideSimple(command, rules, { resolved, hosts }, anyStrictRule);
    if (!decided || outranks(decision, decided)) decided = decision;
  }
  return decided ?? { decision: 'allow', rule: null, command: [], reason: 'no program to run' };
}

function outranks(a: CommandDecision, b: CommandDecision): boolean {
  const difference = severity(a.decision) - severity(b.decision);
  return difference > 0 || (difference === 0 && a.rule !== null && b.rule === null);
}

interface Programs {
  readonly resolved: ReadonlyMap<string, string | null>;
  readonly hosts: HostPaths;
}

function decideSimple(
  command: SimpleCommand,
  rules: readonly ShellRule[],
  programs: Programs,
  anyStrictRule: boolean,
): CommandDecision {
  const [program, ...args] = command.words;
  const shown = `${displayCommand(command.words)}${command.via.length ? ` (run by ${printable(command.via.join(' → '))})` : ''}`;
  const argv = renderWords(command.words);
  if (program?.kind !== 'static') {
    // no rule can be checked against a program chosen at run time: a person sees the exact line
    const decision: ShellDecision = anyStrictRule ? 'prompt' : 'allow';
    return {
      decision,
      rule: null,
      command: argv,
      reason: `${shown}: the program is only known at run time${anyStrictRule ? ', so a person decides' : ''}`,
    };
  }
  const tiers: ShellRule[][] = [[], [], []];
  for (const rule of rules) {
    const tier = programTier(rule.program, program.value, programs.resolved, programs.hosts);
    if (tier !== null) tiers[tier]!.push(rule);
  }
  let certain: ShellRule | null = null;
  let possible: { rule: ShellRule; unknown: ShellWord } | null = null;
  for (const tier of tiers) {
    for (const rule of tier) {
      const match = argsMatch(rule.args, args);
      if (match === 'yes') {
        if (!certain || severity(rule.decision) > severity(certain.decision)) certain = rule;
      } else if (
        match !== 'no' &&
        rule.decision !== 'allow' &&
        (!possible || severity(rule.decision) > severity(possible.rule.decision))
      ) {
        possible = { rule, unknown: match.unknown };
      }
    }
    // as Codex: `/usr/bin/git` falls back to the rules for `git` only when no rule for `/usr/bin/git` matched
    if (certain) break;
  }
  if (severity('prompt') > severity(certain?.decision ?? 'allow')) {
    if (possible) {
      const unknown = displayCommand([possible.unknown], 60);
      const reason = `${shown}: ${unknown} is only known at run time and may make it match rule ${describeRule(possible.rule)} (${possible.rule.decision}), so a person decides`;
      return { decision: 'prompt', rule: possible.rule, command: argv, reason };
    }
    const wrapped = wrappedProgram(command.words, rules, programs);
    if (wrapped) {
      const name = printable(basename(program.value));
      const reason = `${shown}: ${name} is not a program this analysis knows, and its argument ${displayCommand([wrapped.argument], 60)} is the program of rule ${describeRule(wrapped.rule)} (${wrapped.rule.decision}), so a person decides`;
      return { decision: 'prompt', rule: wrapped.rule, command: argv, reason };
    }
  }
  if (!certain) return { decision: 'allow', rule: null, command: argv, reason: `${shown}: no rule names it` };
  const why = certain.justification ? `: ${printable(certain.justification.replace(/\s+/g, ' ').trim())}` : '';
  return {
    decision: certain.decision,
    rule: certain,
    command: argv,
    reason: `${shown}: ${VERB[certain.decision]} by rule ${describeRule(certain)}${why}`,
  };
}

/**
 * A program the analysis does not know may run one of its arguments, as a
 * wrapper it has never heard of would: the strictest rule whose program an
 * argument names, by name or path, with the words after it able to match.
 */
function wrappedProgram(
  words: readonly ShellWord[],
  rules: readonly ShellRule[],
  { resolved, hosts }: Programs,
): { rule: ShellRule; argument: ShellWord } | null {
  let found: { rule: ShellRule; argument: ShellWord } | null = null;
  for (const index of possibleProgramArguments(words)) {
    const argument = words[index]!;
    for (const rule of rules) {
      if (rule.decision === 'allow' || (found && severity(rule.decision) <= severity(found.rule.decision))) continue;
      if (!programMatches(rule.program, staticValue(argument)!, resolved, hosts)) continue;
      if (argsMatch(rule.args, words.slice(index + 1, index + 1 + rule.args.length)) === 'no') continue;
      found = { rule, argument };
      if (rule.decision === 'forbidden') return found;
    }
  }
  return found;
}

const VERB: Record<ShellDecision, string> = { allow: 'allowed', prompt: 'needs approval', forbidden: 'forbidden' };
