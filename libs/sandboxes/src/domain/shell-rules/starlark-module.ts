import { tokenize, type Token } from './starlark-lexer';

// The part of Starlark a Codex `.rules` file needs, read without running
// anything a tenant wrote: string and list values, names assigned to them,
// `+` between them, and calls of the three functions Codex provides, made as
// statements. What Codex's Starlark refuses is refused; what it would run
// (def, for, if, load, other calls, other operators) is refused with a reason.

export type Value =
  | { readonly kind: 'string'; readonly value: string; readonly at: Token }
  // a list is shared by every name bound to it, as `+=` extends it in place
  | { readonly kind: 'list'; readonly items: Value[]; readonly at: Token }
  | { readonly kind: 'none' | 'bool' | 'number'; readonly at: Token };

export const BUILTINS = ['prefix_rule', 'host_executable', 'network_rule'] as const;
export type Builtin = (typeof BUILTINS)[number];

export interface Argument {
  readonly value: Value;
  /** where the value is written (a name bound to it counts as written there) */
  readonly at: Token;
  /** the keyword, for an argument given by name */
  readonly keyword?: Token;
}

export interface Call {
  readonly name: Builtin;
  readonly at: Token;
  readonly positional: readonly Argument[];
  readonly keywords: ReadonlyMap<string, Argument>;
}

export type Fail = (at: { line: number; column: number }, detail: string) => never;

const CONSTANTS = new Set(['None', 'True', 'False']);
const AUGMENTED = new Set(['-=', '*=', '/=', '//=', '%=', '&=', '|=', '^=', '<<=', '>>=']);
// what may follow a value; any other operator would compute something
const AFTER_VALUE = new Set([',', ')', ']', ';', '=', '+=']);
const EXPRESSION_KEYWORDS = new Set(['if', 'for', 'and', 'or', 'in', 'not']);
// Bounds that keep a hostile file from exhausting memory or the stack (`A += A` doubles A);
// rule files need a small fraction of them.
const MAX_BUILT = 1_000_000;
const MAX_NESTING = 64;
const NOT_RUN =
  'a .rules file is read here, never run, so it may hold only strings, lists, names assigned to them, + between them, and prefix_rule, host_executable and network_rule calls';

/** The builtin calls of the file, in order, with their arguments evaluated. */
export function readStarlark(text: string, fail: Fail): Call[] {
  return new Reader(tokenize(text), fail).module();
}

class Reader {
  private index = 0;
  private readonly names = new Map<string, Value>();
  private readonly calls: Call[] = [];
  private built = 0;
  private nesting = 0;

  constructor(
    private readonly tokens: readonly Token[],
    private readonly fail: Fail,
  ) {}

  module(): Call[] {
    for (;;) {
      while (this.peek().type === 'newline') this.index++;
      if (this.peek().type === 'eof') return this.calls;
      // Starlark's `a; b;` then the end of the line
      for (;;) {
        this.statement();
        if (!this.isOp(';')) break;
        this.index++;
        if (this.peek().type === 'newline' || this.peek().type === 'eof') break;
      }
      const end = this.next();
      if (end.type !== 'newline' && end.type !== 'eof')
        this.fail(end, `expected the end of the statement, found ${describe(end)}`);
    }
  }

  private statement(): void {
    const first = this.peek();
    if (first.type === 'indent')
      this.fail(
        first,
        'this line is indented, but a statement at the top of the file starts in column 1 (Codex refuses it too)',
      );
    if (first.type === 'keyword') {
      if (first.value === 'pass') {
        this.index++;
        return;
      }
      this.unsupported(first, `"${first.value}"`);
    }
    const second = this.tokens[this.index + 1]!;
    if (first.type === 'name' && second.type === 'op' && (second.value === '=' || second.value === '+=')) {
      this.index += 2;
      return this.assignment(first, second.value === '+=');
    }
    if (first.type === 'name' && second.type === 'op' && AUGMENTED.has(second.value))
      this.unsupported(second, `the operator "${second.value}"`);
    if (first.type === 'name' && this.isOp(':', second)) this.unsupported(second, 'a type annotation');
    if (first.type === 'name' && this.isOp(',', second)) this.unsupported(second, 'a tuple');
    if (first.type === 'name' && (BUILTINS as readonly string[]).includes(first.value) && this.isOp('(', second)) {
      this.index += 2;
      this.calls.push(this.call(first, first.value as Builtin));
      return;
    }
    // any other expression is evaluated for its errors, then dropped, as a docstring is
    this.expression();
    if (this.isOp(',')) this.unsupported(this.peek(), 'a tuple');
    if (this.isOp('=')) this.unsupported(this.peek(), 'assigning to anything but a name');
  }

