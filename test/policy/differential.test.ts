import { describe, expect, it } from 'vitest';
import { compilePolicy, PolicyCall, PolicyDecision, PolicyDocument } from '../../libs/policy/src';
import { referenceEvaluate } from '../../libs/policy/src/domain/reference-evaluator';
import { fuzzSeed, mulberry32, randomCall, randomPolicy } from './random-policies';

type DefaultEffect = 'allow' | 'deny';

interface Comparable {
  decision: string;
  reason: string;
  rules: string[];
  approval_route: string | null;
  errors: string[];
}

// Error messages are free text and deliberately not compared.
function comparable(decision: PolicyDecision): Comparable {
  return {
    decision: decision.decision,
    reason: decision.reason,
    rules: decision.rules,
    approval_route: decision.approval_route,
    errors: decision.errors.map((error) => error.rule),
  };
}

function engineEvaluate(
  document: PolicyDocument,
  call: PolicyCall,
  defaultEffect: DefaultEffect,
): Comparable | { thrown: string } {
  try {
    return comparable(compilePolicy(document, { defaultEffect }).evaluate(call));
  } catch (error) {
    return { thrown: String(error) };
  }
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

// JSON.stringify would print NaN and ±Infinity as null and -0 as 0, which would
// make a counterexample that depends on them unreadable or misleading.
function show(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'number' && !Number.isFinite(v)) return `«${v}»`;
    if (typeof v === 'number' && Object.is(v, -0)) return '«-0»';
    return v;
  });
}

// --- shrinking ----------------------------------------------------------------
// A random counterexample carries a dozen irrelevant rules; greedily dropping
// parts while the disagreement persists leaves only what causes it.

interface Case {
  document: PolicyDocument;
  call: PolicyCall;
}

const clone = <T>(value: T): T => structuredClone(value);

function withoutKey<T extends object>(value: T, key: string): T {
  const out = clone(value) as Record<string, unknown>;
  delete out[key];
  return out as T;
}

function smallerCases({ document, call }: Case): Case[] {
  const out: Case[] = [];
  const rules = document.rules;
  for (let i = 0; i < rules.length; i++) {
    out.push({ document: { ...clone(document), rules: rules.filter((_, j) => j !== i) }, call });
  }
  for (const key of ['default', 'on_error']) {
    if (key in document) out.push({ document: withoutKey(document, key), call });
  }
  rules.forEach((rule, i) => {
    const replace = (next: PolicyDocument['rules'][number]): Case => {
      const copy = clone(document);
      copy.rules[i] = next;
      return { document: copy, call };
    };
    for (const key of [
      'description',
      'approval_route',
      'servers',
      'tools',
      'tool_prefixes',
      'execution_mode',
      'principals',
      'arguments',
    ]) {
      if (key in rule) out.push(replace(withoutKey(rule, key)));
    }
    for (const key of ['servers', 'tools', 'tool_prefixes', 'arguments'] as const) {
      const list = rule[key] as unknown[] | undefined;
      list?.forEach((_, j) => out.push(replace({ ...clone(rule), [key]: list.filter((_x, k) => k !== j) })));
    }
    const principals = rule.principals as Record<string, string[]> | undefined;
    if (principals) {
      for (const key of Object.keys(principals)) {
        out.push(replace({ ...clone(rule), principals: withoutKey(principals, key) }));
        principals[key]!.forEach((_, j) =>
          out.push(
            replace({
              ...clone(rule),
              principals: { ...clone(principals), [key]: principals[key]!.filter((_x, k) => k !== j) },
            }),
          ),
        );
      }
    }
  });
  for (const key of ['arguments', 'principal', 'execution_mode', 'tool_prefix']) {
    if (key in call) out.push({ document, call: withoutKey(call, key) });
  }
  for (const key of Object.keys(call.arguments ?? {})) {
    out.push({ document, call: { ...clone(call), arguments: withoutKey(call.arguments!, key) } });
  }
  for (const key of Object.keys(call.principal ?? {})) {
    out.push({ document, call: { ...clone(call), principal: withoutKey(call.principal!, key) } });
  }
  return out;
}

function shrink(start: Case, stillFails: (candidate: Case) => boolean): Case {
  let current = start;
  for (let round = 0; round < 200; round++) {
    const next = smallerCases(current).find(stillFails);
    if (!next) return current;
    current = next;
  }
  return current;
}

// --- hand-written examples ------------------------------------------------------
// Expectations spelled out by hand and checked against both evaluators, so the
// two cannot agree on a shared misreading of the specification unnoticed.

