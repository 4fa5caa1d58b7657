import { isNameGlob } from '@aileron/glob';
import { testAll, testArgument, type Outcome } from './argument-test';
import { compileRule, isNamespacedName, outcomeOf, type CompiledRule, type Condition } from './compiled-rule';
import type { CompiledPolicy, PolicyCall, PolicyDecision } from './policy-decision';
import type { DefaultEffect, Effect, OnError, PolicyDocument, PolicyRule } from './policy-document';
import { PrincipalTable, UNUSUAL, type Who } from './principal-table';

/**
 * How many (server, tool) pairs, plus decisions remembered within them, one
 * compiled policy keeps. Callers choose tool names freely, so the memo must
 * not grow with them; past the bound it starts over.
 */
export const DECISION_MEMO_LIMIT = 10_000;

interface Bucket {
  readonly byTool: Map<string, CompiledRule[]>;
  /** rules with tool globs, tool prefixes, or no tool restriction */
  readonly otherTools: CompiledRule[];
}

/**
 * How calls are decided for every (server, tool) pair whose conditional
 * rules have the same conditions and effects, in the same order: pairs that
 * differ only in the ids of their rules (one server's copy of a rule and
 * another's) share one, so what every call reads stays in cache.
 *
 * A call's outcome is a bit set, the key of the decisions remembered. The
 * conditions that are only a mode and a principal match the PrincipalTable
 * holds ("static" below) take their table bits in it: the table answers for
 * all of them at once, so a policy whose rules name principals on every
 * server costs a call no more than one that names them once. The other
 * conditions (arguments, principals of an unusual form) are tested one by
 * one and take the bits above those.
 *
 * The call's principal is read once per decision where it can be: after the
 * conditions tested one by one (unless one of them names principals), for
 * the static `deny` and `approval` conditions and, unless a condition tested
 * one by one already restricted the call, the static `allow` conditions too.
 * A policy that denies a group everywhere and allows roles per server then
 * pays one look at the principal, not one per kind of rule. Static `allow`
 * bits count only when no `deny` or `approval` rule applies: otherwise they
 * could change neither the decision nor the rules it names.
 */
interface Plan {
  /** false when the outcome does not fit a small integer, and each rule is evaluated on its own */
  readonly fast: boolean;
  /** the principal fields that static `deny` and `approval` conditions, and those of the loop, name */
  readonly fields: number;
  /** those the conditions of the loop name: when there are any, the principal is read before the loop */
  readonly loopFields: number;
  /** the PrincipalTable narrowed to these conditions; null when none of them names principals */
  readonly principals: PrincipalTable | null;
  /** table bits of the static conditions that name a mode but no principal: they hold for any principal */
  readonly always: number;
  /** table bits of the static `deny` and `approval` conditions that hold in `local` mode, and in `remote`; in any other, those of both */
  readonly local: number;
  readonly remote: number;
  /** the conditions tested one by one, in id order of their rules */
  readonly loop: readonly Condition[];
  /** the bit of `loop[0]`; `loop[i]` has the bit 1 << (shift + i) */
  readonly shift: number;
  /**
   * Whether the static conditions are answered by the table; when the table
   * bits and the others do not fit a small integer together, every
   * condition is in the loop instead.
   */
  readonly byTable: boolean;
  /** outcome bits of `deny` and `approval` rules: when one is set, static `allow` conditions are not looked at */
  readonly restricts: number;
  /** like `fields`, `local` and `remote`, for the static `allow` conditions; all 0 when there are none */
  readonly grantFields: number;
  readonly grantLocal: number;
  readonly grantRemote: number;
  /** the bits of the conditional rules, position for position: a rule applied when the outcome has any of its */
  readonly bits: readonly number[];
}

/**
 * What one (server, tool) pair needs at decision time, worked out on its
 * first call. The fields a decision reads come first: memory is fetched a
 * line at a time, and an entry often has to come from memory.
 */
