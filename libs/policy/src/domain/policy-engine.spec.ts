import { describe, expect, it } from 'vitest';
import type { ArgumentCondition, PolicyDocument, PolicyRule } from './policy-document';
import { compilePolicy, DECISION_MEMO_LIMIT, PolicyCall, PolicyDecision } from './policy-engine';

let nextId = 0;
function rule(overrides: Partial<PolicyRule> = {}): PolicyRule {
  return { id: `r${++nextId}`, effect: 'allow', ...overrides };
}

function call(overrides: Partial<PolicyCall> = {}): PolicyCall {
  return { server: 'github', tool: 'create_issue', ...overrides };
}

function decide(
  rules: PolicyRule[],
  theCall: Partial<PolicyCall> = {},
  document: Partial<PolicyDocument> = {},
  defaultEffect: 'allow' | 'deny' = 'deny',
): PolicyDecision {
  return compilePolicy({ rules, ...document }, { defaultEffect }).evaluate(call(theCall));
}

/** Whether a lone allow rule applies to the call (the default being deny). */
function applies(rules: PolicyRule | PolicyRule[], theCall: Partial<PolicyCall> = {}): boolean {
  return decide(Array.isArray(rules) ? rules : [rules], theCall).decision === 'allow';
}

function withArgument(condition: ArgumentCondition, effect: PolicyRule['effect'] = 'allow', id = 'cond'): PolicyRule {
  return { id, effect, arguments: [condition] };
}

