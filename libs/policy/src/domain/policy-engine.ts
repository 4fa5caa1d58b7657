import { compileGlob, GlobMatcher, isGlob } from './glob';
import type { ArgumentCondition, DefaultEffect, Effect, ExecutionMode, OnError, PolicyDocument, PolicyRule, PrincipalMatch } from './policy-document';

export interface CallPrincipal {
  user?: string;
  roles?: string[];
  groups?: string[];
  gateway?: string;
  session?: string;
}

export interface PolicyCall {
  server: string;
  tool: string;
  arguments?: Record<string, unknown>;
  principal?: CallPrincipal;
  execution_mode?: ExecutionMode;
}

/**
 * Deep-frozen, and possibly the very object an earlier call got: decisions are
 * memoised per (server, tool), so a caller that wants to add fields copies it.
 */
export interface PolicyDecision {
  decision: Effect;
  reason: 'rule' | 'default' | 'evaluation_error';
  /** ids of the deciding rules, sorted */
  rules: string[];
  approval_route: string | null;
  /** every rule that could not be evaluated for this call, sorted by id */
  errors: { rule: string; message: string }[];
}

export interface CompiledPolicy {
  readonly defaultEffect: DefaultEffect;
  readonly onError: OnError;
  readonly ruleCount: number;
  evaluate(call: PolicyCall): PolicyDecision;
  /**
   * For tools/list: false when `evaluate` would deny every call of this tool,
   * whatever its arguments, so a tool that is always denied is never offered.
   * Sound by construction: a call `evaluate` lets through (or sends to
   * approval) is always on a listed tool.
   */
  listable(call: Omit<PolicyCall, 'arguments'>): boolean;
}

/**
 * How many (server, tool) pairs, plus decisions cached within them, one
 * compiled policy remembers. Callers choose tool names freely, so the memo
 * must not grow with them; past the bound it starts over.
 */
export const DECISION_MEMO_LIMIT = 10_000;

/**
 * Compiles a document once into an index, so that a decision looks only at the
 * rules that can concern the call's server and tool. Never throws, even for a
 * document that never went through validation: what cannot be compiled (a bad regex)
 * becomes an evaluation error of the rule for every call that reaches it.
 */
export function compilePolicy(document: PolicyDocument, options: { defaultEffect: DefaultEffect }): CompiledPolicy {
  return new PolicyIndex(document, options.defaultEffect);
}

/** A condition's outcome: true, false, or the message of why it cannot be evaluated. */
type Outcome = boolean | string;
type Check = (args: unknown) => Outcome;

interface CompiledRule {
  readonly id: string;
  /** position in the document: breaks ties between equal ids, as a stable sort would */
  readonly index: number;
  readonly effect: Effect;
  readonly approvalRoute: string | undefined;
  /** the server and tool part of the scope, which depends on nothing else in the call */
  readonly names: (server: string, tool: string) => boolean;
  readonly mode: ExecutionMode | undefined;
  readonly principal: ((principal: CallPrincipal | undefined) => boolean) | null;
  readonly check: Check | null;
}

interface Bucket {
  readonly byTool: Map<string, CompiledRule[]>;
  /** rules with tool globs, tool prefixes, or no tool restriction */
  readonly otherTools: CompiledRule[];
}

/** What one (server, tool) pair needs at decision time, worked out on its first call. */
interface Entry {
  /** rules that apply to every call of the pair, by effect, sorted by id */
  readonly deny: readonly CompiledRule[];
  readonly approval: readonly CompiledRule[];
  readonly allow: readonly CompiledRule[];
  /** rules that depend on the execution mode, the principal or the arguments, sorted by id */
  readonly conditional: readonly CompiledRule[];
  /** the decision when no conditional rule applies: the only one when there are none */
  readonly fixed: PolicyDecision;
  /** for tools/list, when no conditional rule applies */
  readonly opens: boolean;
  /**
   * Decisions of calls without evaluation errors, by the bit set of the
   * conditional rules that applied; null when there are too many for a bit set.
   */
  readonly byOutcome: Map<number, PolicyDecision> | null;
}

interface Errored {
  readonly rule: CompiledRule;
  readonly message: string;
}

/** Bits of a small integer, so that outcome keys stay cheap map keys. */
const OUTCOME_BITS = 30;
const EMPTY_ARGUMENTS: Record<string, unknown> = Object.freeze({});
const NO_RULES: string[] = Object.freeze([]) as unknown as string[];
const NO_ERRORS: PolicyDecision['errors'] = Object.freeze([]) as unknown as PolicyDecision['errors'];
const MISSING: unique symbol = Symbol('missing');