interface Entry {
  /** null when no rule of the pair is conditional */
  readonly plan: Plan | null;
  /** the decision when no conditional rule applies: the only one when there are none */
  readonly fixed: PolicyDecision;
  // The first bit sets seen after none (-1 until then), with their decisions:
  // calls of one tool come out alike often enough that looking here first
  // mostly spares fetching the map's storage.
  set1: number;
  decision1: PolicyDecision | null;
  set2: number;
  decision2: PolicyDecision | null;
  set3: number;
  decision3: PolicyDecision | null;
  /** decisions of calls without evaluation errors, by outcome; null unless the plan is fast */
  readonly byOutcome: Map<number, PolicyDecision> | null;
  /** the rules of `plan.loop`, position for position */
  readonly loopRules: readonly CompiledRule[];
  /** rules that depend on the execution mode, the principal or the arguments, sorted by id */
  readonly conditional: readonly CompiledRule[];
  /** their conditions, position for position */
  readonly conditions: readonly Condition[];
  /** rules that apply to every call of the pair, by effect, sorted by id */
  readonly deny: readonly CompiledRule[];
  readonly approval: readonly CompiledRule[];
  readonly allow: readonly CompiledRule[];
  /** for tools/list, when no conditional rule applies */
  readonly opens: boolean;
}

interface Errored {
  readonly rule: CompiledRule;
  readonly message: string;
}

/** Bits of a small integer, so that bit sets stay cheap map keys. */
const OUTCOME_BITS = 30;
const EMPTY_ARGUMENTS: Record<string, unknown> = Object.freeze({});
const NO_RULES: string[] = Object.freeze([]) as unknown as string[];
const NO_ERRORS: PolicyDecision['errors'] = Object.freeze([]) as unknown as PolicyDecision['errors'];

export class PolicyIndex implements CompiledPolicy {
  readonly defaultEffect: DefaultEffect;
  readonly onError: OnError;
  readonly ruleCount: number;
  private readonly byServer = new Map<string, Bucket>();
  /** rules with server globs or no server restriction */
  private readonly otherServers: Bucket = newBucket();
  /**
   * The principal matches of all rules merged field by field, so that a
   * call's principal is looked at once however many rules name principals;
   * null when no rule names any, or more than a bit set holds.
   */
  private readonly table: PrincipalTable | null;
  // Nested rather than keyed by a joined string, so that a lookup allocates nothing.
  private readonly memo = new Map<string, Map<string, Entry>>();
  /** the same for calls whose server has a tool prefix, by prefix; used only when `namespaced` */
  private readonly prefixedMemo = new Map<string, Map<string, Map<string, Entry>>>();
  /**
   * whether a rule names tools as `<server or prefix>__<tool>`; without one, a
   * call's tool prefix decides nothing and its pairs share one memo
   */
  private readonly namespaced: boolean;
  /** pairs plus outcome decisions held in `memo` */
  private stored = 0;
  /** the condition lists of the entries in `memo`, by the serials of their conditions */
  private readonly lists = new Map<string, readonly Condition[]>();
  /** the narrowed tables of the entries in `memo`, by the bits they answer for */
  private readonly narrowed = new Map<number, PrincipalTable>();
  /** the plans of the entries in `memo`, by their conditions and effects */
  private readonly plans = new Map<string, Plan>();

  constructor(document: PolicyDocument, fallback: DefaultEffect) {
    this.defaultEffect = document.default ?? fallback;
    this.onError = document.on_error ?? 'deny';
    this.ruleCount = document.rules.length;
    const conditions = new Map<string | number, Condition>();
    const plain = new Map<Condition, Who>();
    document.rules.forEach((rule, index) => this.add(compileRule(rule, index, conditions, plain), rule));
    this.namespaced = document.rules.some(
      (rule) => (rule.tools ?? []).some(isNamespacedName) || (rule.tool_prefixes ?? []).some(isNamespacedName),
    );
    this.table = plain.size === 0 || plain.size > OUTCOME_BITS ? null : newTable(plain);
  }