interface Example {
  name: string;
  document: PolicyDocument;
  call: PolicyCall;
  defaultEffect: DefaultEffect;
  expected: Comparable;
}

const examples: Example[] = [
  {
    name: 'no rules: the document default overrides the option',
    document: { default: 'allow', rules: [] },
    call: { server: 'github', tool: 'create_issue' },
    defaultEffect: 'deny',
    expected: { decision: 'allow', reason: 'default', rules: [], approval_route: null, errors: [] },
  },
  {
    name: 'globs match whole names, and "." in a glob is literal',
    document: {
      rules: [
        { id: 'files', effect: 'deny', servers: ['git*'], tools: ['*_file'] },
        { id: 'dotted', effect: 'approval', tools: ['read.file'], approval_route: 'security' },
        { id: 'partial', effect: 'approval', servers: ['git'] },
      ],
    },
    call: { server: 'github', tool: 'read_file' },
    defaultEffect: 'allow',
    expected: { decision: 'deny', reason: 'rule', rules: ['files'], approval_route: null, errors: [] },
  },
  {
    name: 'approval beats allow; route comes from the first routed rule by id; ids sort as strings',
    document: {
      rules: [
        { id: 'r2', effect: 'approval', approval_route: 'oncall' },
        { id: 'r10', effect: 'approval' },
        { id: 'r3', effect: 'approval', approval_route: 'security' },
        { id: 'a', effect: 'allow' },
        { id: 'b', effect: 'deny', execution_mode: 'local' },
      ],
    },
    call: { server: 'slack', tool: 'gh_list', execution_mode: 'remote' },
    defaultEffect: 'deny',
    expected: {
      decision: 'approval',
      reason: 'rule',
      rules: ['r10', 'r2', 'r3'],
      approval_route: 'oncall',
      errors: [],
    },
  },
  {
    name: 'an erroring allow rule turns an allow into the on_error effect',
    document: {
      on_error: 'approval',
      rules: [
        { id: 'ok', effect: 'allow' },
        { id: 'bad-regex', effect: 'allow', approval_route: 'security', arguments: [{ path: 'query', regex: '(' }] },
      ],
    },
    call: { server: 'github', tool: 'gh_search', arguments: { query: 'is:open' } },
    defaultEffect: 'deny',
    expected: {
      decision: 'approval',
      reason: 'evaluation_error',
      rules: ['bad-regex'],
      approval_route: null,
      errors: ['bad-regex'],
    },
  },
  {
    name: 'an erroring deny rule still denies; a false condition outranks an error',
    document: {
      rules: [
        { id: 'needs-count', effect: 'deny', arguments: [{ path: 'count', range: { gt: 42, lt: 0 } }] },
        {
          id: 'false-first',
          effect: 'deny',
          arguments: [
            { path: 'repo.owner', equals: 'nobody' },
            { path: 'missing', equals: 1 },
          ],
        },
        { id: 'allowed', effect: 'allow' },
      ],
    },
    call: { server: 'github', tool: 'delete_repo', arguments: { repo: { owner: 'octocat' } } },
    defaultEffect: 'allow',
    expected: {
      decision: 'deny',
      reason: 'rule',
      rules: ['needs-count'],
      approval_route: null,
      errors: ['needs-count'],
    },
  },
  {
    name: 'deep equality ignores key order; paths resolve own keys and canonical indices only; null exists',
    document: {
      rules: [
        {
          id: 'repo',
          effect: 'approval',
          approval_route: 'manager',
          arguments: [
            { path: 'repo', equals: { owner: 'octocat', name: 'aileron' } },
            { path: 'files.0.name', in: ['x', 'README.md'] },
            { path: 'files.01', exists: false },
            { path: 'files.length', exists: false },
            { path: 'toString', exists: false },
            { path: 'meta.private', exists: true },
          ],
        },
      ],
    },
    call: {
      server: 'github',
      tool: 'create_issue',
      arguments: {
        repo: { name: 'aileron', owner: 'octocat' },
        meta: { private: null },
        files: [{ name: 'README.md' }],
      },
    },
    defaultEffect: 'allow',
    expected: { decision: 'approval', reason: 'rule', rules: ['repo'], approval_route: 'manager', errors: [] },
  },
  {
    name: 'a rule naming an execution mode never matches a call without one; principals need one field to overlap',
    document: {
      rules: [
        { id: 'remote-admin', effect: 'deny', execution_mode: 'remote', principals: { roles: ['admin'] } },
        { id: 'eng', effect: 'allow', principals: { users: ['zed'], groups: ['eng'] } },
      ],
    },
    call: { server: 'fs', tool: 'write_file', principal: { user: 'alice', roles: ['admin'], groups: ['ops', 'eng'] } },
    defaultEffect: 'deny',
    expected: { decision: 'allow', reason: 'rule', rules: ['eng'], approval_route: null, errors: [] },
  },
  {
    name: 'regexes are RE2: a backreference is an error, and the default is allow before on_error applies',
    document: {
      default: 'allow',
      rules: [
        { id: 'escape', effect: 'allow', tool_prefixes: ['gh_'], arguments: [{ path: 'query', regex: '(a)\\1' }] },
        {
          id: 'unicode',
          effect: 'allow',
          tool_prefixes: ['write'],
          arguments: [{ path: 'query', regex: '^\\p{L}+$' }],
        },
      ],
    },
    call: { server: 'github', tool: 'gh_search', arguments: { query: 'a-b' } },
    defaultEffect: 'deny',
    expected: {
      decision: 'deny',
      reason: 'evaluation_error',
      rules: ['escape'],
      approval_route: null,
      errors: ['escape'],
    },
  },
  {
    name: 'range needs a finite number; empty tool lists and absent arguments behave as specified',
    document: {
      rules: [
        { id: 'ratio', effect: 'approval', arguments: [{ path: 'ratio', range: {} }] },
        { id: 'no-tools', effect: 'deny', tools: [] },
        { id: 'args', effect: 'deny', arguments: [{ path: 'count', exists: true }] },
      ],
    },
    call: { server: 'github', tool: 'gh_list', arguments: { ratio: Infinity } },
    defaultEffect: 'allow',
    expected: { decision: 'approval', reason: 'rule', rules: ['ratio'], approval_route: null, errors: ['ratio'] },
  },
  {
    name: 'names with "__" name a tool by its namespaced names too: <server>__<tool> and <tool_prefix>__<tool>',
    document: {
      rules: [
        { id: 'by-prefix', effect: 'deny', tools: ['gh__create_issue'] },
        { id: 'by-server', effect: 'approval', tools: ['github__*'] },
        { id: 'by-prefix-prefix', effect: 'approval', tool_prefixes: ['gh__create'], approval_route: 'security' },
        { id: 'plain', effect: 'allow', tools: ['create_issue'] },
        { id: 'plain-prefix-not-namespaced', effect: 'deny', tool_prefixes: ['git'] },
      ],
    },
    call: { server: 'github', tool: 'create_issue', tool_prefix: 'gh' },
    defaultEffect: 'allow',
    expected: { decision: 'deny', reason: 'rule', rules: ['by-prefix'], approval_route: null, errors: [] },
  },
  {
    name: 'without the tool prefix in the call, only the server-name form and the plain name match',
    document: {
      rules: [
        { id: 'by-prefix', effect: 'deny', tools: ['gh__create_issue'] },
        { id: 'by-server', effect: 'approval', tools: ['github__*'] },
        { id: 'plain', effect: 'allow', tools: ['create_issue'] },
      ],
    },
    call: { server: 'github', tool: 'create_issue' },
    defaultEffect: 'deny',
    expected: { decision: 'approval', reason: 'rule', rules: ['by-server'], approval_route: null, errors: [] },
  },
  {
    name: 'a glob character is a Unicode code point: ? matches one emoji, not half of one',
    document: {
      rules: [
        { id: 'one', effect: 'approval', tools: ['launch_?'] },
        { id: 'two', effect: 'deny', tools: ['launch_??'] },
      ],
    },
    call: { server: 'rockets', tool: 'launch_\u{1F680}' },
    defaultEffect: 'allow',
    expected: { decision: 'approval', reason: 'rule', rules: ['one'], approval_route: null, errors: [] },
  },
];