class PolicyIndex implements CompiledPolicy {
  readonly defaultEffect: DefaultEffect;
  readonly onError: OnError;
  readonly ruleCount: number;
  private readonly byServer = new Map<string, Bucket>();
  /** rules with server globs or no server restriction */
  private readonly otherServers: Bucket = newBucket();
  // Nested rather than keyed by a joined string, so that a lookup allocates nothing.
  private readonly memo = new Map<string, Map<string, Entry>>();
  /** pairs plus outcome decisions held in `memo` */
  private stored = 0;

  constructor(document: PolicyDocument, fallback: DefaultEffect) {
    this.defaultEffect = document.default ?? fallback;
    this.onError = document.on_error ?? 'deny';
    this.ruleCount = document.rules.length;
    document.rules.forEach((rule, index) => this.add(compileRule(rule, index), rule));
  }

  // A rule lands either in the exact buckets of its server names or in the
  // glob bucket, and likewise for tools, never both: a call's server matches at
  // most one exact bucket, so no rule is seen twice and nothing needs de-duplicating.
  private add(compiled: CompiledRule, rule: PolicyRule): void {
    const buckets: Bucket[] = [];
    if (rule.servers === undefined || rule.servers.some(isGlob)) {
      buckets.push(this.otherServers);
    } else {
      for (const server of new Set(rule.servers)) {
        let bucket = this.byServer.get(server);
        if (!bucket) this.byServer.set(server, (bucket = newBucket()));
        buckets.push(bucket);
      }
    }
    const anyTool = rule.tools === undefined && rule.tool_prefixes === undefined;
    const exactTools = !anyTool && (rule.tool_prefixes === undefined || rule.tool_prefixes.length === 0) && !(rule.tools ?? []).some(isGlob);
    for (const bucket of buckets) {
      if (!exactTools) {
        bucket.otherTools.push(compiled);
        continue;
      }
      for (const tool of new Set(rule.tools)) {
        const list = bucket.byTool.get(tool);
        if (list) list.push(compiled);
        else bucket.byTool.set(tool, [compiled]);
      }
    }
  }

  evaluate(call: PolicyCall): PolicyDecision {
    const entry = this.entry(call.server, call.tool);
    const conditional = entry.conditional;
    if (conditional.length === 0) return entry.fixed;
    const byOutcome = entry.byOutcome;
    if (byOutcome === null) return this.evaluateWide(entry, call);
    const args = call.arguments ?? EMPTY_ARGUMENTS;
    let applied = 0;
    let errored: Errored[] | null = null;
    for (let i = 0; i < conditional.length; i++) {
      const rule = conditional[i]!;
      const outcome = conditionalOutcome(rule, call, args);
      if (outcome === false) continue;
      if (outcome !== true) {
        (errored ??= []).push({ rule, message: outcome });
        // a rule that cannot be evaluated still restricts; it never grants
        if (rule.effect === 'allow') continue;
      }
      applied |= 1 << i;
    }
    // error messages vary with the arguments, so only error-free decisions are kept
    if (errored !== null) return this.compose(entry, appliedRules(conditional, applied), errored);
    const known = byOutcome.get(applied);
    if (known !== undefined) return known;
    const decision = this.compose(entry, appliedRules(conditional, applied), null);
    if (this.stored < DECISION_MEMO_LIMIT) {
      byOutcome.set(applied, decision);
      this.stored++;
    }
    return decision;
  }

  /** More conditional rules than a bit set holds: rare enough to allocate. */
  private evaluateWide(entry: Entry, call: PolicyCall): PolicyDecision {
    const args = call.arguments ?? EMPTY_ARGUMENTS;
    const applied: CompiledRule[] = [];
    let errored: Errored[] | null = null;
    for (const rule of entry.conditional) {
      const outcome = conditionalOutcome(rule, call, args);
      if (outcome === false) continue;
      if (outcome !== true) {
        (errored ??= []).push({ rule, message: outcome });
        if (rule.effect === 'allow') continue;
      }
      applied.push(rule);
    }
    return applied.length === 0 && errored === null ? entry.fixed : this.compose(entry, applied, errored);
  }

