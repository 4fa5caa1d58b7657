import { z } from 'zod';
import { parseDocument } from 'yaml';
import { formatPath, PathSegment } from '@aileron/errors';
import { compilePattern, MAX_PATTERN_LENGTH } from './pattern';

export const EFFECTS = ['allow', 'deny', 'approval'] as const;
export type Effect = (typeof EFFECTS)[number];
export type DefaultEffect = 'allow' | 'deny';
export type OnError = 'deny' | 'approval';
export type ExecutionMode = 'local' | 'remote';

export interface NumericRange {
  gt?: number;
  gte?: number;
  lt?: number;
  lte?: number;
}

export interface ArgumentCondition {
  path: string;
  equals?: unknown;
  in?: unknown[];
  regex?: string;
  range?: NumericRange;
  exists?: boolean;
}

export interface PrincipalMatch {
  users?: string[];
  roles?: string[];
  groups?: string[];
  gateways?: string[];
  sessions?: string[];
}

export interface PolicyRule {
  id: string;
  description?: string;
  effect: Effect;
  approval_route?: string;
  servers?: string[];
  tools?: string[];
  tool_prefixes?: string[];
  execution_mode?: ExecutionMode;
  principals?: PrincipalMatch;
  arguments?: ArgumentCondition[];
}

export interface PolicyDocument {
  default?: DefaultEffect;
  on_error?: OnError;
  /** argument paths (`repo.token`, `headers`) shown as [redacted] to approvers; credential-like names always are */
  redact?: string[];
  rules: PolicyRule[];
}

export interface PolicyProblem {
  /** where, e.g. `rules[3].arguments[0].regex`; '' for the whole document */
  path: string;
  /** id of the rule the problem is in, when that rule has a string id */
  rule?: string;
  message: string;
}

export type PolicyParseResult = { ok: true; document: PolicyDocument } | { ok: false; problems: PolicyProblem[] };

const MAX_RULES = 10_000;
/** Far deeper than any real policy; keeps hostile nesting from exhausting the stack. */
const MAX_DEPTH = 64;
const RULE_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;
const ROUTE = /^[a-z0-9][a-z0-9-]{0,62}$/;
const ARGUMENT_PATH = /^[^.]+(?:\.[^.]+)*$/;
const OPERATORS = ['equals', 'in', 'regex', 'range', 'exists'] as const;
const PRINCIPAL_KEYS = ['users', 'roles', 'groups', 'gateways', 'sessions'] as const;
const BOUNDS = ['gt', 'gte', 'lt', 'lte'] as const;

const name = z.string().min(1).max(200);
const names = z.array(name).min(1);
const principalNames = z.array(z.string().min(1)).min(1);

const rangeSchema = z
  .strictObject({
    gt: z.number().optional().describe('value > gt'),
    gte: z.number().optional().describe('value >= gte'),
    lt: z.number().optional().describe('value < lt'),
    lte: z.number().optional().describe('value <= lte'),
  })
  .describe('at least one bound; the value must be a number and satisfy every bound given');

const conditionSchema = z
  .strictObject({
    path: z
      .string()
      .regex(ARGUMENT_PATH, { error: 'must be dot-separated non-empty names, e.g. repo.owner or files.0.name' })
      .describe('where in the tool arguments, e.g. repo.owner or files.0.name'),
    equals: z.json().optional().describe('the value equals this JSON value'),
    in: z.array(z.json()).min(1).optional().describe('the value equals one of these'),
    regex: z
      .string()
      .optional()
      .describe(
        `a string value contains a match (RE2 syntax: JavaScript's without backreferences or lookaround; at most ${MAX_PATTERN_LENGTH} characters; anchor with ^…$)`,
      ),
    range: rangeSchema.optional(),
    exists: z.boolean().optional().describe('true: the path is present (even as null); false: it is absent'),
  })
  .describe('exactly one of equals, in, regex, range, exists');