  private assignment(name: Token, extend: boolean): void {
    if (CONSTANTS.has(name.value) || (BUILTINS as readonly string[]).includes(name.value))
      this.fail(name, `"${name.value}" is a name Codex provides; assigning it is not supported`);
    const value = this.expression();
    if (this.isOp(',')) this.unsupported(this.peek(), 'a tuple');
    if (!extend) {
      this.names.set(name.value, value);
      return;
    }
    const current = this.lookup(name);
    if (current.kind === 'list' && value.kind === 'list') {
      this.build(current.items.length + value.items.length, name);
      // a copy first: `A += A` would otherwise read what it appends; a loop, since spreading a long list overflows the stack
      for (const item of value.items.slice()) current.items.push(item);
    } else this.names.set(name.value, this.plus(current, value, name));
  }

  private call(name: Token, builtin: Builtin): Call {
    const positional: Argument[] = [];
    const keywords = new Map<string, Argument>();
    while (!this.isOp(')')) {
      const start = this.peek();
      if (this.isOp('*') || this.isOp('**')) this.unsupported(start, `unpacking arguments with "${start.value}"`);
      if (start.type === 'name' && this.isOp('=', this.tokens[this.index + 1])) {
        this.index += 2;
        if (keywords.has(start.value)) this.fail(start, `argument "${start.value}" is given twice`);
        keywords.set(start.value, { at: this.peek(), value: this.snapshot(this.expression(), start), keyword: start });
      } else {
        if (keywords.size) this.fail(start, 'a positional argument cannot follow a keyword argument');
        positional.push({ at: start, value: this.snapshot(this.expression(), start) });
      }
      if (this.isOp(',')) this.index++;
      else if (!this.isOp(')')) this.fail(this.peek(), `expected "," or ")", found ${describe(this.peek())}`);
    }
    this.index++;
    this.noPostfix();
    return { name: builtin, at: name, positional, keywords };
  }

  /** A sum of operands: Starlark's `+` on strings and lists, nothing else. */
  private expression(): Value {
    let value = this.operand();
    while (this.isOp('+')) {
      const plus = this.next();
      value = this.plus(value, this.operand(), plus);
    }
    const after = this.peek();
    if (after.type === 'keyword' && EXPRESSION_KEYWORDS.has(after.value)) this.unsupported(after, `"${after.value}"`);
    if (after.type === 'op' && !AFTER_VALUE.has(after.value)) this.unsupported(after, `the operator "${after.value}"`);
    return value;
  }

  private operand(): Value {
    const token = this.next();
    if (++this.nesting > MAX_NESTING) this.fail(token, `values are nested more than ${MAX_NESTING} deep`);
    try {
      return this.operandAt(token);
    } finally {
      this.nesting--;
    }
  }

  private operandAt(token: Token): Value {
    let value: Value;
    if (token.type === 'string') value = { kind: 'string', value: token.value, at: token };
    else if (token.type === 'fstring') value = { kind: 'string', value: this.format(token), at: token };
    else if (token.type === 'number') value = { kind: 'number', at: token };
    else if (token.type === 'name') value = this.name(token);
    else if (this.isOp('[', token)) value = this.list(token);
    else if (this.isOp('(', token)) value = this.parenthesized(token);
    else if (this.isOp('{', token)) return this.unsupported(token, 'a dict');
    else if (token.type === 'op' && '-~'.includes(token.value))
      return this.unsupported(token, `the operator "${token.value}"`);
    else if (token.type === 'keyword') return this.unsupported(token, `"${token.value}"`);
    else return this.fail(token, `expected a string or a list, found ${describe(token)}`);
    this.noPostfix();
    return value;
  }

  private name(token: Token): Value {
    if (!this.isOp('(')) return this.lookup(token);
    if ((BUILTINS as readonly string[]).includes(token.value))
      return this.unsupported(token, `${token.value}(...) inside an expression (call it as a statement of its own)`);
    return this.unsupported(token, `calling ${token.value}(...)`);
  }

  private list(open: Token): Value {
    const items: Value[] = [];
    while (!this.isOp(']')) {
      items.push(this.expression());
      if (this.isOp(',')) this.index++;
      else if (!this.isOp(']')) this.fail(this.peek(), `expected "," or "]", found ${describe(this.peek())}`);
    }
    this.index++;
    return { kind: 'list', items, at: open };
  }

  private parenthesized(open: Token): Value {
    if (this.isOp(')')) this.unsupported(open, 'a tuple');
    const value = this.expression();
    if (this.isOp(',')) this.unsupported(this.peek(), 'a tuple');
    if (!this.isOp(')')) this.fail(this.peek(), `expected ")", found ${describe(this.peek())}`);
    this.index++;
    return value;
  }

