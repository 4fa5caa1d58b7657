import { compileNameGlob, isNameGlob, type NameGlob } from '@aileron/glob';
import { compileTest, testAll, type ArgumentTest, type Outcome } from './argument-test';
import type { CallPrincipal, PolicyCall } from './policy-decision';
import type { Effect, ExecutionMode, PolicyRule } from './policy-document';
import { ANYONE, compilePrincipals, FIELD_BITS, plainPrincipals, PRINCIPAL_FIELDS, type Who } from './principal-table';

// A rule of the document compiled once: its names (servers and tools), which
// place it in the index, and its condition, which each call is tested against.

/**
 * The part of a rule that varies from call to call of one (server, tool)
 * pair: execution mode, principals, arguments. Rules that say the same share
 * one, so that a policy repeating a rule for each of its servers keeps one
 * copy of the data every call runs through.
 */
export interface Condition {
  /** tells conditions apart in the keys of `PolicyIndex.lists` */
  readonly serial: number;
  readonly mode: ExecutionMode | undefined;
  readonly principal: ((principal: CallPrincipal | undefined) => boolean) | null;
  /**
   * The condition's bit in the policy's PrincipalTable, given once all rules
   * are compiled; 0 when `principal` alone can tell. A condition with a mode
   * but neither principals nor arguments has one too, which every principal
   * holds (see `Entry.always`).
   */
  bit: number;
  /** the principal fields the condition names, as PrincipalTable field bits */
  readonly fields: number;
  /** the argument conditions, all of which must hold; null when the rule has none */
  readonly tests: readonly ArgumentTest[] | null;
  /** the first of them, when there are one or two: the list need not be fetched */
  readonly test: ArgumentTest | null;
  /** the second, when there are two */
  readonly second: ArgumentTest | null;
}

export interface CompiledRule {
  readonly id: string;
  /** position in the document: breaks ties between equal ids, as a stable sort would */
  readonly index: number;
  readonly effect: Effect;
  readonly approvalRoute: string | undefined;
  /** the server and tool part of the scope, which depends on nothing else in the call (the tool prefix is the server's) */
  readonly names: (server: string, tool: string, toolPrefix: string | undefined) => boolean;
  /** null when the rule applies to every call its names match */
  readonly condition: Condition | null;
}

export function compileRule(
  rule: PolicyRule,
  index: number,
  conditions: Map<string | number, Condition>,
  plain: Map<Condition, Who>,
): CompiledRule {
  return {
    id: rule.id,
    index,
    effect: rule.effect,
    approvalRoute: typeof rule.approval_route === 'string' ? rule.approval_route : undefined,
    names: compileNameScope(rule),
    condition: compileCondition(rule, conditions, plain),
  };
}

/**
 * `conditions` holds those compiled so far: by key, and under their serial
 * those that have none; `plain`, the principal matches a PrincipalTable can hold.
 */
function compileCondition(
  rule: PolicyRule,
  conditions: Map<string | number, Condition>,
  plain: Map<Condition, Who>,
): Condition | null {
  if (rule.execution_mode === undefined && rule.principals === undefined && rule.arguments === undefined) return null;
  const key = conditionKey(rule);
  const known = key === null ? undefined : conditions.get(key);
  if (known !== undefined) return known;
  // a mode alone takes a table bit too, one that every principal holds
  const who =
    rule.principals !== undefined ? plainPrincipals(rule.principals) : rule.arguments === undefined ? ANYONE : null;
  const tests = rule.arguments === undefined ? null : rule.arguments.map(compileTest);
  // in the order a decision reads them: an object's fields lie in memory in the order they were added
  const condition: Condition = {
    mode: rule.execution_mode,
    bit: 0,
    principal: rule.principals === undefined ? null : compilePrincipals(rule.principals),
    test: tests !== null && (tests.length === 1 || tests.length === 2) ? tests[0]! : null,
    second: tests !== null && tests.length === 2 ? tests[1]! : null,
    tests,
    serial: conditions.size,
    fields:
      who === null
        ? 0
        : PRINCIPAL_FIELDS.reduce(
            (fields, field) => (who[field] === undefined ? fields : fields | FIELD_BITS[field]),
            0,
          ),
  };
  conditions.set(key ?? condition.serial, condition);
  if (who !== null) plain.set(condition, who);
  return condition;
}