const principalSchema = z
  .strictObject({
    users: principalNames.optional(),
    roles: principalNames.optional(),
    groups: principalNames.optional(),
    gateways: principalNames.optional(),
    sessions: principalNames.optional(),
  })
  .describe('the rule applies when the caller matches any entry of any list');

const ruleSchema = z.strictObject({
  id: z
    .string()
    .regex(RULE_ID, { error: 'must be 1 to 64 letters, digits, _ . : or -, starting with a letter or digit' })
    // the sandboxes' shell rules name their decisions `shell:<source>`: the overview and the replay tell
    // policy decisions from theirs by it, so no policy rule may take a name in that space
    .refine((id) => !id.startsWith('shell:'), { error: 'must not start with "shell:" (the shell rules\' names)' })
    .describe('unique in the document; decisions name the rules that made them'),
  description: z.string().max(500).optional(),
  effect: z.enum(EFFECTS),
  approval_route: z
    .string()
    .regex(ROUTE, {
      error: 'must be lowercase letters, digits and -, starting with a letter or digit, at most 63 characters',
    })
    .optional()
    .describe('where the approval request goes; only with effect approval'),
  servers: names.optional().describe('server names or globs (* and ?); absent: every server'),
  tools: names.optional().describe('tool names or globs (* and ?)'),
  tool_prefixes: names.optional().describe('tool name prefixes; with tools absent too: every tool'),
  execution_mode: z.enum(['local', 'remote']).optional(),
  principals: principalSchema.optional(),
  arguments: z.array(conditionSchema).min(1).optional().describe('all must hold'),
});

const documentShape = z.strictObject({
  default: z
    .enum(['allow', 'deny'])
    .optional()
    .describe('the decision when no rule applies; absent: the workspace default'),
  on_error: z
    .enum(['deny', 'approval'])
    .optional()
    .describe('the decision when a rule cannot be evaluated and nothing stricter applies; absent: deny'),
  redact: z
    .array(
      z
        .string()
        .min(1)
        .max(256)
        .regex(/^[^.\s]+(\.[^.\s]+)*$/, 'must be a dotted argument path such as `repo.token`'),
    )
    .max(200)
    .optional()
    .describe('argument paths approvers see as [redacted]; names like password, token, secret, api_key always are'),
  rules: z.array(ruleSchema).max(MAX_RULES),
});

type Segment = PathSegment;
interface RawProblem {
  at: Segment[];
  message: string;
}

/** The whole document format, checks across fields included; OpenAPI shows its shape. */
export const policyDocumentSchema: z.ZodType<PolicyDocument> = documentShape.superRefine((document, ctx) => {
  for (const problem of crossFieldProblems(document))
    ctx.addIssue({ code: 'custom', path: problem.at, message: problem.message });
});

/**
 * Validates a parsed document and reports every problem at once, so an author
 * fixes a policy in one round trip rather than one error per upload.
 */
export function parsePolicyDocument(input: unknown): PolicyParseResult {
  if (tooDeep(input)) return { ok: false, problems: [{ path: '', message: `nested deeper than ${MAX_DEPTH} levels` }] };
  // The shape and the cross-field checks run separately: zod does not run refinements
  // of an object whose fields failed, and authors should see both at once.
  const parsed = documentShape.safeParse(input, { reportInput: true });
  const raw = parsed.success ? [] : parsed.error.issues.flatMap(fromZodIssue);
  raw.push(...crossFieldProblems(input));
  if (raw.length === 0 && parsed.success) return { ok: true, document: parsed.data };
  return { ok: false, problems: finish(raw, input) };
}

/** Parses JSON or YAML text, then validates it like parsePolicyDocument. */
export function parsePolicyText(text: string, format: 'json' | 'yaml'): PolicyParseResult {
  const read = format === 'json' ? readJson(text) : readYaml(text);
  if ('problem' in read) return { ok: false, problems: [{ path: '', message: read.problem }] };
  return parsePolicyDocument(read.value);
}

type Read = { value: unknown } | { problem: string };

