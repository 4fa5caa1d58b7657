import { RE2JS } from 're2js';
import type { PolicyCall, PolicyDecision } from './policy-decision';
import type { PolicyDocument } from './policy-document';

/*
 * THE SPECIFICATION of policy decisions, as code: what the engine
 * (`compilePolicy(document, options).evaluate(call)`, policy-engine.ts) must
 * answer for every document `parsePolicyDocument` accepts and every call.
 * docs/policy.md says the same in prose, section by section as below; where
 * they disagree, one of them has a bug.
 *
 * It is the slow, obvious implementation on purpose, to be read top to
 * bottom: every rule is looked at for every call, every regex compiled
 * afresh, globs matched by backtracking, nothing remembered between calls.
 * It shares no code with the engine (only the types of a call and a
 * decision), so that a shortcut in one cannot hide the same mistake in both.
 *
 * The differential test (test/policy/differential.test.ts) keeps the engine
 * equal to it: it compares both on random policies and calls and shrinks any
 * disagreement to a minimal case. To change what policies mean, change this
 * file and docs/policy.md first, then the engine until the test agrees.
 *
 * Not specified here: the wording of error messages (only which rules erred),
 * and documents that validation refuses, which the engine decides without
 * throwing and this file may throw on. Production code never calls it.
 */

type Rule = PolicyDocument['rules'][number];
type Condition = NonNullable<Rule['arguments']>[number];
type Principals = NonNullable<Rule['principals']>;
type CallPrincipal = NonNullable<PolicyCall['principal']>;
type Effect = PolicyDecision['decision'];
type Truth = 'true' | 'false' | 'error';

export interface ReferenceOptions {
  defaultEffect: 'allow' | 'deny';
}

const hasOwn = (value: object, key: string): boolean => Object.prototype.hasOwnProperty.call(value, key);

// --- Globs ---------------------------------------------------------------------
// `*` any run of characters (also none), `?` exactly one, all else literal; the
// whole name must match. A character is a Unicode code point.

// Backtracking rather than a RegExp translation, so that a bug in escaping
// regex metacharacters on the engine side cannot be mirrored here.
export function globMatches(pattern: string, name: string): boolean {
  return globFrom([...pattern], 0, [...name], 0);
}

function globFrom(pattern: string[], p: number, name: string[], n: number): boolean {
  if (p === pattern.length) return n === name.length;
  const token = pattern[p];
  if (token === '*') {
    for (let end = n; end <= name.length; end++) {
      if (globFrom(pattern, p + 1, name, end)) return true;
    }
    return false;
  }
  if (n === name.length) return false;
  if (token === '?' || token === name[n]) return globFrom(pattern, p + 1, name, n + 1);
  return false;
}

function anyGlob(patterns: string[], name: string): boolean {
  for (const pattern of patterns) {
    if (globMatches(pattern, name)) return true;
  }
  return false;
}

// --- Which rules apply to a call ------------------------------------------------
// Server, tool, execution mode and principal here; the arguments below.

function oneOf(candidates: string[] | undefined, value: string | undefined): boolean {
  if (candidates === undefined || value === undefined) return false;
  for (const candidate of candidates) {
    if (candidate === value) return true;
  }
  return false;
}

function intersects(candidates: string[] | undefined, values: string[] | undefined): boolean {
  if (candidates === undefined || values === undefined) return false;
  for (const value of values) {
    if (oneOf(candidates, value)) return true;
  }
  return false;
}

function principalMatches(wanted: Principals, actual: CallPrincipal | undefined): boolean {
  if (actual === undefined) return false;
  return (
    oneOf(wanted.users, actual.user) ||
    intersects(wanted.roles, actual.roles) ||
    intersects(wanted.groups, actual.groups) ||
    oneOf(wanted.gateways, actual.gateway) ||
    oneOf(wanted.sessions, actual.session)
  );
}

