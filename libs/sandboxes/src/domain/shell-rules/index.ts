// Shell rules: which commands a sandbox's bash tool may run. Pure: the caller
// resolves program names inside the sandbox between the two steps.
export { analyzeCommand, type CommandAnalysis, type SimpleCommand } from './command-analysis';
export { decideCommand, programsToResolve } from './command-decision';
export { parseCodexRules } from './codex-rules';
export { ShellRulesError, ShellSyntaxError } from './shell-errors';
export type { ArgPattern, CommandDecision, ShellDecision, ShellRule } from './shell-rule';
export type { ShellWord } from './shell-word';
