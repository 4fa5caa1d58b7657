import {
  forEachChild,
  parse,
  type ArithmeticWord,
  type Command,
  type LiteralPart,
  type ParameterExpansionPart,
  type ParsedScript,
  type Redirection,
  type SyntaxNode,
  type Word,
} from 'unbash';
import { elementKey, literalText, mayRunInSubscript, substitutionsIn } from './evaluated-text';
import { innerCommands } from './inner-commands';
import { ShellSyntaxError } from './shell-errors';
import { argumentOf, dynamicWord, renderWords, shellQuote, staticWord, wordOf, type ShellWord } from './shell-word';
import { firstError } from './syntax';

export interface SimpleCommand {
  /** the argv; words[0] is the program */
  readonly words: readonly ShellWord[];
  /** what runs it, outermost first, e.g. ["sudo", "bash -c"]; empty when the line itself does */
  readonly via: readonly string[];
}

export interface CommandAnalysis {
  readonly command: string;
  /** every simple command the shell could run, in the order written */
  readonly commands: readonly SimpleCommand[];
}

// Code inside code (bash -c "eval '…'") deeper than this is decided as unknown.
const MAX_DEPTH = 12;
// Alias expansions per command line; past it the rest are decided as unknown.
const MAX_ALIAS_EXPANSIONS = 64;
// Readings of options multiply through nested wrappers (sudo -Z sudo -Z …): past this many
// commands the line is decided as unknown rather than analysed without end.
const MAX_COMMANDS = 2_000;

const TOO_MANY = 'more commands than can be checked';

/** Step 1: every simple command the shell could run. Throws ShellSyntaxError where bash would refuse the line. */
export function analyzeCommand(command: string): CommandAnalysis {
  const script = parse(command);
  const error = firstError(script);
  if (error)
    throw new ShellSyntaxError(
      `bash cannot parse this command: ${error.message} (${where(command, error.pos)})`,
      error.pos,
    );
  const collector = new Collector();
  collector.script(script, []);
  collector.expandAliases();
  return { command, commands: collector.commands };
}

// ${!#} and its kin name a positional parameter by a number bash computes; any other ${!x} names what x holds.
const NUMERIC_PARAMETERS: ReadonlySet<string> = new Set(['#', '?', '$', '!', '-']);

class Collector {
  readonly commands: SimpleCommand[] = [];
  private readonly aliases = new Map<string, { value: ShellWord; via: string }>();
  /** words read as a subscript or arithmetic already, which need no second look */
  private readonly evaluatedWords = new WeakSet<Word>();

  script(script: ParsedScript, via: readonly string[]): void {
    const visit = (node: SyntaxNode): void => {
      if (node.type === 'Command') this.command(node, via);
      if (node.type === 'ParameterExpansion') this.parameter(node, via);
      if (node.type === 'Assignment' && node.index) this.evaluated(node.index, via, 'subscript');
      if (node.type === 'ArithmeticWord') this.evaluated(node, via, 'arithmetic');
      if (node.type === 'ArrayValue') {
        for (const element of node.elements) {
          const key = elementKey(literalText(element));
          if (key) this.hidden(key, [...via, 'subscript']);
        }
      }
      // a word may be a name with a subscript that test -v, declare, read or arithmetic later evaluates
      if (node.type === 'Word' && !this.evaluatedWords.has(node)) {
        const text = literalText(node);
        if (mayRunInSubscript(text)) this.hidden(text, [...via, 'subscript']);
      }
      forEachChild(node, visit);
    };
    visit(script);
  }

  private parameter(node: ParameterExpansionPart, via: readonly string[]): void {
    const operation = node.operation;
    // ${x@P} expands a prompt string, which runs the substitutions in the variable's value
    if (operation?.type === 'Transform' && operation.operand.value === 'P')
      this.unknown(node.text, [...via, 'prompt expansion']);
    // ${!x} reads the variable x names, and a name with a subscript runs the code in it: which one is only known at run time
    const keys = operation?.type === 'Names' || node.index?.value === '@' || node.index?.value === '*';
    if (node.prefix === '!' && !keys && !NUMERIC_PARAMETERS.has(node.parameter))
      this.unknown(node.text, [...via, 'indirect expansion']);
    if (node.index) this.evaluated(node.index, via, 'subscript');
    if (operation?.type === 'Slice') {
      this.evaluated(operation.offset, via, 'arithmetic');
      if (operation.length) this.evaluated(operation.length, via, 'arithmetic');
    }
  }

  /** Text bash evaluates as a subscript or arithmetic: its substitutions run, quoted or not. */
  private evaluated(node: Word | ArithmeticWord, via: readonly string[], kind: string): void {
    if (node.type === 'Word') this.evaluatedWords.add(node);
    this.hidden(literalText(node), [...via, kind]);
  }

  private hidden(text: string, via: readonly string[]): void {
    const { scripts, unknown } = substitutionsIn(text);
    if (!scripts.length && !unknown) return;
    if (via.length > MAX_DEPTH) return this.unknown(text, via);
    for (const script of scripts) this.script(script, via);
    if (unknown) this.unknown(text, via);
  }

