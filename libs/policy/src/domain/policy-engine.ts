import { compileGlob, GlobMatcher, isGlob } from './glob';
import type { ArgumentCondition, DefaultEffect, Effect, ExecutionMode, OnError, PolicyDocument, PolicyRule, PrincipalMatch } from './policy-document';
import { compilePattern, type Pattern } from './pattern';

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
 * remembered per (server, tool), so a caller that wants to add fields copies it.
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
 * How many (server, tool) pairs, plus decisions remembered within them, one
 * compiled policy keeps. Callers choose tool names freely, so the memo must
 * not grow with them; past the bound it starts over.
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

/**
 * The part of a rule that varies from call to call of one (server, tool)
 * pair: execution mode, principals, arguments. Rules that say the same share
 * one, so that a policy repeating a rule for each of its servers keeps one
 * copy of the data every call runs through.
 */
interface Condition {
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

/**
 * One argument condition, as data for `testArgument` rather than a chain of
 * closures: a call then reads a couple of objects, not one per operator.
 */
interface ArgumentTest {
  readonly segments: readonly string[];
  /** the path, when it is a single segment: one object fewer to fetch in the common case */
  readonly key: string | null;
  /** the operators present, as the bits below */
  readonly operators: number;
  readonly equals: unknown;
  readonly equalsScalar: boolean;
  readonly inScalars: Members;
  readonly inStructured: readonly unknown[];
  readonly regex: Pattern | null;
  readonly gt: number | undefined;
  readonly gte: number | undefined;
  readonly lt: number | undefined;
  readonly lte: number | undefined;
  readonly exists: unknown;
  readonly missing: string;
  readonly notString: string;
  readonly notNumber: string;
  /** why the regex does not compile, or why a condition without operators cannot say anything */
  readonly broken: string;
}

// The operators, in the order a condition with several of them (only an
// unvalidated document has such) tries them.
const EQUALS = 1;
const IN = 2;
const REGEX = 4;
const RANGE = 8;
const EXISTS = 16;

const PRINCIPAL_FIELDS = ['users', 'roles', 'groups', 'gateways', 'sessions'] as const;
type PrincipalField = (typeof PRINCIPAL_FIELDS)[number];
type Who = Readonly<Record<PrincipalField, readonly unknown[] | undefined>>;
const USERS = 1;
const ROLES = 2;
const GROUPS = 4;
const GATEWAYS = 8;
const SESSIONS = 16;
const FIELD_BITS: Readonly<Record<PrincipalField, number>> = { users: USERS, roles: ROLES, groups: GROUPS, gateways: GATEWAYS, sessions: SESSIONS };

interface CompiledRule {
  readonly id: string;
  /** position in the document: breaks ties between equal ids, as a stable sort would */
  readonly index: number;
  readonly effect: Effect;
  readonly approvalRoute: string | undefined;
  /** the server and tool part of the scope, which depends on nothing else in the call */
  readonly names: (server: string, tool: string) => boolean;
  /** null when the rule applies to every call its names match */
  readonly condition: Condition | null;
}

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
const MISSING: unique symbol = Symbol('missing');
const ANYONE: Who = Object.freeze({ users: undefined, roles: undefined, groups: undefined, gateways: undefined, sessions: undefined });

class PolicyIndex implements CompiledPolicy {
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
    this.table = plain.size === 0 || plain.size > OUTCOME_BITS ? null : newTable(plain);
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
    const granting = mode === 'local' ? plan.grantLocal : mode === 'remote' ? plan.grantRemote : plan.grantLocal & plan.grantRemote;
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
    const entry = this.entry(call.server, call.tool);
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

  private entry(server: string, tool: string): Entry {
    const known = this.memo.get(server)?.get(tool);
    return known !== undefined ? known : this.remember(server, tool);
  }

