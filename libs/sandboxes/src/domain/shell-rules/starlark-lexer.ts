import { printable } from './shell-word';

// Tokens of a Codex `.rules` file, cut as Codex's Starlark (starlark-rust 0.13,
// Dialect::Extended with f-strings) cuts them: the same string escapes, the same
// refusals (tabs outside strings, indentation, unknown string prefixes, reserved
// words). A refusal is an `error` token where it stands, so the reader reports
// the first problem of the file, as Codex's lazy lexer does.

export type TokenType =
  | 'name'
  | 'keyword'
  | 'string'
  | 'fstring'
  | 'number'
  | 'op'
  | 'newline'
  | 'indent'
  | 'error'
  | 'eof';

export interface Token {
  readonly type: TokenType;
  /** the name, operator or decoded string; for `error`, what is wrong */
  readonly value: string;
  readonly line: number;
  readonly column: number;
}

const KEYWORDS = new Set([
  'and',
  'break',
  'continue',
  'def',
  'elif',
  'else',
  'for',
  'if',
  'in',
  'lambda',
  'load',
  'not',
  'or',
  'pass',
  'return',
]);

// Python keywords Starlark keeps out of the language
const RESERVED = new Set([
  'as',
  'assert',
  'async',
  'await',
  'class',
  'del',
  'except',
  'finally',
  'from',
  'global',
  'import',
  'is',
  'nonlocal',
  'raise',
  'try',
  'while',
  'with',
  'yield',
]);

// longest first, so `+=` is not read as `+` then `=`
const OPERATORS = [
  '//=',
  '<<=',
  '>>=',
  '**',
  '//',
  '->',
  '==',
  '!=',
  '<=',
  '>=',
  '+=',
  '-=',
  '*=',
  '/=',
  '%=',
  '&=',
  '|=',
  '^=',
  '<<',
  '>>',
  ...'.,;:=<>-+*/%()[]{}&|^~',
];

const STRING_PREFIXES: ReadonlyMap<string, { raw: boolean; format: boolean }> = new Map([
  ['r', { raw: true, format: false }],
  ['f', { raw: false, format: true }],
  ['fr', { raw: true, format: true }],
]);

const SIMPLE_ESCAPES: ReadonlyMap<string, string> = new Map([
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
  ['a', '\x07'],
  ['b', '\b'],
  ['f', '\f'],
  ['v', '\v'],
  ['"', '"'],
  ["'", "'"],
  ['\\', '\\'],
  ['\n', ''],
]);

const HEX_DIGITS: Readonly<Record<string, number>> = { x: 2, u: 4, U: 8 };

