import type { Assignment, ArrayValue, Word, WordPart } from 'unbash';

/**
 * One word of an argv. Static: the shell produces exactly this string. Dynamic:
 * the shell computes it at run time (expansions, globs, braces, a leading
 * tilde), possibly as zero or several words; `text` is how it was written.
 */
export type ShellWord =
  | { readonly kind: 'static'; readonly value: string }
  | { readonly kind: 'dynamic'; readonly text: string };

/** The word's string when the shell produces exactly that, else null. */
export function staticValue(word: ShellWord | undefined): string | null {
  return word?.kind === 'static' ? word.value : null;
}

export const staticWord = (value: string): ShellWord => ({ kind: 'static', value });
export const dynamicWord = (text: string): ShellWord => ({ kind: 'dynamic', text });

export function wordOf(word: Word): ShellWord {
  if (startsWithTilde(word)) return dynamicWord(word.text);
  // a word without parts is plain text whose backslashes the parser removed
  if (!word.parts || word.parts.every(isQuotedOrLiteral)) return staticWord(word.value);
  return dynamicWord(word.text);
}

/** An argument written as an assignment (`export A=1`, `alias x=rm`) is one word. */
export function argumentOf(argument: Word | Assignment): ShellWord {
  if (argument.type === 'Word') return wordOf(argument);
  const value = assignedValue(argument.value);
  const index = argument.index ? wordOf(argument.index) : null;
  if (value.kind === 'dynamic' || index?.kind === 'dynamic') return dynamicWord(argument.text);
  const subscript = index ? `[${index.value}]` : '';
  return staticWord(`${argument.name}${subscript}${argument.append ? '+=' : '='}${value.value}`);
}

function assignedValue(value: Word | ArrayValue): ShellWord {
  return value.type === 'Word' ? wordOf(value) : dynamicWord('(…)');
}

// `~` and `~user` expand to a home directory, which only the running shell knows
function startsWithTilde(word: Word): boolean {
  const first = word.parts?.[0];
  if (first) return first.type === 'Literal' && first.text.startsWith('~');
  return word.text.startsWith('~');
}

function isQuotedOrLiteral(part: WordPart): boolean {
  switch (part.type) {
    case 'Literal':
    case 'SingleQuoted':
    case 'AnsiCQuoted':
      return true;
    case 'DoubleQuoted':
    case 'LocaleString':
      return part.parts.every((child) => child.type === 'Literal');
    default:
      return false;
  }
}

/** The argv as strings; a dynamic word as it was written. */
export function renderWords(words: readonly ShellWord[]): string[] {
  return words.map((word) => (word.kind === 'static' ? word.value : word.text));
}

/** How a person would type the argv, on one line of at most `limit` characters. */
export function displayCommand(words: readonly ShellWord[], limit = 160): string {
  const text = printable(words.map((word) => (word.kind === 'static' ? shellQuote(word.value) : word.text)).join(' '));
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

/** Control characters escaped, so a reason stays one line on a terminal. */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what it replaces
  return text.replace(/[\u0000-\u001f\u007f]/g, (c) =>
    c === '\n' ? '\\n' : c === '\t' ? '\\t' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

export function shellQuote(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