function readYaml(text: string): Read {
  // YAML 1.2 core schema: `yes`, `on` and `0777` stay what they look like
  const document = parseDocument(text, { schema: 'core', uniqueKeys: true, prettyErrors: false });
  const error = document.errors[0];
  if (error) {
    const message =
      error.code === 'MULTIPLE_DOCS' ? 'the text holds several YAML documents; a policy is one' : error.message;
    return { problem: `${lineColumn(text, error.pos[0])}: ${message}` };
  }
  try {
    return { value: document.toJS({ maxAliasCount: 100 }) };
  } catch (cause) {
    // aliases that expand too far (a "billion laughs" document)
    return { problem: `YAML: ${(cause as Error).message}` };
  }
}

function readJson(text: string): Read {
  const failure = new JsonChecker(text).check();
  if (failure) return { problem: `${lineColumn(text, failure.offset)}: ${failure.message}` };
  return { value: JSON.parse(text) };
}

function lineColumn(text: string, offset: number): string {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return `line ${line}, column ${offset - lineStart + 1}`;
}

class JsonSyntaxError extends Error {
  constructor(
    readonly offset: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Locates JSON syntax errors (JSON.parse names no line in Node 20) and rejects
 * duplicate keys, which JSON.parse would silently resolve to the last one: a
 * second `effect` in a rule must not quietly win.
 */
class JsonChecker {
  private at = 0;

  constructor(private readonly text: string) {}

  check(): { offset: number; message: string } | null {
    try {
      this.value(0);
      this.space();
      if (this.at < this.text.length) this.fail('unexpected text after the JSON value');
      return null;
    } catch (error) {
      if (error instanceof JsonSyntaxError) return { offset: error.offset, message: error.message };
      throw error;
    }
  }

  private value(depth: number): void {
    if (depth > MAX_DEPTH) this.fail(`nested deeper than ${MAX_DEPTH} levels`);
    this.space();
    const char = this.text[this.at];
    if (char === '{') this.object(depth);
    else if (char === '[') this.array(depth);
    else if (char === '"') this.string();
    else if (char === '-' || (char !== undefined && char >= '0' && char <= '9')) this.number();
    else if (!this.word('true') && !this.word('false') && !this.word('null'))
      this.fail(char === undefined ? 'unexpected end of the text' : `unexpected ${JSON.stringify(char)}`);
  }

  private object(depth: number): void {
    this.at++;
    const keys = new Set<string>();
    this.space();
    if (this.text[this.at] === '}') {
      this.at++;
      return;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail('expected a "quoted" property name');
      const start = this.at;
      this.string();
      const key = JSON.parse(this.text.slice(start, this.at)) as string;
      if (keys.has(key)) this.fail(`duplicate key ${JSON.stringify(key)}`, start);
      keys.add(key);
      this.space();
      if (this.text[this.at] !== ':') this.fail('expected ":" after the property name');
      this.at++;
      this.value(depth + 1);
      this.space();
      const next = this.text[this.at++];
      if (next === '}') return;
      if (next !== ',') this.fail('expected "," or "}"', this.at - 1);
    }
  }

  private array(depth: number): void {
    this.at++;
    this.space();
    if (this.text[this.at] === ']') {
      this.at++;
      return;
    }
    for (;;) {
      this.value(depth + 1);
      this.space();
      const next = this.text[this.at++];
      if (next === ']') return;
      if (next !== ',') this.fail('expected "," or "]"', this.at - 1);
    }
  }

  private string(): void {
    const start = this.at++;
    for (;;) {
      const code = this.text.charCodeAt(this.at);
      if (Number.isNaN(code)) this.fail('unterminated string', start);
      if (code < 0x20) this.fail('control character in a string; escape it');
      this.at++;
      if (code === 0x22) return;
      if (code === 0x5c) {
        const escape = this.text[this.at];
        if (escape === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(this.text.slice(this.at + 1, this.at + 5))) this.fail('bad \\u escape');
          this.at += 5;
        } else if (escape !== undefined && '"\\/bfnrt'.includes(escape)) {
          this.at++;
        } else {
          this.fail('bad escape in a string');
        }
      }
    }
  }

  private number(): void {
    const match = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
    match.lastIndex = this.at;
    if (!match.test(this.text)) this.fail('bad number');
    this.at = match.lastIndex;
  }

  private word(word: string): boolean {
    if (!this.text.startsWith(word, this.at)) return false;
    this.at += word.length;
    return true;
  }

  private space(): void {
    while (this.at < this.text.length && ' \t\n\r'.includes(this.text[this.at]!)) this.at++;
  }

  private fail(message: string, offset = this.at): never {
    throw new JsonSyntaxError(offset, message);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tooDeep(input: unknown): boolean {
  const stack: [unknown, number][] = [[input, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth >= MAX_DEPTH) return true;
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return false;
}

/** Checks that span fields, run on the raw input so they report even when the shape is wrong elsewhere. */
function crossFieldProblems(input: unknown): RawProblem[] {
  const problems: RawProblem[] = [];
  if (!isRecord(input) || !Array.isArray(input.rules)) return problems;
  const firstById = new Map<string, number>();
  input.rules.forEach((rule: unknown, i: number) => {
    if (!isRecord(rule)) return;
    const at: Segment[] = ['rules', i];
    if (typeof rule.id === 'string') {
      const first = firstById.get(rule.id);
      if (first === undefined) firstById.set(rule.id, i);
      else
        problems.push({
          at: [...at, 'id'],
          message: `duplicate id ${JSON.stringify(rule.id)}, already used by rules[${first}]`,
        });
    }
    if (rule.approval_route !== undefined && rule.effect !== 'approval') {
      problems.push({ at: [...at, 'approval_route'], message: 'is allowed only on a rule whose effect is "approval"' });
    }
    const principals = rule.principals;
    if (isRecord(principals) && !PRINCIPAL_KEYS.some((key) => principals[key] !== undefined)) {
      problems.push({ at: [...at, 'principals'], message: `needs at least one of ${PRINCIPAL_KEYS.join(', ')}` });
    }
    if (Array.isArray(rule.arguments)) {
      rule.arguments.forEach((condition: unknown, j: number) => {
        if (isRecord(condition)) problems.push(...conditionProblems(condition, [...at, 'arguments', j]));
      });
    }
  });
  return problems;
}

function conditionProblems(condition: Record<string, unknown>, at: Segment[]): RawProblem[] {
  const problems: RawProblem[] = [];
  const given = OPERATORS.filter((operator) => condition[operator] !== undefined);
  if (given.length !== 1) {
    const what = given.length === 0 ? 'has no operator' : `has ${given.join(' and ')}`;
    problems.push({ at, message: `${what}; give exactly one of ${OPERATORS.join(', ')}` });
  }
  if (typeof condition.regex === 'string') {
    try {
      compilePattern(condition.regex);
    } catch (error) {
      problems.push({
        at: [...at, 'regex'],
        message: `does not compile: ${(error as Error).message} (RE2 syntax: no backreferences or lookaround)`,
      });
    }
  }
  const range = condition.range;
  if (isRecord(range)) {
    const given = BOUNDS.filter((bound) => range[bound] !== undefined);
    if (given.length === 0)
      problems.push({ at: [...at, 'range'], message: `needs at least one of ${BOUNDS.join(', ')}` });
    else if (!satisfiable(range)) {
      const bounds = given.map((bound) => `${bound} ${String(range[bound])}`).join(' and ');
      problems.push({ at: [...at, 'range'], message: `can never hold: no number is ${bounds}` });
    }
  }
  return problems;
}

function satisfiable(range: Record<string, unknown>): boolean {
  const finite = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
  // the tighter bound of each side; at equal values the exclusive one is tighter
  let low: { value: number; open: boolean } | null = null;
  let high: { value: number; open: boolean } | null = null;
  for (const [bound, open] of [
    ['gt', true],
    ['gte', false],
  ] as const) {
    const value = range[bound];
    if (finite(value) && (low === null || value > low.value || (value === low.value && open))) low = { value, open };
  }
  for (const [bound, open] of [
    ['lt', true],
    ['lte', false],
  ] as const) {
    const value = range[bound];
    if (finite(value) && (high === null || value < high.value || (value === high.value && open)))
      high = { value, open };
  }
  if (low === null || high === null) return true;
  return low.value < high.value || (low.value === high.value && !low.open && !high.open);
}

const KNOWN_KEYS: Record<string, readonly string[]> = {
  '': Object.keys(documentShape.shape),
  rules: Object.keys(ruleSchema.shape),
  'rules.principals': PRINCIPAL_KEYS,
  'rules.arguments': Object.keys(conditionSchema.shape),
  'rules.arguments.range': BOUNDS,
};

const TYPE_NAMES: Record<string, string> = {
  object: 'an object',
  array: 'an array',
  string: 'a string',
  number: 'a number',
  boolean: 'a boolean',
};

function fromZodIssue(issue: z.core.$ZodIssue): RawProblem[] {
  const at = issue.path.map((segment) => (typeof segment === 'number' ? segment : String(segment)));
  if (issue.code !== 'unrecognized_keys' && 'input' in issue && issue.input === undefined)
    return [{ at, message: 'is required' }];
  switch (issue.code) {
    case 'unrecognized_keys': {
      const known = KNOWN_KEYS[at.filter((segment) => typeof segment === 'string').join('.')] ?? [];
      return issue.keys.map((key) => {
        const guess = closest(key, known);
        return {
          at: [...at, key],
          message: `unknown field ${JSON.stringify(key)}${guess ? ` (did you mean ${JSON.stringify(guess)}?)` : ''}`,
        };
      });
    }
    case 'invalid_type':
      return [
        { at, message: `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}, not ${describeType(issue.input)}` },
      ];
    case 'invalid_value':
      return [{ at, message: `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}` }];
    case 'too_small':
      if (Number(issue.minimum) === 1 && (issue.origin === 'array' || issue.origin === 'string'))
        return [{ at, message: 'must not be empty' }];
      return [{ at, message: issue.message }];
    case 'too_big':
      if (issue.origin === 'string') return [{ at, message: `must be at most ${issue.maximum} characters` }];
      if (issue.origin === 'array') return [{ at, message: `must have at most ${issue.maximum} entries` }];
      return [{ at, message: issue.message }];
    case 'invalid_union':
      // z.json() is the only union: a value YAML can express but JSON cannot, such as .inf
      return [{ at, message: 'must be a JSON value (string, finite number, boolean, null, array or object)' }];
    default:
      return [{ at, message: issue.message }];
  }
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return TYPE_NAMES[typeof value] ?? typeof value;
}

/** A typo suggestion: the known key at edit distance ≤ 2, if any. */
function closest(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = 3;
  for (const candidate of known) {
    const distance = editDistance(key, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

function finish(raw: RawProblem[], input: unknown): PolicyProblem[] {
  const rules = isRecord(input) && Array.isArray(input.rules) ? (input.rules as unknown[]) : [];
  const seen = new Set<string>();
  const problems: (PolicyProblem & { at: Segment[] })[] = [];
  for (const { at, message } of raw) {
    const path = formatPath(at);
    if (seen.has(`${path}\n${message}`)) continue;
    seen.add(`${path}\n${message}`);
    const rule = at[0] === 'rules' && typeof at[1] === 'number' ? rules[at[1]] : undefined;
    const id = isRecord(rule) && typeof rule.id === 'string' ? rule.id : undefined;
    problems.push({ at, path, ...(id === undefined ? {} : { rule: id }), message });
  }
  // rules[2] before rules[10]: segment by segment, numbers as numbers
  problems.sort((a, b) => compareSegments(a.at, b.at) || (a.message < b.message ? -1 : a.message > b.message ? 1 : 0));
  return problems.map(({ at: _at, ...problem }) => problem);
}

function compareSegments(a: Segment[], b: Segment[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x === y) continue;
    if (typeof x === 'number' && typeof y === 'number') return x - y;
    if (typeof x !== typeof y) return typeof x === 'number' ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}