  listable(call: Omit<PolicyCall, 'arguments'>): boolean {
    const entry = this.entry(call.server, call.tool);
    // a deny with no condition at all applies to every call of the tool
    if (entry.deny.length > 0) return false;
    let opens = entry.opens;
    for (const rule of entry.conditional) {
      if (rule.mode !== undefined && rule.mode !== call.execution_mode) continue;
      if (rule.principal !== null && !rule.principal(call.principal)) continue;
      // with no argument conditions, the deny applies to every call with this mode and principal
      if (rule.effect === 'deny' && rule.check === null) return false;
      if (rule.effect !== 'deny') opens = true;
    }
    return opens;
  }

  private entry(server: string, tool: string): Entry {
    let tools = this.memo.get(server);
    const known = tools?.get(tool);
    if (known !== undefined) return known;
    const entry = this.newEntry(server, tool);
    if (this.stored >= DECISION_MEMO_LIMIT) {
      // Starting over rather than refusing new pairs: pairs still in use come
      // back after one recomputation each, whoever filled the memo.
      this.memo.clear();
      this.stored = 0;
      tools = undefined;
    }
    if (tools === undefined) this.memo.set(server, (tools = new Map()));
    tools.set(tool, entry);
    this.stored++;
    return entry;
  }

  private newEntry(server: string, tool: string): Entry {
    const exact = this.byServer.get(server);
    const named: CompiledRule[] = [];
    for (const rules of [exact?.byTool.get(tool), exact?.otherTools, this.otherServers.byTool.get(tool), this.otherServers.otherTools]) {
      for (const rule of rules ?? []) if (rule.names(server, tool)) named.push(rule);
    }
    named.sort(byId);
    const deny: CompiledRule[] = [];
    const approval: CompiledRule[] = [];
    const allow: CompiledRule[] = [];
    let conditional: CompiledRule[] = [];
    let opens = this.defaultEffect === 'allow';
    for (const rule of named) {
      if (rule.mode !== undefined || rule.principal !== null || rule.check !== null) {
        conditional.push(rule);
        continue;
      }
      if (rule.effect !== 'deny') opens = true;
      if (rule.effect === 'deny') deny.push(rule);
      else if (rule.effect === 'approval') approval.push(rule);
      else if (rule.effect === 'allow') allow.push(rule);
    }
    // Under a deny that always applies, only further denies and evaluation
    // errors can change the decision, and tools/list hides the tool anyway.
    if (deny.length > 0) conditional = conditional.filter((rule) => rule.effect === 'deny' || rule.check !== null);
    const partial = { deny, approval, allow };
    const fixed = this.compose(partial, [], null);
    let byOutcome: Map<number, PolicyDecision> | null = null;
    if (conditional.length > 0 && conditional.length <= OUTCOME_BITS) byOutcome = new Map([[0, fixed]]);
    return { deny, approval, allow, conditional, fixed, opens, byOutcome };
  }

  /**
   * The decision when the unconditional rules of `entry` and the `applied`
   * conditional ones (sorted by id, like everything here) hold; deep-frozen,
   * since it may be handed out again.
   */
  private compose(entry: Pick<Entry, 'deny' | 'approval' | 'allow'>, applied: readonly CompiledRule[], errored: Errored[] | null): PolicyDecision {
    const errors = errored === null ? NO_ERRORS : (Object.freeze(errored.map(({ rule, message }) => Object.freeze({ rule: rule.id, message }))) as PolicyDecision['errors']);
    const deny = merge(entry.deny, applied, 'deny');
    if (deny.length > 0) return decision('deny', 'rule', ids(deny), null, errors);
    const approval = merge(entry.approval, applied, 'approval');
    if (approval.length > 0) {
      const routed = approval.find((rule) => rule.approvalRoute !== undefined);
      return decision('approval', 'rule', ids(approval), routed?.approvalRoute ?? null, errors);
    }
    const allow = merge(entry.allow, applied, 'allow');
    // An allow must not stand when some rule could not say what it wanted:
    // the failure could be hiding a deny.
    if (errored !== null && (allow.length > 0 || this.defaultEffect === 'allow')) {
      return decision(this.onError, 'evaluation_error', Object.freeze(errors.map((error) => error.rule)), null, errors);
    }
    if (allow.length > 0) return decision('allow', 'rule', ids(allow), null, errors);
    return decision(this.defaultEffect, 'default', NO_RULES, null, errors);
  }
}

function newBucket(): Bucket {
  return { byTool: new Map(), otherTools: [] };
}