  private remember(server: string, tool: string): Entry {
    if (this.stored >= DECISION_MEMO_LIMIT) {
      // Starting over rather than refusing new pairs: pairs still in use come
      // back after one recomputation each, whoever filled the memo.
      this.memo.clear();
      this.lists.clear();
      this.narrowed.clear();
      this.plans.clear();
      this.stored = 0;
    }
    const entry = this.newEntry(server, tool);
    let tools = this.memo.get(server);
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
    if (deny.length > 0) conditional = conditional.filter((rule) => rule.effect === 'deny' || rule.condition!.tests !== null);
    else if (approval.length > 0) conditional = conditional.filter((rule) => rule.effect !== 'allow' || rule.condition!.tests !== null);
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
      loopRules: plan === null || !plan.byTable ? conditional : conditional.filter((rule) => !isStatic(rule.condition!)),
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
    const key = conditional.map((rule) => `${rule.condition!.serial}${rule.effect === 'allow' ? 'g' : restricts(rule) ? 'r' : 'n'}`).join(',');
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
      const bit = fits && isStatic(rule.condition!) ? rule.condition!.bit : position < OUTCOME_BITS ? 1 << position++ : 0;
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

function restricts(rule: CompiledRule): boolean {
  return rule.effect === 'deny' || rule.effect === 'approval';
}

/**
 * A condition the PrincipalTable answers for whole: no argument conditions,
 * a principal match it holds (or none), a mode the outcome masks know.
 */
function isStatic(condition: Condition): boolean {
  return condition.tests === null && condition.bit !== 0 && (condition.mode === undefined || condition.mode === 'local' || condition.mode === 'remote');
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

/** From a name to the bits of the conditions that list it, for a field with too many names to compare one by one. */
type Hashed = Map<unknown, number>;

/** The names `field` lists in the principal matches of `mask`, each once, with the bits of those that list it. */
function namesOf(whos: readonly Who[], mask: number, field: PrincipalField): Map<unknown, number> {
  const byValue = new Map<unknown, number>();
  for (let i = 0; i < whos.length; i++) {
    const bit = 1 << i;
    const values = (mask & bit) === 0 ? undefined : whos[i]![field];
    if (values === undefined) continue;
    for (const value of values) byValue.set(value, (byValue.get(value) ?? 0) | bit);
  }
  return byValue;
}

/** What PrincipalTable.match returns when only the rules' own matches can say, exactly, what happens. */
const UNUSUAL = -1;

/**
 * Principal matches merged field by field: a field that several of them name
 * is read once. A (server, tool) pair asks a table narrowed to the matches
 * of its own rules, so that a principal is held against the few names those
 * list, not against every name of the policy.
 *
 * The names of a field, when they are few strings, sit with their bits in
 * one flat list shared by all five fields and are compared with === (which
 * agrees with a Map's SameValueZero when one side is a string): a decision
 * then reads the table and one list, not an object, a map and its storage
 * per field, which is what a cold cache pays for after other work ran.
 * Other fields are hashed.
 */
class PrincipalTable {
  /** `[name, bits, …]` of the scanned fields, groups, roles, users, gateways, sessions in that order */
  private readonly flat: readonly unknown[];
  // where each field's part of `flat` ends (it starts where the previous one's does)
  private readonly groupsEnd: number;
  private readonly rolesEnd: number;
  private readonly usersEnd: number;
  private readonly gatewaysEnd: number;
  private readonly sessionsEnd: number;
  /** a field's names, when it is hashed rather than scanned; null for every field scanned */
  private readonly hashed: Readonly<Record<PrincipalField, Hashed | null>> | null;

  /**
   * `whos[i]` is the match with the bit 1 << i; `wide` the table this one
   * narrows. A field hashed here (more names than SCAN_LIMIT, or names that
   * are not strings) is hashed in `wide` too, whose map (with extra bits no
   * caller looks at) answers as fast, and is shared rather than kept twice.
   */
  constructor(
    private readonly whos: readonly Who[],
    mask: number,
    wide: PrincipalTable | null,
  ) {
    const flat: unknown[] = [];
    const ends: number[] = [];
    const hashed: Record<PrincipalField, Hashed | null> = { users: null, roles: null, groups: null, gateways: null, sessions: null };
    let anyHashed = false;
    for (const field of SCANNED_ORDER) {
      const names = namesOf(whos, mask, field);
      const scan = names.size <= SCAN_LIMIT && [...names.keys()].every((name) => typeof name === 'string');
      if (scan) {
        for (const [name, bits] of names) flat.push(name, bits);
      } else {
        hashed[field] = wide?.hashed?.[field] ?? names;
        anyHashed = true;
      }
      ends.push(flat.length);
    }
    // a copy of exactly its length, its storage allocated with it
    this.flat = flat.slice();
    [this.groupsEnd, this.rolesEnd, this.usersEnd, this.gatewaysEnd, this.sessionsEnd] = ends as [number, number, number, number, number];
    this.hashed = anyHashed ? hashed : null;
  }

  /** The same answers for the matches of `mask`; any other bits may be wrong. */
  narrow(mask: number): PrincipalTable {
    return new PrincipalTable(this.whos, mask, this);
  }

  /**
   * The bits of the conditions whose principal match the principal passes,
   * reading only `fields`; or UNUSUAL. Each field has a loop of its own, not
   * a shared helper: each comparison then learns the kind of string its
   * field holds (role and group names are mostly interned, and compare as
   * pointers), rather than the slowest kind any field holds.
   */
  match(principal: CallPrincipal | undefined, fields: number): number {
    if (principal == null) return 0;
    return this.hashed === null ? this.scan(principal, fields) : this.matchHashed(principal, fields, this.hashed);
  }

  /** `match` when every field is scanned: the common case, with nothing else to ask per field. */
  private scan(principal: CallPrincipal, fields: number): number {
    const flat = this.flat;
    let bits = 0;
    // anything but a list (a string, say) is iterated as it always was, by the rules themselves
    if ((fields & GROUPS) !== 0) {
      const groups: unknown = principal.groups;
      if (groups !== undefined) {
        if (!Array.isArray(groups)) return UNUSUAL;
        const end = this.groupsEnd;
        for (let h = 0; h < groups.length; h++) {
          const value: unknown = groups[h];
          for (let i = 0; i < end; i += 2) {
            if (flat[i] === value) {
              bits |= flat[i + 1] as number;
              break;
            }
          }
        }
      }
    }
    if ((fields & ROLES) !== 0) {
      const roles: unknown = principal.roles;
      if (roles !== undefined) {
        if (!Array.isArray(roles)) return UNUSUAL;
        const end = this.rolesEnd;
        for (let h = 0; h < roles.length; h++) {
          const value: unknown = roles[h];
          for (let i = this.groupsEnd; i < end; i += 2) {
            if (flat[i] === value) {
              bits |= flat[i + 1] as number;
              break;
            }
          }
        }
      }
    }
    if ((fields & USERS) !== 0) {
      const user = principal.user;
      if (user !== undefined) {
        const end = this.usersEnd;
        for (let i = this.rolesEnd; i < end; i += 2) {
          if (flat[i] === user) {
            bits |= flat[i + 1] as number;
            break;
          }
        }
      }
    }
    if ((fields & GATEWAYS) !== 0 && principal.gateway !== undefined) bits |= scanOne(flat, this.usersEnd, this.gatewaysEnd, principal.gateway);
    if ((fields & SESSIONS) !== 0 && principal.session !== undefined) bits |= scanOne(flat, this.gatewaysEnd, this.sessionsEnd, principal.session);
    return bits;
  }

  /** `match` when some field has too many names to scan. */
  private matchHashed(principal: CallPrincipal, fields: number, hashed: Readonly<Record<PrincipalField, Hashed | null>>): number {
    const flat = this.flat;
    let bits = 0;
    if ((fields & GROUPS) !== 0) {
      const groups: unknown = principal.groups;
      if (groups !== undefined) {
        if (!Array.isArray(groups)) return UNUSUAL;
        bits |= hashed.groups !== null ? hashAny(hashed.groups, groups) : scanAny(flat, 0, this.groupsEnd, groups);
      }
    }
    if ((fields & ROLES) !== 0) {
      const roles: unknown = principal.roles;
      if (roles !== undefined) {
        if (!Array.isArray(roles)) return UNUSUAL;
        bits |= hashed.roles !== null ? hashAny(hashed.roles, roles) : scanAny(flat, this.groupsEnd, this.rolesEnd, roles);
      }
    }
    if ((fields & USERS) !== 0 && principal.user !== undefined) {
      bits |= hashed.users !== null ? (hashed.users.get(principal.user) ?? 0) : scanOne(flat, this.rolesEnd, this.usersEnd, principal.user);
    }
    if ((fields & GATEWAYS) !== 0 && principal.gateway !== undefined) {
      bits |= hashed.gateways !== null ? (hashed.gateways.get(principal.gateway) ?? 0) : scanOne(flat, this.usersEnd, this.gatewaysEnd, principal.gateway);
    }
    if ((fields & SESSIONS) !== 0 && principal.session !== undefined) {
      bits |= hashed.sessions !== null ? (hashed.sessions.get(principal.session) ?? 0) : scanOne(flat, this.gatewaysEnd, this.sessionsEnd, principal.session);
    }
    return bits;
  }
}

/** The fields in the order of PrincipalTable's flat list. */
const SCANNED_ORDER: readonly PrincipalField[] = ['groups', 'roles', 'users', 'gateways', 'sessions'];

/** The bits of `value` among the names of `flat` from `from` to `to`, each listed once. */
function scanOne(flat: readonly unknown[], from: number, to: number, value: unknown): number {
  for (let i = from; i < to; i += 2) if (flat[i] === value) return flat[i + 1] as number;
  return 0;
}

/** The bits of all the names `held` lists, among those of `flat` from `from` to `to`. */
function scanAny(flat: readonly unknown[], from: number, to: number, held: readonly unknown[]): number {
  let bits = 0;
  for (let h = 0; h < held.length; h++) bits |= scanOne(flat, from, to, held[h]);
  return bits;
}

function hashAny(map: Hashed, held: readonly unknown[]): number {
  let bits = 0;
  for (let i = 0; i < held.length; i++) bits |= map.get(held[i]) ?? 0;
  return bits;
}

/** Whether a rule whose names match applies to the call: true, false, or why it cannot tell. */
function outcomeOf(condition: Condition, call: PolicyCall, args: unknown): Outcome {
  if (condition.mode !== undefined && condition.mode !== call.execution_mode) return false;
  if (condition.principal !== null && !condition.principal(call.principal)) return false;
  return condition.tests === null ? true : testAll(condition.tests, args);
}

/** The conditional rules of `entry` that an outcome says applied, sorted by id like `conditional`. */
function appliedRules(entry: Entry, applied: number): CompiledRule[] {
  const rules: CompiledRule[] = [];
  const bits = entry.plan!.bits;
  for (let i = 0; i < entry.conditional.length; i++) if ((applied & bits[i]!) !== 0) rules.push(entry.conditional[i]!);
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

function compileRule(rule: PolicyRule, index: number, conditions: Map<string | number, Condition>, plain: Map<Condition, Who>): CompiledRule {
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
function compileCondition(rule: PolicyRule, conditions: Map<string | number, Condition>, plain: Map<Condition, Who>): Condition | null {
  if (rule.execution_mode === undefined && rule.principals === undefined && rule.arguments === undefined) return null;
  const key = conditionKey(rule);
  const known = key === null ? undefined : conditions.get(key);
  if (known !== undefined) return known;
  // a mode alone takes a table bit too, one that every principal holds
  const who = rule.principals !== undefined ? plainPrincipals(rule.principals) : rule.arguments === undefined ? ANYONE : null;
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
    fields: who === null ? 0 : PRINCIPAL_FIELDS.reduce((fields, field) => (who[field] === undefined ? fields : fields | FIELD_BITS[field]), 0),
  };
  conditions.set(key ?? condition.serial, condition);
  if (who !== null) plain.set(condition, who);
  return condition;
}

/** A copy of the lists, taken now, since the document may change after compiling; null for an unusual form. */
function plainPrincipals(match: PrincipalMatch): Who | null {
  if (typeof match !== 'object' || match === null) return null;
  const who: Partial<Record<PrincipalField, readonly unknown[] | undefined>> = {};
  for (const field of PRINCIPAL_FIELDS) {
    const values: unknown = match[field];
    if (values !== undefined && !Array.isArray(values)) return null;
    who[field] = values === undefined ? undefined : [...(values as unknown[])];
  }
  return who as Who;
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
      const plain = Array.isArray(original) ? prototype === Array.prototype : prototype === Object.prototype || prototype === null;
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

/** Up to this many names, comparing with === beats hashing the name. */
const SCAN_LIMIT = 8;

type Members = readonly unknown[] | Set<unknown>;

function members(values: readonly unknown[] | undefined): Members | null {
  if (values === undefined) return null;
  // === agrees with a Set's SameValueZero whenever one side is a string
  if (Array.isArray(values) && values.length <= SCAN_LIMIT && values.every((value) => typeof value === 'string')) return [...values];
  return new Set(values);
}

function isMember(members: Members, value: unknown): boolean {
  if (!Array.isArray(members)) return (members as Set<unknown>).has(value);
  for (let i = 0; i < members.length; i++) if (members[i] === value) return true;
  return false;
}

function holdsAny(wanted: Members | null, held: unknown[] | undefined): boolean {
  if (wanted === null || held === undefined) return false;
  if (Array.isArray(held)) {
    for (let i = 0; i < held.length; i++) if (isMember(wanted, held[i])) return true;
    return false;
  }
  // an unvalidated call may hold a string here, which iterates by character as it always did
  for (const value of held as Iterable<unknown>) if (isMember(wanted, value)) return true;
  return false;
}

function compilePrincipals(match: PrincipalMatch): (principal: CallPrincipal | undefined) => boolean {
  const users = members(match.users);
  const roles = members(match.roles);
  const groups = members(match.groups);
  const gateways = members(match.gateways);
  const sessions = members(match.sessions);
  return (principal) =>
    principal != null &&
    ((users !== null && principal.user !== undefined && isMember(users, principal.user)) ||
      holdsAny(roles, principal.roles) ||
      holdsAny(groups, principal.groups) ||
      (gateways !== null && principal.gateway !== undefined && isMember(gateways, principal.gateway)) ||
      (sessions !== null && principal.session !== undefined && isMember(sessions, principal.session)));
}

/**
 * Three-valued AND: a false condition means the rule does not apply, whatever
 * else errs; otherwise the first error in document order names the failure.
 */
function testAll(tests: readonly ArgumentTest[], args: unknown): Outcome {
  if (tests.length === 1) return testArgument(tests[0]!, args);
  let error: string | null = null;
  for (let i = 0; i < tests.length; i++) {
    const outcome = testArgument(tests[i]!, args);
    if (outcome === false) return false;
    if (outcome !== true) error ??= outcome;
  }
  return error ?? true;
}

function compileTest(condition: ArgumentCondition, index: number): ArgumentTest {
  const label = `arguments[${index}] (path "${condition.path}")`;
  let operators = 0;
  let regex: Pattern | null = null;
  let broken = `${label}: the condition has no operator`;
  if (condition.regex !== undefined) {
    try {
      regex = compilePattern(condition.regex);
    } catch (error) {
      broken = `${label}: the regex does not compile: ${(error as Error).message}`;
    }
  }
  const list = condition.in === undefined ? [] : Array.isArray(condition.in) ? condition.in : [];
  const scalars = list.filter(isScalar);
  const { gt, gte, lt, lte } = condition.range === undefined ? {} : condition.range;
  if (condition.equals !== undefined) operators |= EQUALS;
  if (condition.in !== undefined) operators |= IN;
  if (condition.regex !== undefined) operators |= REGEX;
  if (condition.range !== undefined) operators |= RANGE;
  if (condition.exists !== undefined) operators |= EXISTS;
  const segments = String(condition.path).split('.');
  // in the order testArgument reads them (see compileCondition)
  return {
    operators,
    key: segments.length === 1 ? segments[0]! : null,
    equalsScalar: isScalar(condition.equals),
    equals: condition.equals,
    // NaN is no scalar here, so === and the Set's SameValueZero agree on scalars; a copy of exactly its length, its storage allocated with it
    inScalars: scalars.length <= SCAN_LIMIT ? scalars.slice() : new Set(scalars),
    regex,
    gt,
    gte,
    lt,
    lte,
    exists: condition.exists,
    missing: `${label}: the path is missing`,
    notString: `${label}: the value is not a string`,
    notNumber: `${label}: the value is not a finite number`,
    inStructured: list.filter((option) => !isScalar(option)),
    segments,
    broken,
  };
}

/** One argument condition; several operators (only unvalidated) must all hold, with the same three-valued AND as testAll. */
function testArgument(test: ArgumentTest, args: unknown): Outcome {
  const operators = test.operators;
  // a condition that says nothing cannot grant
  if (operators === 0) return test.broken;
  const value = test.key !== null ? step(args, test.key) : resolve(args, test.segments);
  const missing = value === MISSING;
  let error: string | null = null;
  if ((operators & EQUALS) !== 0) {
    if (missing) error ??= test.missing;
    else if (!(test.equalsScalar ? value === test.equals : jsonEqual(value, test.equals))) return false;
  }
  if ((operators & IN) !== 0) {
    if (missing) error ??= test.missing;
    else if (!(isScalar(value) ? isMember(test.inScalars, value) : anyEqual(test.inStructured, value))) return false;
  }
  if ((operators & REGEX) !== 0) {
    if (missing) error ??= test.missing;
    else if (typeof value !== 'string') error ??= test.notString;
    else if (test.regex === null) error ??= test.broken;
    else if (!test.regex.test(value)) return false;
  }
  if ((operators & RANGE) !== 0) {
    if (missing) error ??= test.missing;
    else if (typeof value !== 'number' || !Number.isFinite(value)) error ??= test.notNumber;
    else if (!inRange(test, value)) return false;
  }
  if ((operators & EXISTS) !== 0 && !missing !== test.exists) return false;
  return error ?? true;
}

function inRange(test: ArgumentTest, value: number): boolean {
  const { gt, gte, lt, lte } = test;
  return (gt === undefined || value > gt) && (gte === undefined || value >= gte) && (lt === undefined || value < lt) && (lte === undefined || value <= lte);
}

function anyEqual(options: readonly unknown[], value: unknown): boolean {
  for (let i = 0; i < options.length; i++) if (jsonEqual(value, options[i])) return true;
  return false;
}

const INDEX = /^(?:0|[1-9][0-9]*)$/;

function resolve(args: unknown, segments: readonly string[]): unknown {
  let value = args;
  for (let i = 0; i < segments.length && value !== MISSING; i++) value = step(value, segments[i]!);
  return value;
}

function step(value: unknown, segment: string): unknown {
  if (typeof value !== 'object' || value === null) return MISSING;
  if (Array.isArray(value)) {
    if (!INDEX.test(segment)) return MISSING;
    const position = Number(segment);
    return position < value.length ? value[position] : MISSING;
  }
  return Object.prototype.hasOwnProperty.call(value, segment) ? (value as Record<string, unknown>)[segment] : MISSING;
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
