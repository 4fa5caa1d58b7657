import { ShellRulesError } from './shell-errors';
import type { ArgPattern, ShellDecision, ShellRule } from './shell-rule';
import { argsMatch, programMatches } from './rule-match';
import { staticWord } from './shell-word';
import { splitShellWords } from './shlex';
import { LexError, tokenize, type Token } from './starlark-lexer';

type Value =
  | { readonly kind: 'string'; readonly value: string; readonly at: Token }
  | { readonly kind: 'list'; readonly items: readonly Value[]; readonly at: Token }
  | { readonly kind: 'none'; readonly at: Token };

// prefix_rule's parameters in Codex's order, which positional arguments follow
const PARAMETERS = ['pattern', 'decision', 'match', 'not_match', 'justification'] as const;
type Parameter = (typeof PARAMETERS)[number];
const DECISIONS: readonly ShellDecision[] = ['allow', 'prompt', 'forbidden'];
const NOTHING_RESOLVED: ReadonlyMap<string, string | null> = new Map();

/**
 * Reads the `prefix_rule(...)` calls of a Codex `.rules` file (Starlark) without
 * evaluating anything. A first token with alternatives gives one rule per
 * program, as Codex does. The `match` / `not_match` examples are checked here,
 * and a file whose example contradicts its rule is refused.
 */
export function parseCodexRules(text: string, sourceName = '.rules'): ShellRule[] {
  const fail = (at: { line: number; column: number }, detail: string): never => {
    throw new ShellRulesError(sourceName, at.line, at.column, detail);
  };
  let tokens: Token[];
  try {
    tokens = tokenize(text);
  } catch (error) {
    if (error instanceof LexError) fail(error, error.message);
    throw error;
  }
  const parser = new Parser(tokens, fail);
  const rules: ShellRule[] = [];
  for (const call of parser.calls()) rules.push(...prefixRule(call, `${sourceName} line ${call.at.line}`, fail));
  return rules;
}

interface Call {
  readonly at: Token;
  readonly args: ReadonlyMap<Parameter, Value>;
}

type Fail = (at: { line: number; column: number }, detail: string) => never;

class Parser {
  private index = 0;

  constructor(
    private readonly tokens: readonly Token[],
    private readonly fail: Fail,
  ) {}

  *calls(): Generator<Call> {
    for (;;) {
      while (this.peek().type === 'end') this.index++;
      if (this.peek().type === 'eof') return;
      yield this.call();
      const next = this.peek();
      if (next.type !== 'end' && next.type !== 'eof')
        this.fail(next, `expected the end of the statement, found ${describe(next)}`);
    }
  }

  private call(): Call {
    const name = this.next();
    if (name.type !== 'name') this.fail(name, `expected prefix_rule(...), found ${describe(name)}`);
    if (name.value !== 'prefix_rule') {
      const known = ['network_rule', 'host_executable'].includes(name.value);
      this.fail(
        name,
        known
          ? `${name.value}(...) is not supported in shell rules; only prefix_rule(...) is`
          : `only prefix_rule(...) calls are allowed, found ${describe(name)}`,
      );
    }
    this.expect('(');
    const args = new Map<Parameter, Value>();
    let positional = 0;
    while (this.peek().value !== ')' || this.peek().type !== 'punct') {
      const start = this.peek();
      const keyword = start.type === 'name' && this.tokens[this.index + 1]?.value === '=' ? start.value : null;
      if (keyword !== null) this.index += 2;
      else if (args.size > positional) this.fail(start, 'a positional argument cannot follow a keyword argument');
      const parameter = keyword ?? PARAMETERS[positional++];
      if (!parameter) this.fail(start, `prefix_rule takes at most ${PARAMETERS.length} positional arguments`);
      if (!isParameter(parameter!))
        this.fail(start, `prefix_rule has no argument "${parameter}" (it takes ${PARAMETERS.join(', ')})`);
      if (args.has(parameter as Parameter)) this.fail(start, `argument "${parameter}" is given twice`);
      args.set(parameter as Parameter, this.value());
      if (this.peek().value === ',' && this.peek().type === 'punct') this.index++;
      else if (this.peek().value !== ')') this.fail(this.peek(), `expected "," or ")", found ${describe(this.peek())}`);
    }
    this.index++;
    return { at: name, args };
  }

  private value(): Value {
    const token = this.next();
    if (token.type === 'string') return { kind: 'string', value: token.value, at: token };
    if (token.type === 'name' && token.value === 'None') return { kind: 'none', at: token };
    if (token.type === 'punct' && token.value === '[') {
      const items: Value[] = [];
      while (!(this.peek().type === 'punct' && this.peek().value === ']')) {
        items.push(this.value());
        if (this.peek().type === 'punct' && this.peek().value === ',') this.index++;
        else if (this.peek().value !== ']')
          this.fail(this.peek(), `expected "," or "]", found ${describe(this.peek())}`);
      }
      this.index++;
      return { kind: 'list', items, at: token };
    }
    const what =
      token.type === 'name'
        ? `the name "${token.value}" (variables and expressions are not supported)`
        : describe(token);
    return this.fail(token, `expected a string or a list, found ${what}`);
  }

