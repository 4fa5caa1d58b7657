import { parse, type ArithmeticWord, type ParsedScript, type Word, type WordPart } from 'unbash';
import { firstError } from './syntax';

// bash reads some text again when it runs: an arithmetic expression, the
// subscript of a[…] and ${a[…]}, and a name with a subscript given to
// test -v, [[ -v ]], [[ … -eq … ]], declare, printf -v, read, unset, wait -p, a
// nameref or a variable later used in arithmetic. The substitutions in that
// text run then, even where quotes kept them from running when the line was
// read (`test -v 'a[$(rm x)]'`). So any `$(…)` or backtick in such text, quoted
// or not, is read as code.

/** Where a word's expansion stands in its literal text: its own commands are read where it is. */
const EXPANSION = '$_';
// More substitutions than this in one text, or a longer one, are decided as unknown rather than
// parsed: each parse reads at most this much of the text.
const MAX_SUBSTITUTIONS = 32;
const MAX_SUBSTITUTION_LENGTH = 4_096;

/** The text a word leaves after quote removal, each expansion in it standing as `$_`. */
export function literalText(node: Word | ArithmeticWord | WordPart): string {
  switch (node.type) {
    case 'Word':
    case 'ArithmeticWord':
      return node.parts ? node.parts.map(literalText).join('') : node.value;
    case 'Literal':
    case 'SingleQuoted':
    case 'AnsiCQuoted':
      return node.value;
    case 'DoubleQuoted':
    case 'LocaleString':
      return node.parts.map(literalText).join('');
    case 'Glob':
      return node.kind === 'bracket' ? `[${node.parts.map(literalText).join('')}]` : node.value;
    case 'BraceExpansion':
    case 'ExtendedGlob':
      return node.text;
    default:
      return EXPANSION;
  }
}

/** A name whose subscript holds code, somewhere in the text: the code runs wherever bash takes the text for a name. */
export function mayRunInSubscript(text: string): boolean {
  // one pass, as a regular expression here would take time quadratic in the text
  let depth = 0;
  for (let at = 0; at < text.length; at++) {
    const c = text[at]!;
    if (c === '[' && (depth > 0 || /[A-Za-z0-9_]/.test(text[at - 1] ?? ''))) depth++;
    else if (c === ']' && depth > 0) depth--;
    else if (
      depth > 0 &&
      (text.startsWith('$(', at) || c === '`' || text.startsWith('${!', at) || text.startsWith('@P}', at))
    )
      return true;
  }
  return false;
}

/** `${!x}` or `${x@P}`: the value of a variable is read as a name or as a prompt string, either of which may run code. */
function readsVariableAsCode(text: string): boolean {
  if (text.includes('${!')) return true;
  for (let open = text.indexOf('${'); open >= 0; ) {
    const close = text.indexOf('}', open);
    if (close < 0) return false;
    if (text.slice(close - 2, close) === '@P') return true;
    open = text.indexOf('${', close);
  }
  return false;
}

/** The `[KEY]` of an element of a compound assignment (`a=([KEY]=value)`), or null. */
export function elementKey(text: string): string | null {
  return /^(\[[^]*\])\+?=/.exec(text)?.[1] ?? null;
}

export interface HiddenCode {
  readonly scripts: readonly ParsedScript[];
  /** code that cannot be read: a substitution that does not parse, or a variable's value run as code */
  readonly unknown: boolean;
}

/** Every command substitution in text bash evaluates, wherever it stands. */
export function substitutionsIn(text: string): HiddenCode {
  const scripts: ParsedScript[] = [];
  const fromVariable = readsVariableAsCode(text);
  for (let at = 0; at < text.length; at++) {
    if (!text.startsWith('$(', at) && text[at] !== '`') continue;
    if (scripts.length >= MAX_SUBSTITUTIONS) return { scripts, unknown: true };
    const found = substitutionAt(text.slice(at, at + MAX_SUBSTITUTION_LENGTH));
    if (!found) return { scripts, unknown: true };
    if (found.script) scripts.push(found.script);
    at += found.length - 1;
  }
  return { scripts, unknown: fromVariable };
}

/** The substitution `rest` starts with, read as bash reads it; null when it does not parse. */
function substitutionAt(rest: string): { script: ParsedScript | null; length: number } | null {
  const parsed = parse(`: ${rest}`);
  const command = parsed.commands[0]?.command;
  const word = command?.type === 'Command' ? command.suffix[0] : undefined;
  const part = word?.type === 'Word' ? word.parts?.[0] : undefined;
  // $((…)) is arithmetic: the substitutions inside it are found as the scan goes on
  if (part?.type === 'ArithmeticExpansion' && part.pos === 2) return { script: null, length: 1 };
  if (part?.type !== 'CommandExpansion' || part.pos !== 2 || !part.script) return null;
  const broken =
    (parsed.errors ?? []).some((error) => error.pos >= part.pos && error.pos < part.end) || firstError(part.script);
  return broken ? null : { script: part.script, length: part.end - part.pos };
}