  private command(node: Command, via: readonly string[]): void {
    // a line of assignments only runs no program; its substitutions are visited as children
    if (!node.name) return;
    const args = node.suffix.flatMap((item) =>
      item.type === 'Word' || item.type === 'Assignment' ? [argumentOf(item)] : [],
    );
    // unbash reads `X=<(…) rm` as X= and a program <(…); bash assigns the substitution's path to X and runs rm
    const last = node.prefix.at(-1);
    const assignedSubstitution =
      last?.type === 'Assignment' && last.end === node.name.pos && node.name.parts?.[0]?.type === 'ProcessSubstitution';
    const words = assignedSubstitution ? args : [wordOf(node.name), ...args];
    if (words.length) this.invocation(words, standardInput(node.redirects), via);
  }

  private invocation(words: readonly ShellWord[], stdin: ShellWord | null, via: readonly string[]): void {
    if (this.commands.length >= MAX_COMMANDS) return this.tooMany();
    this.commands.push({ words, via });
    for (const inner of innerCommands({ words, stdin })) {
      if (via.length >= MAX_DEPTH)
        return this.unknown(inner.kind === 'argv' ? renderWords(inner.words).join(' ') : '…', via);
      if (inner.kind === 'argv') this.invocation(inner.words, stdin, [...via, inner.via]);
      else if (inner.kind === 'code') this.code(inner.code, [...via, inner.via]);
      else {
        this.aliases.set(inner.name, { value: inner.value, via: inner.via });
        this.code(inner.value, [...via, inner.via]);
      }
    }
  }

  private code(code: ShellWord, via: readonly string[]): void {
    if (code.kind === 'dynamic') return this.unknown(code.text, via);
    const script = parse(code.value);
    // bash would refuse this string when it runs it; our parser may be the one that is wrong, so it is unknown code
    if (firstError(script)) return this.unknown(code.value, [...via, 'unparsable']);
    this.script(script, via);
  }

  private unknown(text: string, via: readonly string[]): void {
    if (this.commands.length >= MAX_COMMANDS) return this.tooMany();
    this.commands.push({ words: [dynamicWord(text)], via });
  }

  private tooMany(): void {
    if (this.commands.at(-1)?.via[0] !== TOO_MANY)
      this.commands.push({ words: [dynamicWord('(the rest of the line)')], via: [TOO_MANY] });
  }

  /**
   * bash run non-interactively expands no alias, but an alias may be defined
   * for a shell that does: a command named like an alias is read again with
   * the alias's value in front of its arguments.
   */
  expandAliases(): void {
    let expansions = 0;
    for (let index = 0; index < this.commands.length; index++) {
      const { words, via } = this.commands[index]!;
      const [program, ...args] = words;
      const alias = program?.kind === 'static' ? this.aliases.get(program.value) : undefined;
      // bash does not expand an alias inside its own expansion
      if (!alias || via.includes(alias.via)) continue;
      if (++expansions > MAX_ALIAS_EXPANSIONS || via.length >= MAX_DEPTH)
        return this.unknown(renderWords(words).join(' '), via);
      const rest = args.map((arg) => (arg.kind === 'static' ? shellQuote(arg.value) : arg.text)).join(' ');
      this.code(alias.value.kind === 'static' ? staticWord(`${alias.value.value} ${rest}`) : alias.value, [
        ...via,
        alias.via,
      ]);
    }
  }
}

/** What a command reads on descriptor 0: a here-string or here-document, unknown input, or null for a file. */
function standardInput(redirects: readonly Redirection[]): ShellWord | null {
  let input: ShellWord | null = dynamicWord('(standard input)');
  for (const redirect of redirects) {
    if (redirect.descriptor && !(redirect.descriptor.type === 'FileDescriptor' && redirect.descriptor.value === 0))
      continue;
    if (redirect.type === 'HereString') input = redirect.target ? wordOf(redirect.target) : input;
    else if (redirect.type === 'HereDoc') input = hereDocument(redirect);
    else if (redirect.operator === '<' || redirect.operator === '<>')
      input =
        redirect.target && wordOf(redirect.target).kind === 'static' ? null : dynamicWord(redirect.target?.text ?? '');
    else if (redirect.operator === '<&') input = dynamicWord(redirect.target?.text ?? '');
  }
  return input;
}

function hereDocument(redirect: Extract<Redirection, { type: 'HereDoc' }>): ShellWord {
  const body = redirect.body;
  if (redirect.delimiter?.quoted) return staticWord(body.text);
  if (!body.parts) return staticWord(body.text.replace(/\\([$`\\\n])/g, (_, c: string) => (c === '\n' ? '' : c)));
  const literals = body.parts.filter((part): part is LiteralPart => part.type === 'Literal');
  return literals.length === body.parts.length
    ? staticWord(literals.map((part) => part.value).join(''))
    : dynamicWord(body.text);
}

function where(source: string, position: number): string {
  const before = source.slice(0, position);
  const line = before.split('\n').length;
  return `line ${line}, column ${position - before.lastIndexOf('\n')}`;
}
