import { ShellRulesError } from './shell-errors';
import type { ArgPattern, ShellDecision, ShellRule } from './shell-rule';
import { argsMatch, codexCandidates, fileName, samePath, type HostPaths } from './rule-match';
import { staticWord } from './shell-word';
import { splitShellWords } from './shlex';
import type { Token } from './starlark-lexer';
import { kindName, readStarlark, type Argument, type Call, type Fail, type Value } from './starlark-module';

// The parameters of Codex's functions in their order, which positional arguments follow
const PREFIX_RULE = ['pattern', 'decision', 'match', 'not_match', 'justification'] as const;
const HOST_EXECUTABLE = ['name', 'paths'] as const;
const NETWORK_RULE = ['host', 'protocol', 'decision', 'justification'] as const;
const DECISIONS: readonly ShellDecision[] = ['allow', 'prompt', 'forbidden'];
const PROTOCOLS = new Set(['http', 'https', 'https_connect', 'http-connect', 'socks5_tcp', 'socks5_udp']);

interface Examples {
  readonly rules: readonly ShellRule[];
  readonly match: readonly Example[];
  readonly notMatch: readonly Example[];
}

interface Example {
  readonly words: readonly string[];
  readonly at: Token;
}

/**
 * Reads a Codex `.rules` file (Starlark) as Codex loads it, without running
 * anything in it (starlark-module.ts says what it may hold). A first token with
 * alternatives gives one rule per program; `host_executable` gives the host
 * paths of a program's rules; a `network_rule` that allows is read and changes
 * nothing here, any other is refused. The `match` / `not_match` examples are
 * checked once the whole file is read, as Codex checks them, and a file whose
 * example contradicts its rule is refused.
 */
export function parseCodexRules(text: string, sourceName = '.rules'): ShellRule[] {
  const fail: Fail = (at, detail) => {
    throw new ShellRulesError(sourceName, at.line, at.column, detail);
  };
  const rules: ShellRule[] = [];
  const examples: Examples[] = [];
  const hosts = new Map<string, readonly string[]>();
  for (const call of readStarlark(text, fail)) {
    if (call.name === 'prefix_rule') {
      const read = prefixRule(call, `${sourceName} line ${call.at.line}`, fail);
      rules.push(...read.rules);
      examples.push(read);
    } else if (call.name === 'host_executable') {
      const { name, paths } = hostExecutable(call, fail);
      hosts.set(name, paths);
    } else {
      networkRule(call, fail);
    }
  }
  for (const { rules: made, match, notMatch } of examples) {
    const byProgram = new Map<string, ShellRule[]>();
    for (const rule of made) {
      const same = byProgram.get(rule.program);
      if (same) same.push(rule);
      else byProgram.set(rule.program, [rule]);
    }
    for (const example of notMatch) {
      if (exampleMatches(byProgram, example.words, hosts))
        fail(example.at, `the not_match example "${example.words.join(' ')}" matches this rule`);
    }
    for (const example of match) {
      if (!exampleMatches(byProgram, example.words, hosts))
        fail(example.at, `the match example "${example.words.join(' ')}" does not match this rule`);
    }
  }
  return rules.map((rule) => (hosts.has(rule.program) ? { ...rule, paths: hosts.get(rule.program)! } : rule));
}

function prefixRule(call: Call, source: string, fail: Fail): Examples {
  const args = bind(call, PREFIX_RULE, fail);
  const patternArg = args.get('pattern') ?? fail(call.at, 'prefix_rule needs a pattern');
  const decision = decisionOf(args.get('decision'), fail);
  const justificationArg = args.get('justification');
  const justification = justificationArg && stringOf(justificationArg, 'justification', fail);
  if (justification !== undefined && !justification.trim()) fail(justificationArg!.at, 'justification cannot be empty');
  const [first, ...rest] = pattern(patternArg, fail);
  const rules = (typeof first === 'string' ? [first] : first!).map(
    (program): ShellRule => ({
      program,
      args: rest,
      decision,
      ...(justification !== undefined ? { justification } : {}),
      source,
    }),
  );
  return {
    rules,
    match: examplesOf(args.get('match'), 'match', fail),
    notMatch: examplesOf(args.get('not_match'), 'not_match', fail),
  };
}