function scopeMatches(rule: Rule, call: PolicyCall): boolean {
  if (rule.servers !== undefined && !anyGlob(rule.servers, call.server)) return false;

  if (rule.tools !== undefined || rule.tool_prefixes !== undefined) {
    // The tool's own name, and its namespaced names for the names and prefixes
    // that contain "__": `<server>__<tool>`, and `<tool_prefix>__<tool>` when the call gives one.
    const namespaced = [`${call.server}__${call.tool}`];
    if (call.tool_prefix !== undefined) namespaced.push(`${call.tool_prefix}__${call.tool}`);
    let toolMatches = false;
    for (const pattern of rule.tools ?? []) {
      if (globMatches(pattern, call.tool)) toolMatches = true;
      if (pattern.includes('__') && namespaced.some((name) => globMatches(pattern, name))) toolMatches = true;
    }
    for (const prefix of rule.tool_prefixes ?? []) {
      if (call.tool.startsWith(prefix)) toolMatches = true;
      if (prefix.includes('__') && namespaced.some((name) => name.startsWith(prefix))) toolMatches = true;
    }
    if (!toolMatches) return false;
  }

  if (rule.execution_mode !== undefined && rule.execution_mode !== call.execution_mode) return false;

  if (rule.principals !== undefined && !principalMatches(rule.principals, call.principal)) return false;

  return true;
}

// --- Paths ---------------------------------------------------------------------

type Resolution = { found: true; value: unknown } | { found: false };

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isCanonicalIndex(segment: string): boolean {
  return /^(0|[1-9][0-9]*)$/.test(segment);
}

// Own keys only: a path such as "toString" or "__proto__" must not reach the
// prototype chain, and "length" is not an element of an array.
export function resolvePath(root: unknown, path: string): Resolution {
  let current: unknown = root;
  for (const segment of path.split('.')) {
    if (isPlainObject(current) && hasOwn(current, segment)) {
      current = current[segment];
    } else if (Array.isArray(current) && isCanonicalIndex(segment) && Number(segment) < current.length) {
      current = current[Number(segment)];
    } else {
      return { found: false };
    }
  }
  return { found: true, value: current };
}

// --- Argument conditions -------------------------------------------------------
// Each holds ('true'), does not ('false'), or cannot be evaluated ('error').

// JSON equality: key order ignored, arrays in order, numbers by value, null only null.
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === null || b === null) return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) {
      if (!deepEqual(a[i], b[i])) return false;
    }
    return true;
  }
  if (isPlainObject(a) || isPlainObject(b)) {
    if (!isPlainObject(a) || !isPlainObject(b)) return false;
    const keysA = Object.keys(a);
    const keysB = Object.keys(b);
    if (keysA.length !== keysB.length) return false;
    for (const key of keysA) {
      if (!hasOwn(b, key) || !deepEqual(a[key], b[key])) return false;
    }
    return true;
  }
  // === already compares numbers by value (0 and -0 alike) and strings by content
  return a === b;
}

function evaluateCondition(condition: Condition, args: Record<string, unknown>): Truth {
  const resolved = resolvePath(args, condition.path);

  if (condition.exists !== undefined) {
    return resolved.found === condition.exists ? 'true' : 'false';
  }
  if (!resolved.found) return 'error';
  const value = resolved.value;

  // hasOwn rather than !== undefined: `equals: null` is a real comparison
  if (hasOwn(condition, 'equals')) {
    return deepEqual(value, condition.equals) ? 'true' : 'false';
  }
  if (condition.in !== undefined) {
    for (const candidate of condition.in) {
      if (deepEqual(value, candidate)) return 'true';
    }
    return 'false';
  }
  if (condition.regex !== undefined) {
    if (typeof value !== 'string') return 'error';
    // the specification says RE2 syntax (docs/policy.md): patterns are RE2's, compiled here on their own
    if (condition.regex.length > 1000) return 'error';
    let regex: RE2JS;
    try {
      regex = RE2JS.compile(condition.regex);
    } catch {
      return 'error';
    }
    return regex.test(value) ? 'true' : 'false';
  }
  if (condition.range !== undefined) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return 'error';
    const { gt, gte, lt, lte } = condition.range;
    if (gt !== undefined && !(value > gt)) return 'false';
    if (gte !== undefined && !(value >= gte)) return 'false';
    if (lt !== undefined && !(value < lt)) return 'false';
    if (lte !== undefined && !(value <= lte)) return 'false';
    return 'true';
  }
  // Validation refuses a condition without an operator (each has exactly one),
  // so none has a meaning to specify; failing loudly keeps that assumption honest.
  throw new Error(`reference evaluator: condition on "${condition.path}" has no operator`);
}

