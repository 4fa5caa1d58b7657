// Tokens of the Starlark subset a Codex `.rules` file uses: names, string
// literals, brackets, commas, `=`, and statement ends. Anything else is a token
// the parser refuses with its line, so nothing in the file is ever evaluated.

export type TokenType = 'name' | 'string' | 'punct' | 'end' | 'eof';

export interface Token {
  readonly type: TokenType;
  readonly value: string;
  readonly line: number;
  readonly column: number;
}

export class LexError extends Error {
  constructor(
    readonly line: number,
    readonly column: number,
    message: string,
  ) {
    super(message);
  }
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '\n': '',
};

export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let at = 0;
  let line = 1;
  let lineStart = 0;
  let depth = 0;
  const column = () => at - lineStart + 1;
  const newline = () => {
    line++;
    lineStart = at;
  };
  while (at < text.length) {
    const c = text[at]!;
    if (c === '#') {
      while (at < text.length && text[at] !== '\n') at++;
    } else if (c === '\n') {
      // inside brackets a newline is only space
      if (depth === 0) tokens.push({ type: 'end', value: '\n', line, column: column() });
      at++;
      newline();
    } else if (c === '\\' && text[at + 1] === '\n') {
      at += 2;
      newline();
    } else if (c === ' ' || c === '\t' || c === '\r') {
      at++;
    } else if (/[A-Za-z_]/.test(c)) {
      const start = at;
      while (at < text.length && /[A-Za-z0-9_]/.test(text[at]!)) at++;
      const name = text.slice(start, at);
      if (/^[rRbBfF]$/.test(name) && (text[at] === '"' || text[at] === "'")) {
        if (!/^[rR]$/.test(name))
          throw new LexError(
            line,
            start - lineStart + 1,
            `${name.toLowerCase() === 'b' ? 'byte strings' : 'f-strings'} are not supported`,
          );
        const literal = stringLiteral(text, at, true, line, lineStart);
        tokens.push({ type: 'string', value: literal.value, line, column: start - lineStart + 1 });
        ({ at, line, lineStart } = literal);
      } else {
        tokens.push({ type: 'name', value: name, line, column: start - lineStart + 1 });
      }
    } else if (c === '"' || c === "'") {
      const literal = stringLiteral(text, at, false, line, lineStart);
      tokens.push({ type: 'string', value: literal.value, line, column: column() });
      ({ at, line, lineStart } = literal);
    } else {
      if (c === '(' || c === '[' || c === '{') depth++;
      if ((c === ')' || c === ']' || c === '}') && depth > 0) depth--;
      tokens.push({ type: c === ';' ? 'end' : 'punct', value: c, line, column: column() });
      at++;
    }
  }
  tokens.push({ type: 'eof', value: '', line, column: column() });
  return tokens;
}

interface Literal {
  value: string;
  at: number;
  line: number;
  lineStart: number;
}

function stringLiteral(text: string, start: number, raw: boolean, line: number, lineStart: number): Literal {
  const quote = text[start]!;
  const triple = text.startsWith(quote.repeat(3), start);
  const close = triple ? quote.repeat(3) : quote;
  const startLine = line;
  const startColumn = start - lineStart + 1;
  let at = start + close.length;
  let value = '';
  while (at < text.length) {
    if (text.startsWith(close, at)) return { value, at: at + close.length, line, lineStart };
    const c = text[at]!;
    if (c === '\n') {
      if (!triple) break;
      value += c;
      at++;
      line++;
      lineStart = at;
    } else if (c === '\\') {
      const next = text[at + 1];
      if (next === undefined) break;
      if (next === '\n') {
        line++;
        lineStart = at + 2;
      }
      if (raw) {
        value += c + next;
        at += 2;
      } else {
        const escape = decodeEscape(text, at);
        if (!escape) throw new LexError(line, at - lineStart + 1, `unknown escape \\${next} in a string`);
        value += escape.value;
        at = escape.end;
      }
    } else {
      value += c;
      at++;
    }
  }
  throw new LexError(startLine, startColumn, 'string is not closed');
}

function decodeEscape(text: string, at: number): { value: string; end: number } | null {
  const next = text[at + 1]!;
  if (next in SIMPLE_ESCAPES) return { value: SIMPLE_ESCAPES[next]!, end: at + 2 };
  const octal = /^[0-7]{1,3}/.exec(text.slice(at + 1, at + 4));
  if (octal) return { value: String.fromCodePoint(parseInt(octal[0], 8)), end: at + 1 + octal[0].length };
  const digits = next === 'x' ? 2 : next === 'u' ? 4 : next === 'U' ? 8 : 0;
  const hex = digits ? text.slice(at + 2, at + 2 + digits) : '';
  if (!digits || !new RegExp(`^[0-9a-fA-F]{${digits}}$`).test(hex)) return null;
  const code = parseInt(hex, 16);
  if (code > 0x10ffff) return null;
  return { value: String.fromCodePoint(code), end: at + 2 + digits };
}