  private lookup(name: Token): Value {
    if (name.value === 'None') return { kind: 'none', at: name };
    if (name.value === 'True' || name.value === 'False') return { kind: 'bool', at: name };
    const value = this.names.get(name.value);
    if (value) return value;
    if ((BUILTINS as readonly string[]).includes(name.value))
      return this.unsupported(name, `${name.value} as a value (call it as a statement of its own)`);
    return this.fail(name, `"${name.value}" is not assigned before this line (Codex refuses it too)`);
  }

  private plus(left: Value, right: Value, at: Token): Value {
    if (left.kind === 'list' && right.kind === 'list') {
      this.build(left.items.length + right.items.length, at);
      return { kind: 'list', items: [...left.items, ...right.items], at: left.at };
    }
    if (left.kind === 'string' && right.kind === 'string') {
      this.build(left.value.length + right.value.length, at);
      return { kind: 'string', value: left.value + right.value, at: left.at };
    }
    return this.fail(at, `"+" cannot join ${kindName(left)} and ${kindName(right)} (Codex refuses it too)`);
  }

  /** An f-string as Codex's Starlark reads it: `{{`, `}}`, and `{name}` of a string. */
  private format(token: Token): string {
    let result = '';
    const text = token.value;
    for (let at = 0; at < text.length; at++) {
      const c = text[at]!;
      if (c === '}') {
        if (text[at + 1] !== '}') this.fail(token, `a "}" alone in an f-string must be doubled ("}}")`);
        result += '}';
        at++;
      } else if (c !== '{') {
        result += c;
      } else if (text[at + 1] === '{') {
        result += '{';
        at++;
      } else {
        const end = text.indexOf('}', at);
        if (end < 0) this.fail(token, 'an f-string has a "{" that is not closed');
        const [capture, conversion, ...rest] = text.slice(at + 1, end).split('!') as [string, string?];
        const name = capture.trim();
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || rest.length)
          this.fail(token, `"${text.slice(at, end + 1)}" in an f-string must hold one name`);
        if (conversion !== undefined && conversion !== 's')
          this.unsupported(token, `the conversion "!${conversion}" in an f-string`);
        const value = this.lookup({ ...token, value: name });
        if (value.kind !== 'string') this.unsupported(token, `putting ${kindName(value)} in an f-string`);
        result += (value as { value: string }).value;
        at = end;
      }
    }
    return result;
  }

  // A call takes its arguments as they are when it is made; a later `+=` does not reach back.
  private snapshot(value: Value, at: Token, depth = 0): Value {
    if (value.kind !== 'list') return value;
    // `A += [A]` makes a list that holds itself
    if (depth > MAX_NESTING) this.fail(at, `values are nested more than ${MAX_NESTING} deep`);
    this.build(value.items.length, at);
    return { ...value, items: value.items.map((item) => this.snapshot(item, at, depth + 1)) };
  }

  private build(size: number, at: Token): void {
    this.built += size;
    if (this.built > MAX_BUILT)
      this.fail(
        at,
        `this file builds more than ${MAX_BUILT.toLocaleString('en')} list items and characters with + and calls`,
      );
  }

  /** Calls, indexing and attributes of a value would run code; none is read. */
  private noPostfix(): void {
    const next = this.peek();
    if (this.isOp('(', next)) this.unsupported(next, 'calling a value');
    if (this.isOp('[', next)) this.unsupported(next, 'indexing a value');
    if (this.isOp('.', next)) this.unsupported(next, 'an attribute or method of a value');
    if (next.type === 'string' || next.type === 'fstring')
      this.fail(next, 'two strings side by side are not joined in Starlark: put "+" between them');
  }

  private unsupported(at: Token, what: string): never {
    return this.fail(at, `${what} is not supported: ${NOT_RUN}`);
  }

  private isOp(op: string, token: Token | undefined = this.peek()): boolean {
    return token?.type === 'op' && token.value === op;
  }

  // the lexer's refusal is reported where the reader reaches it
  private peek(): Token {
    const token = this.tokens[this.index]!;
    return token.type === 'error' ? this.fail(token, token.value) : token;
  }

  private next(): Token {
    const token = this.peek();
    if (token.type !== 'eof') this.index++;
    return token;
  }
}

export function kindName(value: Value): string {
  return { string: 'a string', list: 'a list', none: 'None', bool: 'a bool', number: 'a number' }[value.kind];
}

export function describe(token: Token): string {
  if (token.type === 'eof') return 'the end of the file';
  if (token.type === 'newline') return 'the end of the line';
  if (token.type === 'string' || token.type === 'fstring') return 'a string';
  return `"${token.value}"`;
}