  // A rule lands either in the exact buckets of its server names or in the
  // glob bucket, and likewise for tools, never both: a call's server matches at
  // most one exact bucket. Only a call's namespaced names (newEntry) can find a
  // rule under two of its tool names.
  private add(compiled: CompiledRule, rule: PolicyRule): void {
    const buckets: Bucket[] = [];
    if (rule.servers === undefined || rule.servers.some(isNameGlob)) {
      buckets.push(this.otherServers);
    } else {
      for (const server of new Set(rule.servers)) {
        let bucket = this.byServer.get(server);
        if (!bucket) this.byServer.set(server, (bucket = newBucket()));
        buckets.push(bucket);
      }
    }
    const anyTool = rule.tools === undefined && rule.tool_prefixes === undefined;
    const exactTools =
      !anyTool &&
      (rule.tool_prefixes === undefined || rule.tool_prefixes.length === 0) &&
      !(rule.tools ?? []).some(isNameGlob);
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
    const entry = this.entry(call.server, call.tool, call.tool_prefix);
    const plan = entry.plan;
    if (plan === null) return entry.fixed;
    if (!plan.fast) return this.evaluateRuleByRule(entry, call);
    let held = plan.always;
    // The principal fields read so far: before the loop only when a condition
    // in it names principals; otherwise after it, in one pass (see Plan).
    let read = 0;
    if (plan.loopFields !== 0) {
      const matched = plan.principals!.match(call.principal, plan.fields);
      if (matched === UNUSUAL) return this.evaluateRuleByRule(entry, call);
      held |= matched;
      read = plan.fields;
    }
    const mode = call.execution_mode;
    let applied = 0;
    const loop = plan.loop;
    const args = call.arguments ?? EMPTY_ARGUMENTS;
    let errored: Errored[] | null = null;
    for (let i = 0; i < loop.length; i++) {
      const condition = loop[i]!;
      if (condition.mode !== undefined && condition.mode !== mode) continue;
      if (condition.bit !== 0) {
        if ((held & condition.bit) === 0) continue;
      } else if (condition.principal !== null && !condition.principal(call.principal)) continue;
      if (condition.tests !== null) {
        const first = condition.test;
        let outcome: Outcome;
        if (first === null) outcome = testAll(condition.tests, args);
        else {
          outcome = testArgument(first, args);
          const second = condition.second;
          // testAll's three-valued AND, for two: false wins, then the first error
          if (second !== null && outcome !== false) {
            const next = testArgument(second, args);
            outcome = next === false ? false : outcome === true ? next : outcome;
          }
        }
        if (outcome === false) continue;
        if (outcome !== true) {
          const rule = entry.loopRules[i]!;
          (errored ??= []).push({ rule, message: outcome });
          // a rule that cannot be evaluated still restricts; it never grants
          if (rule.effect === 'allow') continue;
        }
      }
      applied |= 1 << (plan.shift + i);
    }
    const restricting = mode === 'local' ? plan.local : mode === 'remote' ? plan.remote : plan.local & plan.remote;
    const granting =
      mode === 'local' ? plan.grantLocal : mode === 'remote' ? plan.grantRemote : plan.grantLocal & plan.grantRemote;
    if (read === 0) {
      // what static denies and approvals name and, unless the loop already
      // restricted the call, what static allows name: one read of the principal
      const fields = (applied & plan.restricts) === 0 && granting !== 0 ? plan.fields | plan.grantFields : plan.fields;
      if (fields !== 0) {
        const matched = plan.principals!.match(call.principal, fields);
        if (matched === UNUSUAL) return this.evaluateRuleByRule(entry, call);
        held |= matched;
      }
      applied |= held & restricting;
    } else {
      applied |= held & restricting;
      const unread = plan.grantFields & ~read;
      if ((applied & plan.restricts) === 0 && granting !== 0 && unread !== 0) {
        // A table's match ORs what each field contributes, so these bits and
        // those read before the loop add up to a match on both.
        const matched = plan.principals!.match(call.principal, unread);
        if (matched === UNUSUAL) return this.evaluateRuleByRule(entry, call);
        held |= matched;
      }
    }
    if ((applied & plan.restricts) === 0) applied |= held & granting;
    // error messages vary with the arguments, so only error-free decisions are kept
    if (errored !== null) return this.compose(entry, appliedRules(entry, applied), errored);
    if (applied === 0) return entry.fixed;
    if (applied === entry.set1) return entry.decision1!;
    if (applied === entry.set2) return entry.decision2!;
    if (applied === entry.set3) return entry.decision3!;
    return this.decisionFor(entry, applied);
  }