/** Codex's `host_executable`: which absolute paths the basename fallback may take for a name. */
function hostExecutable(call: Call, fail: Fail): { name: string; paths: string[] } {
  const args = bind(call, HOST_EXECUTABLE, fail);
  const nameArg = args.get('name') ?? fail(call.at, 'host_executable needs a name');
  const pathsArg = args.get('paths') ?? fail(call.at, 'host_executable needs paths');
  const name = stringOf(nameArg, 'host_executable name', fail);
  if (!name) fail(nameArg.at, 'host_executable name cannot be empty');
  if (fileName(name) !== name) fail(nameArg.at, `host_executable name must be a bare executable name (got ${name})`);
  const paths: string[] = [];
  for (const item of listOf(pathsArg, 'host_executable paths must be a list', fail)) {
    const path = stringOf({ value: item, at: item.at }, 'a host_executable path', fail);
    if (path.startsWith('~/'))
      fail(
        item.at,
        `host_executable path ${path} is under the home directory of the machine Codex runs on; a sandbox has its own, so write the absolute path`,
      );
    if (!path.startsWith('/')) fail(item.at, `host_executable paths must be absolute (got ${path})`);
    if (fileName(path) !== name) fail(item.at, `host_executable path \`${path}\` must have basename \`${name}\``);
    if (!paths.some((known) => samePath(known, path))) paths.push(path);
  }
  return { name, paths };
}

/**
 * Codex's `network_rule`, checked as Codex checks it. A sandbox reaches the
 * network as a whole or not at all, so only a rule that allows can stand: it
 * never lets through what the sandbox's own setting stops.
 */
function networkRule(call: Call, fail: Fail): void {
  const args = bind(call, NETWORK_RULE, fail);
  const hostArg = args.get('host') ?? fail(call.at, 'network_rule needs a host');
  const protocolArg = args.get('protocol') ?? fail(call.at, 'network_rule needs a protocol');
  const decisionArg = args.get('decision') ?? fail(call.at, 'network_rule needs a decision');
  const hostProblem = networkHostProblem(stringOf(hostArg, 'network_rule host', fail));
  if (hostProblem) fail(hostArg.at, hostProblem);
  const protocol = stringOf(protocolArg, 'network_rule protocol', fail);
  if (!PROTOCOLS.has(protocol))
    fail(protocolArg.at, `network_rule protocol must be one of http, https, socks5_tcp, socks5_udp (got ${protocol})`);
  const decision = stringOf(decisionArg, 'network_rule decision', fail);
  if (![...DECISIONS, 'deny'].includes(decision))
    fail(decisionArg.at, `network_rule decision must be one of allow, prompt, forbidden, deny, found "${decision}"`);
  const justificationArg = args.get('justification');
  if (justificationArg && !stringOf(justificationArg, 'justification', fail).trim())
    fail(justificationArg.at, 'justification cannot be empty');
  if (decision !== 'allow')
    fail(
      call.at,
      `network_rule(decision="${decision}") cannot be applied here: a sandbox reaches the network as a whole or not at all (its network setting, none or egress), never host by host, so this rule would not stop anything; remove it, or give the sandbox network none`,
    );
}

// What Codex's normalize_network_rule_host refuses, in its order
function networkHostProblem(raw: string): string | null {
  let host = raw.trim();
  if (!host) return 'network_rule host cannot be empty';
  if (['://', '/', '?', '#'].some((part) => host.includes(part)))
    return 'network_rule host must be a hostname or IP literal (without scheme or path)';
  if (host.startsWith('[')) {
    const close = host.indexOf(']');
    if (close < 0) return 'network_rule host has an invalid bracketed IPv6 literal';
    const rest = host.slice(close + 1);
    if (rest && !/^:[0-9]+$/.test(rest)) return `network_rule host contains an unsupported suffix: ${raw}`;
    host = host.slice(1, close);
  } else if (/^[^:]+:[0-9]+$/.test(host)) {
    host = host.slice(0, host.indexOf(':'));
  }
  const normalized = host.replace(/\.+$/, '').trim().toLowerCase();
  if (!normalized) return 'network_rule host cannot be empty';
  if (normalized.includes('*')) return 'network_rule host must be a specific host; wildcards are not allowed';
  if (/\s/.test(normalized)) return 'network_rule host cannot contain whitespace';
  return null;
}

