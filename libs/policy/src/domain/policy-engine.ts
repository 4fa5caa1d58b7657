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
  readonly inScope: (call: PolicyCall) => boolean;
  readonly check: Check | null;
}

interface Bucket {
  readonly byTool: Map<string, CompiledRule[]>;
  /** rules with tool globs, tool prefixes, or no tool restriction */
  readonly otherTools: CompiledRule[];
}

const EMPTY_ARGUMENTS: Record<string, unknown> = Object.freeze({});
const MISSING: unique symbol = Symbol('missing');

class PolicyIndex implements CompiledPolicy {
  readonly defaultEffect: DefaultEffect;
  readonly onError: OnError;
  readonly ruleCount: number;
  private readonly byServer = new Map<string, Bucket>();
  /** rules with server globs or no server restriction */
  private readonly otherServers: Bucket = newBucket();

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
    const matched: Matched = { deny: null, approval: null, allow: null, errored: null };
    const args = call.arguments ?? EMPTY_ARGUMENTS;
    const exact = this.byServer.get(call.server);
    if (exact) {
      consider(exact.byTool.get(call.tool), call, args, matched);
      consider(exact.otherTools, call, args, matched);
    }
    consider(this.otherServers.byTool.get(call.tool), call, args, matched);
    consider(this.otherServers.otherTools, call, args, matched);
    return decide(matched, this.defaultEffect, this.onError);
  }

  listable(call: Omit<PolicyCall, 'arguments'>): boolean {
    let opens = this.defaultEffect === 'allow';
    const exact = this.byServer.get(call.server);
    for (const rules of [exact?.byTool.get(call.tool), exact?.otherTools, this.otherServers.byTool.get(call.tool), this.otherServers.otherTools]) {
      for (const rule of rules ?? []) {
        if (!rule.inScope(call)) continue;
        // a deny with no argument conditions applies to every call of the tool
        if (rule.effect === 'deny' && rule.check === null) return false;
        if (rule.effect !== 'deny') opens = true;
      }
    }
    return opens;
  }
}

function newBucket(): Bucket {
  return { byTool: new Map(), otherTools: [] };
}

interface Matched {
  deny: CompiledRule[] | null;
  approval: CompiledRule[] | null;
  allow: CompiledRule[] | null;
  errored: { rule: CompiledRule; message: string }[] | null;
}

function consider(rules: CompiledRule[] | undefined, call: PolicyCall, args: unknown, matched: Matched): void {
  if (!rules) return;
  for (const rule of rules) {
    if (!rule.inScope(call)) continue;
    const outcome = rule.check ? rule.check(args) : true;
    if (outcome === false) continue;
    if (typeof outcome === 'string') {
      (matched.errored ??= []).push({ rule, message: outcome });
      // a rule that cannot be evaluated still restricts; it never grants
      if (rule.effect === 'allow') continue;
    }
    if (rule.effect === 'deny') (matched.deny ??= []).push(rule);
    else if (rule.effect === 'approval') (matched.approval ??= []).push(rule);
    else if (rule.effect === 'allow') (matched.allow ??= []).push(rule);
  }
}

function byId(a: CompiledRule, b: CompiledRule): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : a.index - b.index;
}

function ids(rules: CompiledRule[]): string[] {
  return rules.sort(byId).map((rule) => rule.id);
}

function decide(matched: Matched, defaultEffect: DefaultEffect, onError: OnError): PolicyDecision {
  const errors = matched.errored ? matched.errored.sort((a, b) => byId(a.rule, b.rule)).map(({ rule, message }) => ({ rule: rule.id, message })) : [];
  if (matched.deny) return { decision: 'deny', reason: 'rule', rules: ids(matched.deny), approval_route: null, errors };
  if (matched.approval) {
    const rules = matched.approval.sort(byId);
    const routed = rules.find((rule) => rule.approvalRoute !== undefined);
    return { decision: 'approval', reason: 'rule', rules: rules.map((rule) => rule.id), approval_route: routed?.approvalRoute ?? null, errors };
  }
  // An allow must not stand when some rule could not say what it wanted:
  // the failure could be hiding a deny.
  if (matched.errored && (matched.allow || defaultEffect === 'allow')) {
    return { decision: onError, reason: 'evaluation_error', rules: errors.map((error) => error.rule), approval_route: null, errors };
  }
  if (matched.allow) return { decision: 'allow', reason: 'rule', rules: ids(matched.allow), approval_route: null, errors };
  return { decision: defaultEffect, reason: 'default', rules: [], approval_route: null, errors };
}

function compileRule(rule: PolicyRule, index: number): CompiledRule {
  return {
    id: rule.id,
    index,
    effect: rule.effect,
    approvalRoute: typeof rule.approval_route === 'string' ? rule.approval_route : undefined,
    inScope: compileScope(rule),
    check: rule.arguments === undefined ? null : compileConditions(rule.arguments),
  };
}

function compileScope(rule: PolicyRule): (call: PolicyCall) => boolean {
  const server = rule.servers === undefined ? null : compileNames(rule.servers);
  const anyTool = rule.tools === undefined && rule.tool_prefixes === undefined;
  const tool = rule.tools === undefined ? null : compileNames(rule.tools);
  const prefixes = rule.tool_prefixes ?? [];
  const mode = rule.execution_mode;
  const principal = rule.principals === undefined ? null : compilePrincipals(rule.principals);
  return (call) =>
    (server === null || server(call.server)) &&
    (anyTool || (tool !== null && tool(call.tool)) || startsWithAny(call.tool, prefixes)) &&
    (mode === undefined || mode === call.execution_mode) &&
    (principal === null || principal(call.principal));
}

// The per-call helpers below are loops rather than .some(callback): a decision
// sits on every tool call's path, and closures over the call would allocate.
function startsWithAny(tool: string, prefixes: string[]): boolean {
  for (const prefix of prefixes) if (tool.startsWith(prefix)) return true;
  return false;
}

function compileNames(patterns: string[]): (name: string) => boolean {
  const exact = new Set(patterns.filter((pattern) => !isGlob(pattern)));
  const globs: GlobMatcher[] = patterns.filter(isGlob).map(compileGlob);
  if (globs.length === 0) return (name) => exact.has(name);
  return (name) => {
    if (exact.has(name)) return true;
    for (const glob of globs) if (glob(name)) return true;
    return false;
  };
}

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