/** Whether a rule whose names match applies to the call: true, false, or why it cannot tell. */
function conditionalOutcome(rule: CompiledRule, call: PolicyCall, args: unknown): Outcome {
  if (rule.mode !== undefined && rule.mode !== call.execution_mode) return false;
  if (rule.principal !== null && !rule.principal(call.principal)) return false;
  return rule.check === null ? true : rule.check(args);
}

function appliedRules(conditional: readonly CompiledRule[], applied: number): CompiledRule[] {
  const rules: CompiledRule[] = [];
  for (let i = 0; i < conditional.length; i++) if ((applied & (1 << i)) !== 0) rules.push(conditional[i]!);
  return rules;
}

/** The rules of `always` and those of `applied` with this effect, both sorted by id, in one sorted list. */
function merge(always: readonly CompiledRule[], applied: readonly CompiledRule[], effect: Effect): readonly CompiledRule[] {
  let more: CompiledRule[] | null = null;
  for (const rule of applied) if (rule.effect === effect) (more ??= []).push(rule);
  if (more === null) return always;
  if (always.length === 0) return more;
  const out: CompiledRule[] = [];
  let a = 0;
  let b = 0;
  while (a < always.length && b < more.length) out.push(byId(always[a]!, more[b]!) < 0 ? always[a++]! : more[b++]!);
  while (a < always.length) out.push(always[a++]!);
  while (b < more.length) out.push(more[b++]!);
  return out;
}

function byId(a: CompiledRule, b: CompiledRule): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : a.index - b.index;
}

function ids(rules: readonly CompiledRule[]): string[] {
  return Object.freeze(rules.map((rule) => rule.id)) as string[];
}

function decision(effect: Effect, reason: PolicyDecision['reason'], rules: readonly string[], route: string | null, errors: PolicyDecision['errors']): PolicyDecision {
  return Object.freeze({ decision: effect, reason, rules: rules as string[], approval_route: route, errors });
}

function compileRule(rule: PolicyRule, index: number): CompiledRule {
  return {
    id: rule.id,
    index,
    effect: rule.effect,
    approvalRoute: typeof rule.approval_route === 'string' ? rule.approval_route : undefined,
    names: compileNameScope(rule),
    mode: rule.execution_mode,
    principal: rule.principals === undefined ? null : compilePrincipals(rule.principals),
    check: rule.arguments === undefined ? null : compileConditions(rule.arguments),
  };
}

function compileNameScope(rule: PolicyRule): (server: string, tool: string) => boolean {
  const server = rule.servers === undefined ? null : compileNames(rule.servers);
  const anyTool = rule.tools === undefined && rule.tool_prefixes === undefined;
  const tool = rule.tools === undefined ? null : compileNames(rule.tools);
  const prefixes = rule.tool_prefixes ?? [];
  return (serverName, toolName) =>
    (server === null || server(serverName)) && (anyTool || (tool !== null && tool(toolName)) || prefixes.some((prefix) => toolName.startsWith(prefix)));
}

function compileNames(patterns: string[]): (name: string) => boolean {
  const exact = new Set(patterns.filter((pattern) => !isGlob(pattern)));
  const globs: GlobMatcher[] = patterns.filter(isGlob).map(compileGlob);
  return (name) => exact.has(name) || globs.some((glob) => glob(name));
}

// The per-call helpers below are loops rather than .some(callback): a decision
// sits on every tool call's path, and closures over the call would allocate.
function holdsAny(wanted: Set<string> | null, held: string[] | undefined): boolean {
  if (wanted === null || held === undefined) return false;
  for (const value of held) if (wanted.has(value)) return true;
  return false;
}

function compilePrincipals(match: PrincipalMatch): (principal: CallPrincipal | undefined) => boolean {
  const set = (values: string[] | undefined) => (values === undefined ? null : new Set(values));
  const users = set(match.users);
  const roles = set(match.roles);
  const groups = set(match.groups);
  const gateways = set(match.gateways);
  const sessions = set(match.sessions);
  return (principal) =>
    principal != null &&
    ((users !== null && principal.user !== undefined && users.has(principal.user)) ||
      holdsAny(roles, principal.roles) ||
      holdsAny(groups, principal.groups) ||
      (gateways !== null && principal.gateway !== undefined && gateways.has(principal.gateway)) ||
      (sessions !== null && principal.session !== undefined && sessions.has(principal.session)));
}