const NUMBER =
  /^(?:0[xX][0-9A-Fa-f]+|0[bB][01]+|0[oO][0-7]+|[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+|\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+)/;

export function tokenize(text: string): Token[] {
  return new Lexer(text).run();
}

class Lexer {
  private readonly tokens: Token[] = [];
  private at = 0;
  private line = 1;
  private lineStart = 0;
  private depth = 0;

  constructor(private readonly text: string) {}

  run(): Token[] {
    this.indentation();
    while (this.at < this.text.length && this.tokens.at(-1)?.type !== 'error') this.token();
    this.push('eof', '', this.at);
    return this.tokens;
  }

  private token(): void {
    const { text } = this;
    const c = text[this.at]!;
    const next = text[this.at + 1];
    if (c === ' ') {
      this.at++;
    } else if (c === '\t') {
      this.error(this.at, 'tabs are not allowed outside strings (Codex refuses them too); indent with spaces');
    } else if (c === '#') {
      while (this.at < text.length && text[this.at] !== '\n' && text[this.at] !== '\r') this.at++;
    } else if (c === '\n' || (c === '\r' && next === '\n')) {
      if (this.depth === 0) this.push('newline', '\n', this.at);
      this.at += c === '\r' ? 2 : 1;
      this.newLine();
      // inside brackets a line may be indented as it likes
      if (this.depth === 0) this.indentation();
    } else if (c === '\\' && (next === '\n' || (next === '\r' && text[this.at + 2] === '\n'))) {
      this.at += next === '\n' ? 2 : 3;
      this.newLine();
    } else if (/[A-Za-z_]/.test(c)) {
      this.word();
    } else if (c === '"' || c === "'") {
      this.string(this.at, this.at, { raw: false, format: false });
    } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(next ?? ''))) {
      this.number();
    } else {
      const operator = OPERATORS.find((candidate) => text.startsWith(candidate, this.at));
      if (!operator)
        return this.error(this.at, `${describeCharacter(text.codePointAt(this.at)!)} cannot appear outside a string`);
      if ('([{'.includes(operator)) this.depth++;
      if (')]}'.includes(operator)) this.depth--;
      this.push('op', operator, this.at);
      this.at += operator.length;
    }
  }

  private word(): void {
    const start = this.at;
    while (this.at < this.text.length && /[A-Za-z0-9_]/.test(this.text[this.at]!)) this.at++;
    const name = this.text.slice(start, this.at);
    const quote = this.text[this.at];
    if (quote === '"' || quote === "'") {
      const prefix = STRING_PREFIXES.get(name);
      if (prefix) return this.string(start, this.at, prefix);
      if (/^[rRbBuUfF]{1,2}$/.test(name))
        return this.error(
          start,
          `${name}${quote}…${quote} is not a string Codex's Starlark reads: its only string prefixes are r (raw), f and fr, in lower case`,
        );
    }
    if (RESERVED.has(name))
      return this.error(start, `"${name}" is a reserved word in Starlark and cannot be used (Codex refuses it too)`);
    this.push(KEYWORDS.has(name) ? 'keyword' : 'name', name, start);
  }

  private number(): void {
    const start = this.at;
    const literal = NUMBER.exec(this.text.slice(start))![0];
    this.at += literal.length;
    if (/^0[0-9]+$/.test(literal)) return this.error(start, `an integer cannot start with 0, found ${literal}`);
    this.push('number', literal, start);
  }

  /**
   * A string literal as starlark-rust decodes it: a literal carriage return is
   * dropped, an unknown escape (`\d`) stays as written, and in a raw string a
   * backslash before a quote is dropped while any other stays.
   */
  private string(tokenStart: number, quoteAt: number, { raw, format }: { raw: boolean; format: boolean }): void {
    const { text } = this;
    const quote = text[quoteAt]!;
    const triple = text.startsWith(quote.repeat(3), quoteAt);
    const line = this.line;
    const column = tokenStart - this.lineStart + 1;
    let at = quoteAt + (triple ? 3 : 1);
    let value = '';
    let quotes = 0;
    while (at < text.length) {
      const c = text[at]!;
      if (c === quote) {
        quotes++;
        at++;
        if (!triple || quotes === 3) {
          this.tokens.push({
            type: format ? 'fstring' : 'string',
            value: triple ? value.slice(0, -2) : value,
            line,
            column,
          });
          this.at = at;
          return;
        }
        value += c;
        continue;
      }
      quotes = 0;
      if (c === '\n') {
        if (!triple) break;
        value += c;
        at++;
        this.newLine(at);
      } else if (c === '\r') {
        at++;
      } else if (c === '\\') {
        const next = text[at + 1];
        if (next === undefined) break;
        if (raw) {
          value += next === '"' || next === "'" ? next : c + next;
          at += 2;
          if (next === '\n') this.newLine(at);
          continue;
        }
        const escape = decodeEscape(text, at);
        if ('refused' in escape) return this.error(at, escape.refused);
        if (escape.newline) this.newLine(escape.end);
        value += escape.value;
        at = escape.end;
      } else {
        value += c;
        at++;
      }
    }
    this.tokens.push({ type: 'error', value: 'string is not closed', line, column });
  }

  /** After a line break outside brackets: a statement must start in column 1. */
  private indentation(): void {
    const { text } = this;
    for (;;) {
      let at = this.at;
      while (text[at] === ' ' || text[at] === '\r') at++;
      if (text[at] === '\t')
        return this.error(at, 'tabs are not allowed outside strings (Codex refuses them too); indent with spaces');
      if (text[at] === '#') {
        while (at < text.length && text[at] !== '\n') at++;
      }
      if (at >= text.length) {
        this.at = at;
        return;
      }
      if (text[at] === '\n') {
        this.at = at + 1;
        this.newLine();
        continue;
      }
      if (at > this.at && text.slice(this.at, at).includes(' ')) this.push('indent', '', at);
      this.at = at;
      return;
    }
  }

  private newLine(at = this.at): void {
    this.line++;
    this.lineStart = at;
  }

  private push(type: TokenType, value: string, at: number): void {
    this.tokens.push({ type, value, line: this.line, column: at - this.lineStart + 1 });
  }

  private error(at: number, detail: string): void {
    this.push('error', detail, at);
    this.at = this.text.length;
  }
}

type Escape = { value: string; end: number; newline?: boolean } | { refused: string };

/** The escape after the backslash at `at`, decoded as starlark-rust decodes it. */
function decodeEscape(text: string, at: number): Escape {
  const next = text[at + 1]!;
  if (next === '\r')
    return text[at + 2] === '\n'
      ? { value: '', end: at + 3, newline: true }
      : { refused: 'a backslash before a carriage return must end the line (\\ then CR LF)' };
  const simple = SIMPLE_ESCAPES.get(next);
  if (simple !== undefined) return { value: simple, end: at + 2, newline: next === '\n' };
  const octal = /^[0-7]{1,3}/.exec(text.slice(at + 1, at + 4));
  if (octal) return { value: String.fromCodePoint(parseInt(octal[0], 8)), end: at + 1 + octal[0].length };
  const digits = HEX_DIGITS[next];
  // an unknown escape such as \d stays as written, backslash included
  if (!digits || !Object.hasOwn(HEX_DIGITS, next)) return { value: `\\${next}`, end: at + 2 };
  const hex = text.slice(at + 2, at + 2 + digits);
  const written = printable(`\\${next}${hex.split(/[^0-9a-fA-F]/)[0]}`);
  if (!new RegExp(`^[0-9a-fA-F]{${digits}}$`).test(hex))
    return { refused: `invalid string escape sequence ${written}: \\${next} takes exactly ${digits} hex digits` };
  const code = parseInt(hex, 16);
  // a lone surrogate or a number past Unicode is not a character (Rust's char::from_u32)
  if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
    return { refused: `invalid string escape sequence ${written}: U+${hex.toUpperCase()} is not a Unicode character` };
  return { value: String.fromCodePoint(code), end: at + 2 + digits };
}

function describeCharacter(code: number): string {
  if (code === 0x0d) return 'a carriage return not followed by a line feed';
  const printableAscii = code >= 0x20 && code < 0x7f;
  return printableAscii
    ? `"${String.fromCharCode(code)}"`
    : `the character U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
}