describe('scope matching', () => {
  it('matches servers by exact name or glob, whole name, case-sensitive', () => {
    expect(applies(rule({ servers: ['github'] }))).toBe(true);
    expect(applies(rule({ servers: ['GitHub'] }))).toBe(false);
    expect(applies(rule({ servers: ['git'] }))).toBe(false);
    expect(applies(rule({ servers: ['git*'] }))).toBe(true);
    expect(applies(rule({ servers: ['*hub'] }))).toBe(true);
    expect(applies(rule({ servers: ['g?thub'] }))).toBe(true);
    expect(applies(rule({ servers: ['g?hub'] }))).toBe(false);
    expect(applies(rule({ servers: ['github*'] }))).toBe(true);
    expect(applies(rule({ servers: ['slack', 'jira'] }))).toBe(false);
  });

  it('treats every character other than * and ? literally', () => {
    expect(applies(rule({ servers: ['a.c'] }), { server: 'abc' })).toBe(false);
    expect(applies(rule({ servers: ['a.c*'] }), { server: 'a.c-prod' })).toBe(true);
    expect(applies(rule({ servers: ['(x)+[y]*'] }), { server: '(x)+[y]z' })).toBe(true);
    expect(applies(rule({ servers: ['^git$'] }), { server: 'git' })).toBe(false);
    expect(applies(rule({ servers: ['a\\*'] }), { server: 'a\\b' })).toBe(true);
  });

  it('counts an emoji as one character for ?', () => {
    expect(applies(rule({ tools: ['deploy-?'] }), { tool: 'deploy-🚀' })).toBe(true);
    expect(applies(rule({ tools: ['deploy-??'] }), { tool: 'deploy-🚀' })).toBe(false);
  });

  it('answers quickly even for a glob that would make a regex backtrack for ages', () => {
    const started = performance.now();
    expect(applies(rule({ tools: ['*a*a*a*a*a*a*a*a*a*a*b'] }), { tool: 'a'.repeat(20_000) })).toBe(false);
    // a backtracking matcher takes longer than the universe has been around; this bound only has to tell the two apart
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('matches tools by name, glob or prefix; with neither, every tool', () => {
    expect(applies(rule({ tools: ['create_issue'] }))).toBe(true);
    expect(applies(rule({ tools: ['create_*'] }))).toBe(true);
    expect(applies(rule({ tools: ['create'] }))).toBe(false);
    expect(applies(rule({ tool_prefixes: ['create_'] }))).toBe(true);
    expect(applies(rule({ tool_prefixes: ['issue'] }))).toBe(false);
    expect(applies(rule({ tools: ['delete_repo'], tool_prefixes: ['create_'] }))).toBe(true);
    expect(applies(rule({ tools: ['delete_repo'], tool_prefixes: ['merge_'] }))).toBe(false);
    expect(applies(rule({ servers: ['github'] }), { tool: 'anything' })).toBe(true);
  });

  it('matches an execution mode only when the call names the same one', () => {
    expect(applies(rule({ execution_mode: 'remote' }), { execution_mode: 'remote' })).toBe(true);
    expect(applies(rule({ execution_mode: 'remote' }), { execution_mode: 'local' })).toBe(false);
    expect(applies(rule({ execution_mode: 'remote' }))).toBe(false);
    expect(applies(rule(), { execution_mode: 'local' })).toBe(true);
  });

  it('matches principals on any listed user, role, group, gateway or session', () => {
    const onlyFor = rule({
      principals: { users: ['ana'], roles: ['sre'], groups: ['platform'], gateways: ['laptop-1'], sessions: ['s-1'] },
    });
    expect(applies(onlyFor, { principal: { user: 'ana' } })).toBe(true);
    expect(applies(onlyFor, { principal: { user: 'bob', roles: ['dev', 'sre'] } })).toBe(true);
    expect(applies(onlyFor, { principal: { groups: ['platform'] } })).toBe(true);
    expect(applies(onlyFor, { principal: { gateway: 'laptop-1' } })).toBe(true);
    expect(applies(onlyFor, { principal: { session: 's-1' } })).toBe(true);
    expect(
      applies(onlyFor, { principal: { user: 'bob', roles: ['dev'], groups: [], gateway: 'laptop-2', session: 's-2' } }),
    ).toBe(false);
    expect(applies(onlyFor, { principal: {} })).toBe(false);
    expect(applies(onlyFor)).toBe(false);
    // a user name is not a role
    expect(applies(rule({ principals: { roles: ['ana'] } }), { principal: { user: 'ana' } })).toBe(false);
  });

  it('finds rules that name several servers and tools, and globs next to exact names', () => {
    const several = rule({ servers: ['jira', 'github'], tools: ['close_issue', 'create_issue'] });
    expect(applies(several)).toBe(true);
    expect(applies(several, { server: 'jira', tool: 'close_issue' })).toBe(true);
    expect(applies(several, { server: 'jira', tool: 'delete' })).toBe(false);
    const mixed = rule({ servers: ['github', 'gitlab-*'], tools: ['create_issue', 'merge_*'] });
    expect(applies(mixed)).toBe(true);
    expect(applies(mixed, { server: 'gitlab-eu', tool: 'merge_pr' })).toBe(true);
    expect(applies(mixed, { server: 'gitlab', tool: 'merge_pr' })).toBe(false);
    const twice = {
      id: 'twice',
      effect: 'allow' as const,
      servers: ['github', 'github', 'git*'],
      tools: ['create_issue', 'create_issue'],
    };
    expect(decide([twice]).rules).toEqual(['twice']);
  });
});

describe('argument conditions', () => {
  const args = {
    repo: { owner: 'acme', name: 'api', private: null },
    files: [{ name: 'a.ts', size: 10 }],
    count: 3,
    tags: ['x', 'y'],
  };

  function holds(condition: Omit<ArgumentCondition, 'path'> & { path: string }): boolean | string {
    const result = decide([withArgument(condition)], { arguments: args });
    return result.errors[0]?.message ?? result.decision === 'allow';
  }

  it('resolves dotted paths through objects and canonical array indexes', () => {
    expect(holds({ path: 'repo.owner', equals: 'acme' })).toBe(true);
    expect(holds({ path: 'files.0.name', equals: 'a.ts' })).toBe(true);
    expect(holds({ path: 'files.00.name', exists: true })).toBe(false);
    expect(holds({ path: 'files.1', exists: true })).toBe(false);
    expect(holds({ path: 'files.-1', exists: true })).toBe(false);
    expect(holds({ path: 'tags.length', exists: true })).toBe(false);
    expect(holds({ path: 'repo.owner.0', exists: true })).toBe(false);
    expect(holds({ path: 'repo.toString', exists: true })).toBe(false);
  });

  it('exists sees a null value as present and never errs', () => {
    expect(holds({ path: 'repo.private', exists: true })).toBe(true);
    expect(holds({ path: 'repo.missing', exists: true })).toBe(false);
    expect(holds({ path: 'repo.missing', exists: false })).toBe(true);
    expect(holds({ path: 'repo.private', exists: false })).toBe(false);
    expect(decide([withArgument({ path: 'x', exists: false })]).decision).toBe('allow');
  });

  it('equals compares JSON values deeply, ignoring key order', () => {
    expect(holds({ path: 'repo', equals: { private: null, name: 'api', owner: 'acme' } })).toBe(true);
    expect(holds({ path: 'repo', equals: { name: 'api', owner: 'acme' } })).toBe(false);
    expect(holds({ path: 'tags', equals: ['y', 'x'] })).toBe(false);
    expect(holds({ path: 'count', equals: 3.0 })).toBe(true);
    expect(holds({ path: 'count', equals: '3' })).toBe(false);
    expect(holds({ path: 'repo.private', equals: null })).toBe(true);
    expect(holds({ path: 'repo.private', equals: false })).toBe(false);
  });

  it('in holds when the value equals one of the options', () => {
    expect(holds({ path: 'repo.owner', in: ['acme', 'globex'] })).toBe(true);
    expect(holds({ path: 'repo.owner', in: ['globex'] })).toBe(false);
    expect(holds({ path: 'tags', in: [['x'], ['x', 'y']] })).toBe(true);
    expect(holds({ path: 'files.0', in: [{ size: 10, name: 'a.ts' }] })).toBe(true);
    expect(holds({ path: 'count', in: ['3', 4] })).toBe(false);
  });

  it('regex searches anywhere in a string unless anchored', () => {
    expect(holds({ path: 'repo.name', regex: 'p' })).toBe(true);
    expect(holds({ path: 'repo.name', regex: '^p' })).toBe(false);
    expect(holds({ path: 'repo.name', regex: '^api$' })).toBe(true);
    expect(holds({ path: 'files.0.name', regex: '\\.ts$' })).toBe(true);
  });

  it('range holds when every given bound does', () => {
    expect(holds({ path: 'count', range: { gt: 2, lte: 3 } })).toBe(true);
    expect(holds({ path: 'count', range: { gt: 3 } })).toBe(false);
    expect(holds({ path: 'count', range: { gte: 3, lt: 4 } })).toBe(true);
    expect(holds({ path: 'count', range: { lt: 3 } })).toBe(false);
  });

  it('a condition that cannot be evaluated says which and why', () => {
    expect(holds({ path: 'repo.owner.id', equals: 1 })).toBe(
      'arguments[0] (path "repo.owner.id"): the path is missing',
    );
    expect(holds({ path: 'nope', in: [1] })).toBe('arguments[0] (path "nope"): the path is missing');
    expect(holds({ path: 'count', regex: '3' })).toBe('arguments[0] (path "count"): the value is not a string');
    expect(holds({ path: 'repo.name', regex: '(' })).toMatch(
      /^arguments\[0\] \(path "repo.name"\): the regex does not compile: /,
    );
    expect(holds({ path: 'repo.name', range: { gt: 1 } })).toBe(
      'arguments[0] (path "repo.name"): the value is not a finite number',
    );
    expect(holds({ path: 'nope', range: { gt: 1 } })).toBe('arguments[0] (path "nope"): the path is missing');
  });

  it('all conditions must hold; a false one outweighs an error, the first error is reported', () => {
    const conditions = (...list: ArgumentCondition[]) =>
      decide([{ id: 'c', effect: 'deny', arguments: list }], { arguments: args });
    expect(conditions({ path: 'count', equals: 3 }, { path: 'repo.owner', equals: 'acme' })).toMatchObject({
      decision: 'deny',
      reason: 'rule',
    });
    expect(conditions({ path: 'count', equals: 3 }, { path: 'repo.owner', equals: 'x' })).toMatchObject({
      decision: 'deny',
      reason: 'default',
    });
    const falseAndError = conditions({ path: 'nope', equals: 1 }, { path: 'count', equals: 4 });
    expect(falseAndError).toEqual({ decision: 'deny', reason: 'default', rules: [], approval_route: null, errors: [] });
    const twoErrors = conditions(
      { path: 'count', equals: 3 },
      { path: 'nope', equals: 1 },
      { path: 'count', regex: 'x' },
    );
    expect(twoErrors.errors).toEqual([{ rule: 'c', message: 'arguments[1] (path "nope"): the path is missing' }]);
  });

  it('treats absent arguments as an empty object', () => {
    expect(decide([withArgument({ path: 'x', exists: false })]).decision).toBe('allow');
    expect(decide([withArgument({ path: 'x', equals: 1 })]).errors).toHaveLength(1);
  });
});

describe('decisions', () => {
  it('deny beats approval beats allow, naming every deciding rule in id order', () => {
    const rules = [
      rule({ id: 'b-allow' }),
      rule({ id: 'z-approve', effect: 'approval' }),
      rule({ id: 'a-approve', effect: 'approval' }),
      rule({ id: 'm-deny', effect: 'deny' }),
      rule({ id: 'c-deny', effect: 'deny' }),
    ];
    expect(decide(rules)).toEqual({
      decision: 'deny',
      reason: 'rule',
      rules: ['c-deny', 'm-deny'],
      approval_route: null,
      errors: [],
    });
    expect(decide(rules.filter((r) => r.effect !== 'deny'))).toMatchObject({
      decision: 'approval',
      rules: ['a-approve', 'z-approve'],
    });
    expect(decide(rules.filter((r) => r.effect === 'allow'))).toMatchObject({
      decision: 'allow',
      reason: 'rule',
      rules: ['b-allow'],
    });
  });

  it('sorts ids with the plain string order', () => {
    const rules = ['r10', 'R2', 'r2', 'a'].map((id) => rule({ id }));
    expect(decide(rules).rules).toEqual(['R2', 'a', 'r10', 'r2']);
  });

  it('does not depend on the order of the rules', () => {
    const rules: PolicyRule[] = [
      rule({ id: 'allow-gh', servers: ['github'] }),
      rule({ id: 'approve-create', effect: 'approval', tools: ['create_*'], approval_route: 'oncall' }),
      rule({ id: 'approve-all', effect: 'approval', approval_route: 'leads' }),
      withArgument({ path: 'repo', equals: 'prod' }, 'deny', 'deny-prod'),
      withArgument({ path: 'n', range: { gt: 1 } }, 'allow', 'allow-big'),
    ];
    const calls: Partial<PolicyCall>[] = [
      {},
      { arguments: { repo: 'prod' } },
      { arguments: { n: 'x' } },
      { tool: 'list', arguments: { repo: 'dev', n: 5 } },
      { server: 'jira' },
    ];
    let seed = 7;
    const random = () => ((seed = (seed * 16_807) % 2_147_483_647) - 1) / 2_147_483_646;
    for (const theCall of calls) {
      const expected = decide(rules, theCall);
      for (let round = 0; round < 20; round++) {
        const shuffled = [...rules].sort(() => random() - 0.5);
        expect(decide(shuffled, theCall)).toEqual(expected);
      }
    }
  });

  it('without a deciding rule uses the document default, else the workspace default', () => {
    const unrelated = [rule({ servers: ['jira'] })];
    expect(decide(unrelated, {}, {}, 'allow')).toEqual({
      decision: 'allow',
      reason: 'default',
      rules: [],
      approval_route: null,
      errors: [],
    });
    expect(decide(unrelated, {}, {}, 'deny')).toMatchObject({ decision: 'deny', reason: 'default' });
    expect(decide(unrelated, {}, { default: 'deny' }, 'allow')).toMatchObject({ decision: 'deny', reason: 'default' });
    expect(decide([], {}, { default: 'allow' }, 'deny')).toMatchObject({ decision: 'allow', reason: 'default' });
    const compiled = compilePolicy({ rules: unrelated, default: 'allow' }, { defaultEffect: 'deny' });
    expect([compiled.defaultEffect, compiled.onError, compiled.ruleCount]).toEqual(['allow', 'deny', 1]);
  });

  it('routes an approval to the first rule in id order that names a route', () => {
    const approvals = [
      rule({ id: 'c', effect: 'approval', approval_route: 'security' }),
      rule({ id: 'a', effect: 'approval' }),
      rule({ id: 'b', effect: 'approval', approval_route: 'oncall' }),
    ];
    expect(decide(approvals)).toMatchObject({ decision: 'approval', rules: ['a', 'b', 'c'], approval_route: 'oncall' });
    expect(decide(approvals.slice(1, 2))).toMatchObject({ decision: 'approval', approval_route: null });
    expect(decide([...approvals, rule({ id: 'd', effect: 'deny' })])).toMatchObject({
      decision: 'deny',
      approval_route: null,
    });
  });
});

describe('rules that cannot be evaluated', () => {
  const missing = { path: 'repo', equals: 'prod' };
  const wrongType = { path: 'repo', regex: '^prod' };
  const badRegex = { path: 'repo', regex: '[' };
  const cases = [
    ['a missing path', missing, {}],
    ['a value of the wrong type', wrongType, { arguments: { repo: 42 } }],
    ['a regex that does not compile', badRegex, { arguments: { repo: 'prod' } }],
  ] as const;

  for (const [what, condition, theCall] of cases) {
    describe(`with ${what}`, () => {
      it('an allow rule does not allow: on_error decides (deny when absent), naming the failing rules', () => {
        const rules = [withArgument(condition, 'allow', 'broken'), rule({ id: 'fine' })];
        const denied = decide(rules, theCall);
        expect(denied).toMatchObject({
          decision: 'deny',
          reason: 'evaluation_error',
          rules: ['broken'],
          approval_route: null,
        });
        expect(denied.errors).toEqual([
          { rule: 'broken', message: expect.stringContaining('arguments[0] (path "repo")') },
        ]);
        expect(decide(rules, theCall, { on_error: 'approval' })).toMatchObject({
          decision: 'approval',
          reason: 'evaluation_error',
          rules: ['broken'],
          approval_route: null,
        });
      });

      it('a default allow does not stand either', () => {
        const rules = [withArgument(condition, 'allow', 'broken')];
        expect(decide(rules, theCall, {}, 'allow')).toMatchObject({
          decision: 'deny',
          reason: 'evaluation_error',
          rules: ['broken'],
        });
        expect(decide(rules, theCall, { default: 'allow', on_error: 'approval' })).toMatchObject({
          decision: 'approval',
          reason: 'evaluation_error',
        });
      });

      it('with a default deny, the failing allow rule is just listed', () => {
        const result = decide([withArgument(condition, 'allow', 'broken')], theCall, {}, 'deny');
        expect(result).toMatchObject({ decision: 'deny', reason: 'default', rules: [] });
        expect(result.errors.map((error) => error.rule)).toEqual(['broken']);
      });

      it('a deny rule denies', () => {
        const result = decide([withArgument(condition, 'deny', 'broken'), rule({ id: 'fine' })], theCall, {
          on_error: 'approval',
        });
        expect(result).toMatchObject({ decision: 'deny', reason: 'rule', rules: ['broken'] });
        expect(result.errors).toHaveLength(1);
      });

      it('an approval rule asks for approval, with its route', () => {
        const broken = { ...withArgument(condition, 'approval', 'broken'), approval_route: 'security' };
        const result = decide([broken, rule({ id: 'fine' })], theCall);
        expect(result).toMatchObject({
          decision: 'approval',
          reason: 'rule',
          rules: ['broken'],
          approval_route: 'security',
        });
        expect(result.errors).toHaveLength(1);
      });
    });
  }

  it('lists every failing rule in id order, whatever decides', () => {
    const rules = [
      withArgument(missing, 'allow', 'z'),
      withArgument(missing, 'approval', 'm'),
      withArgument(missing, 'allow', 'a'),
      rule({ id: 'deny', effect: 'deny' }),
    ];
    const result = decide(rules);
    expect(result).toMatchObject({ decision: 'deny', reason: 'rule', rules: ['deny'] });
    expect(result.errors.map((error) => error.rule)).toEqual(['a', 'm', 'z']);
    expect(decide(rules.slice(0, 3))).toMatchObject({ decision: 'approval', rules: ['m'] });
    expect(decide([rules[0]!, rules[2]!, rule({ id: 'ok' })], {}, { on_error: 'approval' })).toMatchObject({
      decision: 'approval',
      reason: 'evaluation_error',
      rules: ['a', 'z'],
    });
  });

  it('compiles unvalidated documents without throwing', () => {
    const document = {
      rules: [
        withArgument({ path: 'x', regex: '(?<' }, 'allow', 'bad-regex'),
        withArgument({ path: 'x', range: { gt: 5, lt: 3 } }, 'allow', 'never'),
        { id: 'no-operator', effect: 'allow', arguments: [{ path: 'x' }] },
        { id: 'dup', effect: 'deny', servers: [] },
        { id: 'dup', effect: 'allow', tools: [] },
      ],
    } as PolicyDocument;
    const compiled = compilePolicy(document, { defaultEffect: 'deny' });
    const result = compiled.evaluate(call({ arguments: { x: 4 } }));
    expect(result).toMatchObject({ decision: 'deny', reason: 'default' });
    expect(result.errors.map((error) => error.rule)).toEqual(['bad-regex', 'no-operator']);
    expect(compiled.evaluate(call({ arguments: { x: 'abc' } })).errors[0]?.message).toMatch(/regex does not compile/);
  });
});

describe('large policies', () => {
  it('decide from the index the same as a scan would', () => {
    const rules: PolicyRule[] = [];
    for (let i = 0; i < 1_000; i++)
      rules.push(
        rule({
          id: `gen-${i}`,
          servers: [`server-${i % 50}`],
          tools: [`tool-${i % 20}`],
          effect: i % 7 === 0 ? 'deny' : 'allow',
        }),
      );
    rules.push(rule({ id: 'glob', servers: ['server-1*'], tool_prefixes: ['tool-1'], effect: 'approval' }));
    const compiled = compilePolicy({ rules }, { defaultEffect: 'deny' });
    const result = compiled.evaluate(call({ server: 'server-10', tool: 'tool-10' }));
    // i ≡ 10 (mod 50) and (mod 20) means i = 10, 110, …, 910; of those, 210 and 910 are multiples of 7
    expect(result).toMatchObject({ decision: 'deny', rules: ['gen-210', 'gen-910'] });
    expect(compiled.evaluate(call({ server: 'server-10', tool: 'tool-13' }))).toMatchObject({
      decision: 'approval',
      rules: ['glob'],
    });
    expect(compiled.evaluate(call({ server: 'server-2', tool: 'tool-3' }))).toMatchObject({
      decision: 'deny',
      reason: 'default',
    });
  });
});

describe('listable (tools/list filtering)', () => {
  const policy = compilePolicy(
    {
      rules: [
        { id: 'no-deletes', effect: 'deny', tools: ['delete_*'] },
        { id: 'no-prod-writes', effect: 'deny', tools: ['write_file'], arguments: [{ path: 'path', regex: '^/prod' }] },
        { id: 'reads', effect: 'allow', tools: ['read_*', 'write_file'] },
        { id: 'merge', effect: 'approval', tools: ['merge'] },
      ],
    },
    { defaultEffect: 'deny' },
  );

  it('hides a tool every call of which is denied, and keeps one that some arguments or an approval can get through', () => {
    expect(policy.listable({ server: 'fs', tool: 'delete_all' })).toBe(false);
    expect(policy.listable({ server: 'fs', tool: 'unknown' })).toBe(false);
    expect(policy.listable({ server: 'fs', tool: 'read_file' })).toBe(true);
    expect(policy.listable({ server: 'fs', tool: 'write_file' })).toBe(true);
    expect(policy.listable({ server: 'fs', tool: 'merge' })).toBe(true);
  });

  it('follows the default when no rule concerns the tool', () => {
    expect(compilePolicy({ rules: [] }, { defaultEffect: 'allow' }).listable({ server: 'a', tool: 'b' })).toBe(true);
    expect(
      compilePolicy({ default: 'deny', rules: [] }, { defaultEffect: 'allow' }).listable({ server: 'a', tool: 'b' }),
    ).toBe(false);
  });
});

describe('remembered decisions', () => {
  const rules: PolicyRule[] = [
    { id: 'no-deletes', effect: 'deny', tools: ['delete_*'] },
    { id: 'reads', effect: 'allow', tool_prefixes: ['read_', 'list_'] },
    { id: 'admins', effect: 'allow', principals: { roles: ['admin'] } },
    { id: 'prod', effect: 'approval', approval_route: 'oncall', arguments: [{ path: 'env', equals: 'prod' }] },
  ];

  it('gives equal decisions for the same call, however often it comes', () => {
    const policy = compilePolicy({ rules }, { defaultEffect: 'deny' });
    const dev = { env: 'dev' };
    const calls: Partial<PolicyCall>[] = [
      { tool: 'delete_repo', arguments: dev },
      { tool: 'read_file', arguments: dev },
      { tool: 'create_issue', arguments: dev, principal: { roles: ['admin'] } },
      { tool: 'create_issue', arguments: dev, principal: { roles: ['dev'] } },
      { tool: 'create_issue', arguments: { env: 'prod' } },
      { tool: 'create_issue', arguments: {} },
    ];
    const first = calls.map((theCall) => policy.evaluate(call(theCall)));
    for (let round = 0; round < 3; round++)
      expect(calls.map((theCall) => policy.evaluate(call(theCall)))).toEqual(first);
    expect(first.map((decision) => decision.decision)).toEqual([
      'deny',
      'allow',
      'allow',
      'deny',
      'approval',
      'approval',
    ]);
    expect(first[5]!.errors).toEqual([{ rule: 'prod', message: 'arguments[0] (path "env"): the path is missing' }]);
  });

  it('does not carry one call’s principal or arguments over to the next call of the same tool', () => {
    const policy = compilePolicy({ rules }, { defaultEffect: 'deny' });
    const admin = call({ principal: { roles: ['admin'] }, arguments: { env: 'dev' } });
    const developer = call({ principal: { roles: ['dev'] }, arguments: { env: 'dev' } });
    const production = call({ principal: { roles: ['admin'] }, arguments: { env: 'prod' } });
    for (let round = 0; round < 2; round++) {
      expect(policy.evaluate(admin)).toMatchObject({ decision: 'allow', rules: ['admins'] });
      expect(policy.evaluate(developer)).toMatchObject({ decision: 'deny', reason: 'default' });
      expect(policy.evaluate(production)).toMatchObject({
        decision: 'approval',
        rules: ['prod'],
        approval_route: 'oncall',
      });
    }
  });

  it(`still decides correctly with more distinct tools than the ${DECISION_MEMO_LIMIT} it remembers`, () => {
    const policy = compilePolicy(
      {
        rules: [
          { id: 'sevens', effect: 'deny', tools: ['tool-*7'] },
          { id: 'all', effect: 'allow', servers: ['git*'] },
          { id: 'ops', effect: 'approval', principals: { groups: ['ops'] }, tool_prefixes: ['tool-1'] },
        ],
      },
      { defaultEffect: 'deny' },
    );
    const expected = (n: number, groups: string[]): string => {
      if (String(n).endsWith('7')) return 'deny';
      return groups.includes('ops') && String(n).startsWith('1') ? 'approval' : 'allow';
    };
    const wrong: string[] = [];
    // twice over, so that the second pass meets tools the memo has let go of
    for (let pass = 0; pass < 2; pass++) {
      for (let n = 0; n < DECISION_MEMO_LIMIT + 1_000; n++) {
        const groups = n % 2 === 0 ? ['ops'] : [];
        const decided = policy.evaluate(call({ tool: `tool-${n}`, principal: { groups } })).decision;
        if (decided !== expected(n, groups)) wrong.push(`tool-${n}: ${decided}`);
        if (policy.listable({ server: 'github', tool: `tool-${n}` }) !== !String(n).endsWith('7'))
          wrong.push(`tool-${n}: listable`);
      }
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('hands out frozen decisions, so a caller cannot change what later calls get', () => {
    const dev = { env: 'dev' };
    const theCalls = [
      call({ tool: 'delete_repo', arguments: dev }),
      call({ tool: 'read_file', arguments: dev }),
      call({ principal: { roles: ['admin'] }, arguments: dev }),
      call({ arguments: {} }),
    ];
    // the second policy has no conditional rules, so each of its decisions is fixed per tool
    for (const policy of [
      compilePolicy({ rules }, { defaultEffect: 'deny' }),
      compilePolicy({ rules: rules.slice(0, 2) }, { defaultEffect: 'deny' }),
    ]) {
      for (const theCall of theCalls) {
        const decision = policy.evaluate(theCall);
        const before = structuredClone(decision);
        expect(() => ((decision as { decision: string }).decision = 'allow')).toThrow(TypeError);
        expect(() => decision.rules.push('mine')).toThrow(TypeError);
        expect(() => decision.errors.push({ rule: 'mine', message: '' })).toThrow(TypeError);
        for (const error of decision.errors) expect(() => (error.rule = 'mine')).toThrow(TypeError);
        expect(policy.evaluate(theCall)).toEqual(before);
      }
      // a copy, as the service makes when it adds the policy version, is the caller's to change
      const copy = { ...policy.evaluate(theCalls[0]!), policy_version: 3 };
      copy.decision = 'allow';
      expect(policy.evaluate(theCalls[0]!).decision).toBe('deny');
    }
  });

  it('decides a tool with more conditional rules than fit a bit set rule by rule', () => {
    const many: PolicyRule[] = Array.from({ length: 40 }, (_, i) => ({
      id: `r${String(i).padStart(2, '0')}`,
      effect: i === 39 ? 'approval' : 'allow',
      principals: { users: [`user-${i % 4}`] },
    }));
    const policy = compilePolicy({ rules: many }, { defaultEffect: 'deny' });
    const allowed = policy.evaluate(call({ principal: { user: 'user-1' } }));
    expect(allowed).toMatchObject({ decision: 'allow', reason: 'rule' });
    expect(allowed.rules).toEqual(many.filter((_, i) => i % 4 === 1).map((r) => r.id));
    expect(policy.evaluate(call({ principal: { user: 'user-3' } }))).toMatchObject({
      decision: 'approval',
      rules: ['r39'],
    });
    expect(policy.evaluate(call({ principal: { user: 'user-9' } }))).toMatchObject({
      decision: 'deny',
      reason: 'default',
    });
  });

  it('matches principals of an unusual form as each rule on its own would', () => {
    const rules: PolicyRule[] = [
      { id: 'role-a', effect: 'allow', principals: { roles: ['a'] } },
      { id: 'ops', effect: 'deny', principals: { groups: ['ops'] } },
    ];
    // more conditional rules on the tool than one bit set holds, so that every rule matches its principal alone
    const padding: PolicyRule[] = Array.from({ length: 31 }, (_, i) => ({
      id: `pad-${i}`,
      effect: 'allow',
      principals: { users: [`u${i}`] },
    }));
    const merged = compilePolicy({ rules }, { defaultEffect: 'deny' });
    const alone = compilePolicy({ rules: [...rules, ...padding] }, { defaultEffect: 'deny' });
    const principals = [
      { roles: 'abc' },
      { roles: ['a'] },
      { groups: 'ops' },
      { roles: 'a', groups: ['ops'] },
      { roles: ['a'], groups: 'x' },
      {},
      undefined,
    ];
    for (const principal of principals as PolicyCall['principal'][]) {
      const theCall = call({ principal });
      expect(merged.evaluate(theCall), JSON.stringify(principal)).toEqual(alone.evaluate(theCall));
    }
  });

  it('decides rules on modes and principals alike whether allows are looked at last or rule by rule', () => {
    const shared = { principals: { roles: ['dev'] } };
    const rules: PolicyRule[] = [
      { id: 'dev-deny', effect: 'deny', tools: ['delete_repo'], ...shared },
      { id: 'dev-allow', effect: 'allow', ...structuredClone(shared) },
      { id: 'local-allow', effect: 'allow', execution_mode: 'local' },
      { id: 'remote-review', effect: 'approval', execution_mode: 'remote', tools: ['push'] },
      { id: 'ops-deny', effect: 'deny', principals: { groups: ['ops'] }, execution_mode: 'remote' },
      { id: 'owner-allow', effect: 'allow', principals: { users: ['ann', 'bob'], roles: ['lead'] } },
      { id: 'admin-tools', effect: 'approval', tool_prefixes: ['admin_'] },
      { id: 'prod-review', effect: 'approval', arguments: [{ path: 'env', equals: 'prod' }] },
      {
        id: 'lead-prod',
        effect: 'allow',
        principals: { roles: ['lead'] },
        arguments: [{ path: 'env', in: ['prod', 'dev'] }],
      },
    ];
    // more conditional rules on every tool than one bit set holds, so that every rule is evaluated on its own
    const padding: PolicyRule[] = Array.from({ length: 31 }, (_, i) => ({
      id: `pad-${i}`,
      effect: 'deny',
      principals: { sessions: [`s${i}`] },
    }));
    const policy = compilePolicy({ rules }, { defaultEffect: 'deny' });
    const dev = { principal: { roles: ['dev'] }, arguments: { env: 'qa' } };
    expect(policy.evaluate(call({ tool: 'delete_repo', ...dev }))).toMatchObject({
      decision: 'deny',
      rules: ['dev-deny'],
    });
    expect(policy.evaluate(call({ tool: 'read', ...dev, execution_mode: 'local' }))).toMatchObject({
      decision: 'allow',
      rules: ['dev-allow', 'local-allow'],
    });
    expect(policy.evaluate(call({ tool: 'push', ...dev, execution_mode: 'remote' }))).toMatchObject({
      decision: 'approval',
      rules: ['remote-review'],
    });
    expect(
      policy.evaluate(
        call({ tool: 'read', ...dev, principal: { user: 'bob', groups: ['ops'] }, execution_mode: 'remote' }),
      ),
    ).toMatchObject({ decision: 'deny', rules: ['ops-deny'] });
    expect(policy.evaluate(call({ tool: 'admin_users', ...dev, arguments: { env: 'prod' } }))).toMatchObject({
      decision: 'approval',
      rules: ['admin-tools', 'prod-review'],
    });
    expect(
      policy.evaluate(call({ tool: 'read', principal: { roles: ['lead'] }, arguments: { env: 'dev' } })),
    ).toMatchObject({ decision: 'allow', rules: ['lead-prod', 'owner-allow'] });
    for (const defaultEffect of ['allow', 'deny'] as const) {
      const merged = compilePolicy({ rules }, { defaultEffect });
      const alone = compilePolicy({ rules: [...rules, ...padding] }, { defaultEffect });
      const principals = [
        undefined,
        {},
        { roles: ['dev'] },
        { roles: ['lead'], groups: ['ops'] },
        { user: 'ann' },
        { user: 'bob', roles: 'dev' },
        { roles: ['dev'], groups: 'ops' },
      ];
      for (const tool of ['delete_repo', 'push', 'admin_users', 'read'])
        for (const execution_mode of [undefined, 'local', 'remote'] as const)
          for (const principal of principals as PolicyCall['principal'][])
            for (const args of [undefined, { env: 'prod' }, { env: 'dev' }, { env: 'qa' }]) {
              const theCall = call({ tool, execution_mode, principal, arguments: args });
              expect(merged.evaluate(theCall), JSON.stringify(theCall)).toEqual(alone.evaluate(theCall));
              expect(merged.listable(theCall), JSON.stringify(theCall)).toBe(alone.listable(theCall));
            }
    }
  });

  it('reads the principal after the argument conditions, once, and decides as rule by rule would', () => {
    // no rule names principals and arguments together, so the principal is read after the arguments are tested
    const rules: PolicyRule[] = [
      { id: 'suspended', effect: 'deny', principals: { groups: ['suspended'] } },
      { id: 'readers', effect: 'allow', tools: ['read'], principals: { roles: ['dev', 'viewer'] } },
      { id: 'owners', effect: 'allow', principals: { users: ['ann'] } },
      { id: 'admins', effect: 'allow', principals: { roles: ['admin'] }, execution_mode: 'local' },
      { id: 'prod-review', effect: 'approval', arguments: [{ path: 'env', equals: 'prod' }] },
      { id: 'no-secrets', effect: 'deny', tools: ['write'], arguments: [{ path: 'file', regex: '\\.env$' }] },
    ];
    const padding: PolicyRule[] = Array.from({ length: 31 }, (_, i) => ({
      id: `pad-${i}`,
      effect: 'deny',
      principals: { sessions: [`s${i}`] },
    }));
    const policy = compilePolicy({ rules }, { defaultEffect: 'deny' });
    expect(
      policy.evaluate(call({ tool: 'read', principal: { roles: ['dev'], groups: ['eng'] }, arguments: { env: 'qa' } })),
    ).toMatchObject({ decision: 'allow', rules: ['readers'] });
    expect(
      policy.evaluate(
        call({ tool: 'read', principal: { roles: ['dev'], groups: ['suspended'] }, arguments: { env: 'qa' } }),
      ),
    ).toMatchObject({ decision: 'deny', rules: ['suspended'] });
    expect(
      policy.evaluate(
        call({ tool: 'read', principal: { roles: ['dev'], groups: ['suspended'] }, arguments: { env: 'prod' } }),
      ),
    ).toMatchObject({ decision: 'deny', rules: ['suspended'] });
    expect(
      policy.evaluate(call({ tool: 'read', principal: { user: 'ann' }, arguments: { env: 'prod' } })),
    ).toMatchObject({ decision: 'approval', rules: ['prod-review'] });
    for (const defaultEffect of ['allow', 'deny'] as const) {
      const merged = compilePolicy({ rules }, { defaultEffect });
      const alone = compilePolicy({ rules: [...rules, ...padding] }, { defaultEffect });
      const principals = [
        undefined,
        {},
        { roles: ['dev'] },
        { user: 'ann', groups: ['suspended'] },
        { roles: ['admin'], groups: 'suspended' },
        { roles: 'dev' },
        { roles: ['viewer'], groups: ['eng', 'suspended'] },
      ];
      for (const tool of ['read', 'write', 'other'])
        for (const execution_mode of [undefined, 'local', 'remote'] as const)
          for (const principal of principals as PolicyCall['principal'][])
            for (const args of [undefined, { env: 'prod' }, { env: 'qa', file: 'app/.env' }, { file: 7 }]) {
              const theCall = call({ tool, execution_mode, principal, arguments: args });
              expect(merged.evaluate(theCall), JSON.stringify(theCall)).toEqual(alone.evaluate(theCall));
            }
    }
  });

  it('keeps apart rules whose conditions print alike as JSON but differ', () => {
    const policy = compilePolicy(
      {
        rules: [
          { id: 'not-a-number', effect: 'deny', arguments: [{ path: 'x', equals: Number.NaN }] },
          { id: 'null', effect: 'approval', arguments: [{ path: 'x', equals: null }] },
        ],
      },
      { defaultEffect: 'allow' },
    );
    expect(policy.evaluate(call({ arguments: { x: null } }))).toMatchObject({ decision: 'approval', rules: ['null'] });
  });

  it('shares conditions between rules without mixing up their effects', () => {
    const condition = { principals: { roles: ['dev'] }, arguments: [{ path: 'env', equals: 'prod' }] };
    const policy = compilePolicy(
      {
        rules: [
          { id: 'github-prod', effect: 'deny', servers: ['github'], ...condition },
          { id: 'jira-prod', effect: 'approval', servers: ['jira'], ...structuredClone(condition) },
          { id: 'slack-prod', effect: 'allow', servers: ['slack'], ...structuredClone(condition) },
        ],
      },
      { defaultEffect: 'deny' },
    );
    const prod = { principal: { roles: ['dev'] }, arguments: { env: 'prod' } };
    expect(policy.evaluate(call({ server: 'github', ...prod }))).toMatchObject({
      decision: 'deny',
      rules: ['github-prod'],
    });
    expect(policy.evaluate(call({ server: 'jira', ...prod }))).toMatchObject({
      decision: 'approval',
      rules: ['jira-prod'],
    });
    expect(policy.evaluate(call({ server: 'slack', ...prod }))).toMatchObject({
      decision: 'allow',
      rules: ['slack-prod'],
    });
    expect(policy.evaluate(call({ server: 'slack', ...prod, principal: { roles: ['ops'] } }))).toMatchObject({
      decision: 'deny',
      reason: 'default',
    });
  });
});