  private decisionFor(entry: Entry, applied: number): PolicyDecision {
    const known = entry.byOutcome!.get(applied);
    if (known !== undefined) return known;
    const decision = this.compose(entry, appliedRules(entry, applied), null);
    if (this.stored >= DECISION_MEMO_LIMIT) return decision;
    entry.byOutcome!.set(applied, decision);
    this.stored++;
    if (entry.decision1 === null) {
      entry.set1 = applied;
      entry.decision1 = decision;
    } else if (entry.decision2 === null) {
      entry.set2 = applied;
      entry.decision2 = decision;
    } else if (entry.decision3 === null) {
      entry.set3 = applied;
      entry.decision3 = decision;
    }
    return decision;
  }

  /**
   * Rule by rule, each with its own principal match: for more conditional
   * rules than a bit set holds, and for principals of a form the table
   * leaves to the rules. Rare enough to allocate.
   */
  private evaluateRuleByRule(entry: Entry, call: PolicyCall): PolicyDecision {
    const args = call.arguments ?? EMPTY_ARGUMENTS;
    const conditions = entry.conditions;
    const applied: CompiledRule[] = [];
    let errored: Errored[] | null = null;
    for (let i = 0; i < conditions.length; i++) {
      const outcome = outcomeOf(conditions[i]!, call, args);
      if (outcome === false) continue;
      const rule = entry.conditional[i]!;
      if (outcome !== true) {
        (errored ??= []).push({ rule, message: outcome });
        if (rule.effect === 'allow') continue;
      }
      applied.push(rule);
    }
    return applied.length === 0 && errored === null ? entry.fixed : this.compose(entry, applied, errored);
  }

  listable(call: Omit<PolicyCall, 'arguments'>): boolean {
    const entry = this.entry(call.server, call.tool, call.tool_prefix);
    // a deny with no condition at all applies to every call of the tool
    if (entry.deny.length > 0) return false;
    let opens = entry.opens;
    const conditions = entry.conditions;
    for (let i = 0; i < conditions.length; i++) {
      const condition = conditions[i]!;
      if (condition.mode !== undefined && condition.mode !== call.execution_mode) continue;
      if (condition.principal !== null && !condition.principal(call.principal)) continue;
      const effect = entry.conditional[i]!.effect;
      // with no argument conditions, the deny applies to every call with this mode and principal
      if (effect === 'deny' && condition.tests === null) return false;
      if (effect !== 'deny') opens = true;
    }
    return opens;
  }

  private entry(server: string, tool: string, toolPrefix: string | undefined): Entry {
    const prefix = this.namespaced ? toolPrefix : undefined;
    const memo = prefix === undefined ? this.memo : this.prefixedMemo.get(prefix);
    const known = memo?.get(server)?.get(tool);
    return known !== undefined ? known : this.remember(server, tool, prefix);
  }

  private remember(server: string, tool: string, prefix: string | undefined): Entry {
    if (this.stored >= DECISION_MEMO_LIMIT) {
      // Starting over rather than refusing new pairs: pairs still in use come
      // back after one recomputation each, whoever filled the memo.
      this.memo.clear();
      this.prefixedMemo.clear();
      this.lists.clear();
      this.narrowed.clear();
      this.plans.clear();
      this.stored = 0;
    }
    const entry = this.newEntry(server, tool, prefix);
    let memo = this.memo;
    if (prefix !== undefined) {
      let byPrefix = this.prefixedMemo.get(prefix);
      if (byPrefix === undefined) this.prefixedMemo.set(prefix, (byPrefix = new Map()));
      memo = byPrefix;
    }
    let tools = memo.get(server);
    if (tools === undefined) memo.set(server, (tools = new Map()));
    tools.set(tool, entry);
    this.stored++;
    return entry;
  }