/** Arguments to parameters, positional ones first, as Starlark binds them. */
function bind<P extends string>(call: Call, parameters: readonly P[], fail: Fail): Map<P, Argument> {
  const bound = new Map<P, Argument>();
  call.positional.forEach((argument, index) => {
    if (index >= parameters.length)
      fail(argument.at, `${call.name} takes at most ${parameters.length} positional arguments`);
    bound.set(parameters[index]!, argument);
  });
  for (const [name, argument] of call.keywords) {
    const at = argument.keyword ?? argument.at;
    if (!(parameters as readonly string[]).includes(name))
      fail(at, `${call.name} has no argument "${name}" (it takes ${parameters.join(', ')})`);
    if (bound.has(name as P)) fail(at, `argument "${name}" is given twice`);
    bound.set(name as P, argument);
  }
  return bound;
}

function pattern(argument: Argument, fail: Fail): ArgPattern[] {
  const items = listOf(argument, 'pattern must be a list', fail);
  if (!items.length) fail(argument.at, 'pattern cannot be empty');
  return items.map((item): ArgPattern => {
    if (item.kind === 'string') return item.value;
    if (item.kind !== 'list') return fail(item.at, 'a pattern element must be a string or a list of strings');
    if (!item.items.length) fail(item.at, 'pattern alternatives cannot be empty');
    const alternatives = item.items.map((alternative) =>
      stringOf({ value: alternative, at: alternative.at }, 'a pattern alternative', fail),
    );
    return alternatives.length === 1 ? alternatives[0]! : alternatives;
  });
}

function decisionOf(argument: Argument | undefined, fail: Fail): ShellDecision {
  if (!argument) return 'allow';
  const decision = stringOf(argument, 'decision', fail);
  if (!(DECISIONS as readonly string[]).includes(decision))
    fail(argument.at, `decision must be one of ${DECISIONS.join(', ')}, found "${decision}"`);
  return decision as ShellDecision;
}

function examplesOf(argument: Argument | undefined, name: string, fail: Fail): Example[] {
  if (!argument) return [];
  return listOf(argument, `${name} must be a list of examples`, fail).map((item) => {
    if (item.kind === 'string') {
      const words = splitShellWords(item.value) ?? fail(item.at, `the ${name} example has invalid shell quoting`);
      if (!words.length) fail(item.at, `a ${name} example cannot be empty`);
      return { words, at: item.at };
    }
    if (item.kind !== 'list') return fail(item.at, `a ${name} example must be a string or a list of strings`);
    if (!item.items.length) fail(item.at, `a ${name} example cannot be empty`);
    const words = item.items.map((word) => stringOf({ value: word, at: word.at }, `a ${name} example word`, fail));
    return { words, at: item.at };
  });
}

function listOf(argument: Argument, refusal: string, fail: Fail): Value[] {
  const { value } = argument;
  if (value.kind === 'list') return value.items;
  return fail(argument.at, value.kind === 'none' ? `${refusal}, not None${LEAVE_OUT}` : refusal);
}

function stringOf(argument: Argument, what: string, fail: Fail): string {
  const { value } = argument;
  if (value.kind === 'string') return value.value;
  return fail(
    argument.at,
    `${what} must be a string${value.kind === 'none' ? `, not None${LEAVE_OUT}` : `, not ${kindName(value)}`}`,
  );
}

const LEAVE_OUT = ' (Codex refuses None too; leave an optional argument out instead)';

/** As Codex checks examples: the rules it consults for the program, then the argument prefix. */
function exampleMatches(
  byProgram: ReadonlyMap<string, readonly ShellRule[]>,
  [program, ...args]: readonly string[],
  hosts: HostPaths,
): boolean {
  const words = args.map(staticWord);
  return codexCandidates(program!, byProgram, hosts).some((rule) => argsMatch(rule.args, words) === 'yes');
}