  private expect(punct: string): void {
    const token = this.next();
    if (token.type !== 'punct' || token.value !== punct)
      this.fail(token, `expected "${punct}", found ${describe(token)}`);
  }

  private peek(): Token {
    return this.tokens[this.index]!;
  }

  private next(): Token {
    const token = this.tokens[this.index]!;
    if (token.type !== 'eof') this.index++;
    return token;
  }
}

function isParameter(name: string): name is Parameter {
  return (PARAMETERS as readonly string[]).includes(name);
}

function describe(token: Token): string {
  if (token.type === 'eof') return 'the end of the file';
  if (token.type === 'end') return token.value === ';' ? '";"' : 'the end of the line';
  if (token.type === 'string') return 'a string';
  return `"${token.value}"`;
}

function prefixRule(call: Call, source: string, fail: Fail): ShellRule[] {
  const given = (name: Parameter) => {
    const value = call.args.get(name);
    return value?.kind === 'none' ? undefined : value;
  };
  const patternValue = given('pattern') ?? fail(call.at, 'prefix_rule needs a pattern');
  const [first, ...rest] = pattern(patternValue, fail);
  const decision = decisionOf(given('decision'), fail);
  const justificationValue = given('justification');
  const justification = justificationValue ? stringOf(justificationValue, 'justification', fail) : undefined;
  if (justification !== undefined && !justification.trim())
    fail(justificationValue!.at, 'justification cannot be empty');
  const rules = (typeof first === 'string' ? [first] : first!).map((program): ShellRule => ({
    program,
    args: rest,
    decision,
    ...(justification !== undefined ? { justification } : {}),
    source,
  }));
  for (const example of examples(given('match'), 'match', fail)) {
    if (!rules.some((rule) => exampleMatches(rule, example.words)))
      fail(example.at, `the match example "${example.words.join(' ')}" does not match this rule`);
  }
  for (const example of examples(given('not_match'), 'not_match', fail)) {
    if (rules.some((rule) => exampleMatches(rule, example.words)))
      fail(example.at, `the not_match example "${example.words.join(' ')}" matches this rule`);
  }
  return rules;
}

function pattern(value: Value, fail: Fail): ArgPattern[] {
  if (value.kind !== 'list') return fail(value.at, 'pattern must be a list');
  if (!value.items.length) fail(value.at, 'pattern cannot be empty');
  return value.items.map((item): ArgPattern => {
    if (item.kind === 'string') return item.value;
    if (item.kind !== 'list') return fail(item.at, 'a pattern element must be a string or a list of strings');
    if (!item.items.length) fail(item.at, 'pattern alternatives cannot be empty');
    const alternatives = item.items.map((alternative) => stringOf(alternative, 'a pattern alternative', fail));
    return alternatives.length === 1 ? alternatives[0]! : alternatives;
  });
}

function decisionOf(value: Value | undefined, fail: Fail): ShellDecision {
  if (!value) return 'allow';
  const decision = stringOf(value, 'decision', fail);
  if (!(DECISIONS as readonly string[]).includes(decision))
    fail(value.at, `decision must be one of ${DECISIONS.join(', ')}, found "${decision}"`);
  return decision as ShellDecision;
}

function examples(value: Value | undefined, name: string, fail: Fail): { words: string[]; at: Token }[] {
  if (!value) return [];
  if (value.kind !== 'list') return fail(value.at, `${name} must be a list of examples`);
  return value.items.map((item) => {
    if (item.kind === 'string') {
      const words = splitShellWords(item.value) ?? fail(item.at, `the ${name} example has invalid shell quoting`);
      if (!words.length) fail(item.at, `a ${name} example cannot be empty`);
      return { words, at: item.at };
    }
    if (item.kind !== 'list') return fail(item.at, `a ${name} example must be a string or a list of strings`);
    if (!item.items.length) fail(item.at, `a ${name} example cannot be empty`);
    return { words: item.items.map((word) => stringOf(word, `a ${name} example word`, fail)), at: item.at };
  });
}

function stringOf(value: Value, what: string, fail: Fail): string {
  return value.kind === 'string' ? value.value : fail(value.at, `${what} must be a string`);
}

/** As Codex checks examples: the program by name or by a path ending in it, then the argument prefix. */
function exampleMatches(rule: ShellRule, [program, ...args]: readonly string[]): boolean {
  return (
    program !== undefined &&
    programMatches(rule.program, program, NOTHING_RESOLVED) &&
    argsMatch(rule.args, args.map(staticWord)) === 'yes'
  );
}