  private newEntry(server: string, tool: string, prefix: string | undefined): Entry {
    const exact = this.byServer.get(server);
    const candidates = [
      exact?.byTool.get(tool),
      exact?.otherTools,
      this.otherServers.byTool.get(tool),
      this.otherServers.otherTools,
    ];
    if (this.namespaced)
      for (const name of prefix === undefined ? [`${server}__${tool}`] : [`${server}__${tool}`, `${prefix}__${tool}`])
        candidates.push(exact?.byTool.get(name), this.otherServers.byTool.get(name));
    const named: CompiledRule[] = [];
    const seen = new Set<CompiledRule>();
    for (const rules of candidates) {
      for (const rule of rules ?? []) {
        if (seen.has(rule) || !rule.names(server, tool, prefix)) continue;
        seen.add(rule);
        named.push(rule);
      }
    }
    named.sort(byId);
    const deny: CompiledRule[] = [];
    const approval: CompiledRule[] = [];
    const allow: CompiledRule[] = [];
    let conditional: CompiledRule[] = [];
    let opens = this.defaultEffect === 'allow';
    for (const rule of named) {
      if (rule.condition !== null) {
        conditional.push(rule);
        continue;
      }
      if (rule.effect !== 'deny') opens = true;
      if (rule.effect === 'deny') deny.push(rule);
      else if (rule.effect === 'approval') approval.push(rule);
      else if (rule.effect === 'allow') allow.push(rule);
    }
    // Under a deny that always applies, only further denies and evaluation
    // errors can change the decision, and tools/list hides the tool anyway;
    // under an approval that always applies, an allow cannot change it either.
    if (deny.length > 0)
      conditional = conditional.filter((rule) => rule.effect === 'deny' || rule.condition!.tests !== null);
    else if (approval.length > 0)
      conditional = conditional.filter((rule) => rule.effect !== 'allow' || rule.condition!.tests !== null);
    const plan = conditional.length === 0 ? null : this.planFor(conditional);
    return {
      plan,
      fixed: this.compose({ deny, approval, allow }, [], null),
      set1: -1,
      decision1: null,
      set2: -1,
      decision2: null,
      set3: -1,
      decision3: null,
      byOutcome: plan !== null && plan.fast ? new Map() : null,
      loopRules:
        plan === null || !plan.byTable ? conditional : conditional.filter((rule) => !isStatic(rule.condition!)),
      conditional,
      conditions: this.listOf(conditional.map((rule) => rule.condition!)),
      deny,
      approval,
      allow,
      opens,
    };
  }

  /** The plan for conditional rules with these conditions and effects, in this order; shared while the memo holds it. */
  private planFor(conditional: readonly CompiledRule[]): Plan {
    // a plan tells effects apart only as granting, restricting, or neither (an unvalidated document's)
    const key = conditional
      .map((rule) => `${rule.condition!.serial}${rule.effect === 'allow' ? 'g' : restricts(rule) ? 'r' : 'n'}`)
      .join(',');
    let plan = this.plans.get(key);
    if (plan === undefined) this.plans.set(key, (plan = this.newPlan(conditional)));
    return plan;
  }