/**
 * A text that equal conditions, and only they, share; null for a condition
 * that JSON cannot tell apart from a different one (NaN and null, a missing
 * key and an undefined one, objects with a prototype or toJSON), which then
 * keeps a compiled copy of its own.
 */
function conditionKey(rule: PolicyRule): string | null {
  const parts: Record<string, unknown> = {};
  if (rule.execution_mode !== undefined) parts.mode = rule.execution_mode;
  if (rule.principals !== undefined) parts.principals = rule.principals;
  if (rule.arguments !== undefined) parts.arguments = rule.arguments;
  let faithful = true;
  const key = JSON.stringify(parts, function (this: Record<string, unknown>, name: string, value: unknown) {
    const original = this[name];
    if (typeof original === 'object' && original !== null) {
      const prototype = Object.getPrototypeOf(original) as unknown;
      const plain = Array.isArray(original)
        ? prototype === Array.prototype
        : prototype === Object.prototype || prototype === null;
      if (!plain || typeof (original as { toJSON?: unknown }).toJSON === 'function') faithful = false;
    } else if (typeof original === 'number') {
      // -0 prints as 0, which every operator treats alike
      if (!Number.isFinite(original)) faithful = false;
    } else if (original !== null && typeof original !== 'string' && typeof original !== 'boolean') {
      faithful = false;
    }
    return value;
  });
  return faithful ? key : null;
}

function compileNameScope(rule: PolicyRule): (server: string, tool: string, toolPrefix: string | undefined) => boolean {
  const server = rule.servers === undefined ? null : compileNames(rule.servers);
  const anyTool = rule.tools === undefined && rule.tool_prefixes === undefined;
  const tool = rule.tools === undefined ? null : compileNames(rule.tools);
  const prefixes = rule.tool_prefixes ?? [];
  // only names and prefixes with "__" can name a namespaced name: the others mean what they always meant
  const namespacedTools = (rule.tools ?? []).filter(isNamespacedName);
  const namespaced = namespacedTools.length === 0 ? null : compileNames(namespacedTools);
  const namespacedPrefixes = prefixes.filter(isNamespacedName);
  const namespacedMatch =
    namespaced === null && namespacedPrefixes.length === 0
      ? null
      : (name: string) =>
          (namespaced !== null && namespaced(name)) || namespacedPrefixes.some((prefix) => name.startsWith(prefix));
  return (serverName, toolName, toolPrefix) =>
    (server === null || server(serverName)) &&
    (anyTool ||
      (tool !== null && tool(toolName)) ||
      prefixes.some((prefix) => toolName.startsWith(prefix)) ||
      (namespacedMatch !== null &&
        (namespacedMatch(`${serverName}__${toolName}`) ||
          (toolPrefix !== undefined && namespacedMatch(`${toolPrefix}__${toolName}`)))));
}

/** A tool name, glob or prefix that can name a tool as `<server or tool prefix>__<tool>`. */
export function isNamespacedName(pattern: string): boolean {
  return pattern.includes('__');
}

function compileNames(patterns: string[]): (name: string) => boolean {
  const exact = new Set(patterns.filter((pattern) => !isNameGlob(pattern)));
  const globs: NameGlob[] = patterns.filter(isNameGlob).map(compileNameGlob);
  return (name) => exact.has(name) || globs.some((glob) => glob(name));
}

// The per-call helpers below are loops rather than .some(callback): a decision

/** Whether a rule whose names match applies to the call: true, false, or why it cannot tell. */
export function outcomeOf(condition: Condition, call: PolicyCall, args: unknown): Outcome {
  if (condition.mode !== undefined && condition.mode !== call.execution_mode) return false;
  if (condition.principal !== null && !condition.principal(call.principal)) return false;
  return condition.tests === null ? true : testAll(condition.tests, args);
}