// --- When a rule cannot be evaluated -------------------------------------------
// A rule applies when its scope matches and every condition holds; any false
// condition means it does not apply, whatever else errs; otherwise an error in
// any condition means it could not be evaluated.

type RuleOutcome = 'matched' | 'errored' | 'not_applicable';

function evaluateRule(rule: Rule, call: PolicyCall): RuleOutcome {
  if (!scopeMatches(rule, call)) return 'not_applicable';
  const args = call.arguments ?? {};
  let errored = false;
  let failed = false;
  // Every condition is evaluated, never short-circuited, so that a false
  // condition after an erroring one still wins, as the spec's "any false" says.
  for (const condition of rule.arguments ?? []) {
    const truth = evaluateCondition(condition, args);
    if (truth === 'false') failed = true;
    if (truth === 'error') errored = true;
  }
  if (failed) return 'not_applicable';
  if (errored) return 'errored';
  return 'matched';
}

// --- The decision --------------------------------------------------------------

const sortedIds = (rules: Rule[]): string[] => rules.map((rule) => rule.id).sort();

/** The decision on `call` under `document`; `options.defaultEffect` is the workspace's default. */
export function referenceEvaluate(
  document: PolicyDocument,
  call: PolicyCall,
  options: ReferenceOptions,
): PolicyDecision {
  // 1. The rules that apply, and those that could not be evaluated. Rule order never matters.
  const matched: Rule[] = [];
  const errored: Rule[] = [];
  for (const rule of document.rules) {
    const outcome = evaluateRule(rule, call);
    if (outcome === 'matched') matched.push(rule);
    if (outcome === 'errored') errored.push(rule);
  }

  // A broken restriction still restricts; a broken allow never grants.
  const effective: Rule[] = [...matched];
  for (const rule of errored) {
    if (rule.effect === 'deny' || rule.effect === 'approval') effective.push(rule);
  }
  const withEffect = (effect: Effect): Rule[] => effective.filter((rule) => rule.effect === effect);

  let decision: Effect;
  let reason: PolicyDecision['reason'];
  let rules: string[];
  let approvalRoute: string | null = null;

  // 2. Deny beats approval beats allow; with none of them, the default.
  const denies = withEffect('deny');
  const approvals = withEffect('approval');
  const allows = withEffect('allow');
  if (denies.length > 0) {
    decision = 'deny';
    reason = 'rule';
    rules = sortedIds(denies);
  } else if (approvals.length > 0) {
    decision = 'approval';
    reason = 'rule';
    rules = sortedIds(approvals);
    // Array.prototype.sort is stable, so equal ids keep document order
    const byId = [...approvals].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
    const routed = byId.find((rule) => rule.approval_route !== undefined);
    approvalRoute = routed?.approval_route ?? null;
  } else if (allows.length > 0) {
    decision = 'allow';
    reason = 'rule';
    rules = sortedIds(allows);
  } else {
    decision = document.default ?? options.defaultEffect;
    reason = 'default';
    rules = [];
  }

  // 3. An allow must not stand when some rule could not say what it wanted.
  if (errored.length > 0 && decision === 'allow') {
    decision = document.on_error ?? 'deny';
    reason = 'evaluation_error';
    rules = sortedIds(errored);
    approvalRoute = null;
  }

  const errors = [...errored]
    .sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0))
    .map((rule) => ({ rule: rule.id, message: 'condition could not be evaluated' }));

  return { decision, reason, rules, approval_route: approvalRoute, errors };
}