  private newPlan(conditional: readonly CompiledRule[]): Plan {
    let always = 0;
    let listed = 0;
    let fields = 0;
    let local = 0;
    let remote = 0;
    let grantFields = 0;
    let loopFields = 0;
    let grantLocal = 0;
    let grantRemote = 0;
    const looped: Condition[] = [];
    for (const rule of conditional) {
      const condition = rule.condition!;
      if (condition.principal === null) always |= condition.bit;
      else listed |= condition.bit;
      if (!isStatic(condition)) {
        looped.push(condition);
        if (condition.bit !== 0) loopFields |= condition.fields;
      } else if (rule.effect === 'allow') {
        grantFields |= condition.fields;
        if (condition.mode !== 'remote') grantLocal |= condition.bit;
        if (condition.mode !== 'local') grantRemote |= condition.bit;
      } else {
        fields |= condition.fields;
        if (condition.mode !== 'remote') local |= condition.bit;
        if (condition.mode !== 'local') remote |= condition.bit;
      }
    }
    const shift = 32 - Math.clz32(local | remote | grantLocal | grantRemote);
    const fits = shift + looped.length <= OUTCOME_BITS;
    const loop = fits ? looped : conditional.map((rule) => rule.condition!);
    let position = fits ? shift : 0;
    let restricting = 0;
    const bits = conditional.map((rule) => {
      const bit =
        fits && isStatic(rule.condition!) ? rule.condition!.bit : position < OUTCOME_BITS ? 1 << position++ : 0;
      if (restricts(rule)) restricting |= bit;
      return bit;
    });
    return {
      fast: loop.length <= OUTCOME_BITS,
      fields: fits ? fields | loopFields : fields | loopFields | grantFields,
      // every condition is in the loop when they do not fit, static ones included
      loopFields: fits ? loopFields : fields | loopFields | grantFields,
      principals: listed === 0 ? null : this.narrow(listed),
      // mode-only conditions tested one by one read their bit from the held bits too
      always,
      local: fits ? local : 0,
      remote: fits ? remote : 0,
      loop: this.listOf(loop),
      shift: fits ? shift : 0,
      byTable: fits,
      restricts: restricting,
      grantFields: fits ? grantFields : 0,
      grantLocal: fits ? grantLocal : 0,
      grantRemote: fits ? grantRemote : 0,
      bits,
    };
  }

  private narrow(mask: number): PrincipalTable {
    let table = this.narrowed.get(mask);
    if (table === undefined) this.narrowed.set(mask, (table = this.table!.narrow(mask)));
    return table;
  }

  private listOf(conditions: Condition[]): readonly Condition[] {
    const key = conditions.map((condition) => condition.serial).join(',');
    const known = this.lists.get(key);
    if (known !== undefined) return known;
    this.lists.set(key, conditions);
    return conditions;
  }

  /**
   * The decision when the unconditional rules of `entry` and the `applied`
   * conditional ones (sorted by id, like everything here) hold; deep-frozen,
   * since it may be handed out again.
   */
  private compose(
    entry: Pick<Entry, 'deny' | 'approval' | 'allow'>,
    applied: readonly CompiledRule[],
    errored: Errored[] | null,
  ): PolicyDecision {
    const errors =
      errored === null
        ? NO_ERRORS
        : (Object.freeze(
            errored.map(({ rule, message }) => Object.freeze({ rule: rule.id, message })),
          ) as PolicyDecision['errors']);
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

function restricts(rule: CompiledRule): boolean {
  return rule.effect === 'deny' || rule.effect === 'approval';
}

/**
 * A condition the PrincipalTable answers for whole: no argument conditions,
 * a principal match it holds (or none), a mode the outcome masks know.
 */
function isStatic(condition: Condition): boolean {
  return (
    condition.tests === null &&
    condition.bit !== 0 &&
    (condition.mode === undefined || condition.mode === 'local' || condition.mode === 'remote')
  );
}

function newBucket(): Bucket {
  return { byTool: new Map(), otherTools: [] };
}

function newTable(plain: Map<Condition, Who>): PrincipalTable {
  const whos: Who[] = [];
  for (const [condition, who] of plain) {
    condition.bit = 1 << whos.length;
    whos.push(who);
  }
  return new PrincipalTable(whos, -1, null);
}

/** The conditional rules of `entry` that an outcome says applied, sorted by id like `conditional`. */
function appliedRules(entry: Entry, applied: number): CompiledRule[] {
  const rules: CompiledRule[] = [];
  const bits = entry.plan!.bits;
  for (let i = 0; i < entry.conditional.length; i++) if ((applied & bits[i]!) !== 0) rules.push(entry.conditional[i]!);
  return rules;
}

/** The rules of `always` and those of `applied` with this effect, both sorted by id, in one sorted list. */
function merge(
  always: readonly CompiledRule[],
  applied: readonly CompiledRule[],
  effect: Effect,
): readonly CompiledRule[] {
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

function decision(
  effect: Effect,
  reason: PolicyDecision['reason'],
  rules: readonly string[],
  route: string | null,
  errors: PolicyDecision['errors'],
): PolicyDecision {
  return Object.freeze({ decision: effect, reason, rules: rules as string[], approval_route: route, errors });
}