/**
 * Three-valued AND: a false condition means the rule does not apply, whatever
 * else errs; otherwise the first error in document order names the failure.
 */
function compileConditions(conditions: ArgumentCondition[]): Check {
  const checks = conditions.map(compileCondition);
  return (args) => {
    let error: string | null = null;
    for (const check of checks) {
      const outcome = check(args);
      if (outcome === false) return false;
      if (typeof outcome === 'string') error ??= outcome;
    }
    return error ?? true;
  };
}

type Operator = (value: unknown) => Outcome;

function compileCondition(condition: ArgumentCondition, index: number): Check {
  const label = `arguments[${index}] (path "${condition.path}")`;
  const segments = String(condition.path).split('.');
  const missing = `${label}: the path is missing`;
  const operators: Operator[] = [];
  if (condition.equals !== undefined) operators.push(compileEquals(condition.equals, missing));
  if (condition.in !== undefined) operators.push(compileIn(condition.in, missing));
  if (condition.regex !== undefined) operators.push(compileRegex(condition.regex, label, missing));
  if (condition.range !== undefined) operators.push(compileRange(condition.range, label, missing));
  const exists = condition.exists;
  if (exists !== undefined) operators.push((value) => (value !== MISSING) === exists);
  // only an unvalidated document gets here; a condition that says nothing cannot grant
  if (operators.length === 0) return () => `${label}: the condition has no operator`;
  // several operators (again only unvalidated) must all hold, with the same three-valued AND
  return (args) => {
    const value = resolve(args, segments);
    let error: string | null = null;
    for (const operator of operators) {
      const outcome = operator(value);
      if (outcome === false) return false;
      if (typeof outcome === 'string') error ??= outcome;
    }
    return error ?? true;
  };
}

const INDEX = /^(?:0|[1-9][0-9]*)$/;

function resolve(args: unknown, segments: string[]): unknown {
  let value = args;
  for (const segment of segments) {
    if (typeof value !== 'object' || value === null) return MISSING;
    if (Array.isArray(value)) {
      if (!INDEX.test(segment)) return MISSING;
      const position = Number(segment);
      if (position >= value.length) return MISSING;
      value = value[position];
    } else {
      if (!Object.prototype.hasOwnProperty.call(value, segment)) return MISSING;
      value = (value as Record<string, unknown>)[segment];
    }
  }
  return value;
}

function compileEquals(expected: unknown, missing: string): Operator {
  if (isScalar(expected)) return (value) => (value === MISSING ? missing : value === expected);
  return (value) => (value === MISSING ? missing : jsonEqual(value, expected));
}

function compileIn(options: unknown[], missing: string): Operator {
  const list = Array.isArray(options) ? options : [];
  const scalars = new Set(list.filter(isScalar));
  const structured = list.filter((option) => !isScalar(option));
  return (value) => {
    if (value === MISSING) return missing;
    if (isScalar(value)) return scalars.has(value);
    return structured.some((option) => jsonEqual(value, option));
  };
}

function compileRegex(source: string, label: string, missing: string): Operator {
  let regex: RegExp | null = null;
  let broken = '';
  try {
    regex = new RegExp(source, 'u');
  } catch (error) {
    broken = `${label}: the regex does not compile: ${(error as Error).message}`;
  }
  const notString = `${label}: the value is not a string`;
  return (value) => {
    if (value === MISSING) return missing;
    if (typeof value !== 'string') return notString;
    return regex ? regex.test(value) : broken;
  };
}

function compileRange(range: { gt?: number; gte?: number; lt?: number; lte?: number }, label: string, missing: string): Operator {
  const { gt, gte, lt, lte } = range;
  const notNumber = `${label}: the value is not a finite number`;
  return (value) => {
    if (value === MISSING) return missing;
    if (typeof value !== 'number' || !Number.isFinite(value)) return notNumber;
    return (gt === undefined || value > gt) && (gte === undefined || value >= gte) && (lt === undefined || value < lt) && (lte === undefined || value <= lte);
  };
}

/** Strings, finite-or-not numbers, booleans and null compare by ===; NaN equals nothing. */
function isScalar(value: unknown): value is string | number | boolean | null {
  return value === null || (typeof value !== 'object' && !Number.isNaN(value));
}

/** JSON equality: key order ignored, arrays ordered, null equals only null. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    if (!Object.prototype.hasOwnProperty.call(b, key)) return false;
    if (!jsonEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])) return false;
  }
  return true;
}