// --- the tests ------------------------------------------------------------------

const POLICIES = 2_000;
const CALLS_PER_POLICY = 60;
const MIN_PAIRS = 100_000;
const MIN_OCCURRENCES = 300;
const MISMATCHES_REPORTED = 5;

describe('compiled policy engine against the reference evaluator', () => {
  it.each(examples)('example: $name', ({ document, call, defaultEffect, expected }) => {
    expect(comparable(referenceEvaluate(document, call, { defaultEffect })), 'reference evaluator').toEqual(expected);
    expect(engineEvaluate(document, call, defaultEffect), 'compiled engine').toEqual(expected);
  });

  it(`agrees on at least ${MIN_PAIRS} random (policy, call) pairs`, () => {
    const seed = fuzzSeed();
    const rng = mulberry32(seed);
    const counts = new Map<string, number>();
    const bump = (key: string): void => void counts.set(key, (counts.get(key) ?? 0) + 1);
    const mismatches: string[] = [];
    let mismatchCount = 0;
    let pairs = 0;
    const unlisted: string[] = [];

    for (let p = 0; p < POLICIES; p++) {
      const document = randomPolicy(rng);
      const defaultEffect: DefaultEffect = rng() < 0.5 ? 'allow' : 'deny';
      // Cloned so that an engine which mutates or keeps a reference to its
      // input cannot change what the reference evaluator sees.
      const compiled = compilePolicy(structuredClone(document), { defaultEffect });
      for (let c = 0; c < CALLS_PER_POLICY; c++) {
        const call = randomCall(rng);
        pairs++;
        const expected = comparable(referenceEvaluate(document, call, { defaultEffect }));
        bump(`decision:${expected.decision}`);
        bump(`reason:${expected.reason}`);
        if (expected.errors.length > 0) bump('errors');
        if (expected.approval_route !== null) bump('approval_route');
        if (call.tool_prefix !== undefined) {
          const { tool_prefix: _prefix, ...unprefixed } = call;
          if (!same(comparable(referenceEvaluate(document, unprefixed, { defaultEffect })), expected))
            bump('decided-by-tool-prefix');
        }

        let actual: Comparable | { thrown: string };
        try {
          actual = comparable(compiled.evaluate(structuredClone(call)));
        } catch (error) {
          actual = { thrown: String(error) };
        }
        // tools/list filtering uses the same compiled rules: a tool a call can get through on is always listed
        const { arguments: _args, ...withoutArguments } = call;
        if (expected.decision !== 'deny') {
          bump('listable-checked');
          if (!compiled.listable(withoutArguments))
            unlisted.push(`${show(document)} hides ${show(withoutArguments)} yet lets ${show(call)} through`);
        } else if (!compiled.listable(withoutArguments)) bump('hidden');
        if (same(actual, expected)) continue;

        mismatchCount++;
        if (mismatches.length >= MISMATCHES_REPORTED) continue;
        const disagrees = (candidate: Case): boolean =>
          !same(
            engineEvaluate(candidate.document, candidate.call, defaultEffect),
            comparable(referenceEvaluate(candidate.document, candidate.call, { defaultEffect })),
          );
        const minimal = shrink({ document, call }, disagrees);
        mismatches.push(
          [
            `policy #${p}, call #${c} (POLICY_FUZZ_SEED=${seed}), defaultEffect=${defaultEffect}`,
            `  policy:    ${show(document)}`,
            `  call:      ${show(call)}`,
            `  reference: ${show(expected)}`,
            `  engine:    ${show(actual)}`,
            `  minimal policy: ${show(minimal.document)}`,
            `  minimal call:   ${show(minimal.call)}`,
            `  minimal reference: ${show(comparable(referenceEvaluate(minimal.document, minimal.call, { defaultEffect })))}`,
            `  minimal engine:    ${show(engineEvaluate(minimal.document, minimal.call, defaultEffect))}`,
          ].join('\n'),
        );
      }
    }

    expect(
      mismatchCount,
      `${mismatchCount} of ${pairs} pairs disagree (POLICY_FUZZ_SEED=${seed}); first ${mismatches.length}:\n\n${mismatches.join('\n\n')}`,
    ).toBe(0);

    expect(unlisted.slice(0, 3), `${unlisted.length} calls get through on tools that tools/list would hide`).toEqual(
      [],
    );
    expect(pairs).toBeGreaterThanOrEqual(MIN_PAIRS);
    const coverage = Object.fromEntries([...counts].sort());
    for (const key of [
      'decision:allow',
      'decision:deny',
      'decision:approval',
      'reason:rule',
      'reason:default',
      'reason:evaluation_error',
      'errors',
      'approval_route',
      'listable-checked',
      'hidden',
      'decided-by-tool-prefix',
    ]) {
      expect(
        counts.get(key) ?? 0,
        `coverage of ${key} (POLICY_FUZZ_SEED=${seed}): ${JSON.stringify(coverage)}`,
      ).toBeGreaterThanOrEqual(MIN_OCCURRENCES);
    }
  });
});
