import { describe, expect, it } from 'vitest';
import {
  parsePolicyDocument,
  parsePolicyText,
  PolicyParseResult,
  PolicyProblem,
  policyDocumentSchema,
} from './policy-document';

function rule(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: 'r1', effect: 'allow', ...overrides };
}

function problems(result: PolicyParseResult): PolicyProblem[] {
  if (result.ok) throw new Error('expected the document to be rejected');
  return result.problems;
}

function problemsOf(rules: unknown[], top: Record<string, unknown> = {}): PolicyProblem[] {
  return problems(parsePolicyDocument({ rules, ...top }));
}

describe('a valid document', () => {
  it('comes back as written', () => {
    const document = {
      default: 'deny',
      on_error: 'approval',
      rules: [
        {
          id: 'github.prod:approve',
          description: 'pushes to production repositories need a lead',
          effect: 'approval',
          approval_route: 'team-leads',
          servers: ['github', 'gitlab-*'],
          tools: ['push', 'merge_*'],
          tool_prefixes: ['delete_'],
          execution_mode: 'remote',
          principals: { roles: ['dev'], groups: ['platform'] },
          arguments: [
            { path: 'repo.name', regex: '^prod-' },
            { path: 'branch', in: ['main', 'release'] },
            { path: 'force', equals: true },
            { path: 'files.0.size', range: { gte: 0, lt: 1e6 } },
            { path: 'dry_run', exists: false },
            { path: 'meta', equals: { a: [1, null] } },
          ],
        },
      ],
    };
    expect(parsePolicyDocument(document)).toEqual({ ok: true, document });
    expect(parsePolicyDocument({ rules: [] })).toEqual({ ok: true, document: { rules: [] } });
  });

  it('reads the same from YAML and JSON', () => {
    const yaml = `
default: deny
rules:
  - id: no-prod-deletes
    effect: deny
    servers: [github]
    tool_prefixes: [delete_]
    arguments:
      - path: repo
        regex: ^prod-
  - id: flag
    effect: allow
    arguments:
      - path: verbose
        equals: yes
`;
    const json = JSON.stringify({
      default: 'deny',
      rules: [
        {
          id: 'no-prod-deletes',
          effect: 'deny',
          servers: ['github'],
          tool_prefixes: ['delete_'],
          arguments: [{ path: 'repo', regex: '^prod-' }],
        },
        // YAML 1.2 core schema: `yes` is the string "yes", not true
        { id: 'flag', effect: 'allow', arguments: [{ path: 'verbose', equals: 'yes' }] },
      ],
    });
    const fromYaml = parsePolicyText(yaml, 'yaml');
    expect(fromYaml.ok).toBe(true);
    expect(fromYaml).toEqual(parsePolicyText(json, 'json'));
  });
});

describe('problems', () => {
  it("refuse a rule id in the shell rules' space, which the overview and the replay leave out", () => {
    expect(problemsOf([rule({ id: 'shell:rm' })])).toEqual([
      expect.objectContaining({ path: 'rules[0].id', message: expect.stringMatching(/must not start with "shell:"/) }),
    ]);
  });

  it('point at the rule and field, with the rule id', () => {
    const found = problemsOf([rule({ id: 'fine' }), rule({ id: 'broken', arguments: [{ path: 'q', regex: '(' }] })]);
    expect(found).toEqual([
      {
        path: 'rules[1].arguments[0].regex',
        rule: 'broken',
        message: expect.stringMatching(/^does not compile: missing closing \)/),
      },
    ]);
  });

  it('are all reported at once, sorted by path (rules[2] before rules[10])', () => {
    const rules = Array.from({ length: 11 }, (_, i) => rule({ id: `r${i}` }));
    rules[10] = rule({ id: 'r10', effect: 'maybe' });
    rules[2] = rule({ id: 'r2', servers: [] });
    const found = problemsOf(rules, { default: 'approval', on_error: 'allow' });
    expect(found.map((problem) => [problem.path, problem.rule])).toEqual([
      ['default', undefined],
      ['on_error', undefined],
      ['rules[2].servers', 'r2'],
      ['rules[10].effect', 'r10'],
    ]);
    expect(found[0]!.message).toBe('must be one of "allow", "deny"');
    expect(found[2]!.message).toBe('must not be empty');
  });

  it('catch unknown fields anywhere, suggesting the likely one', () => {
    const found = problemsOf(
      [rule({ tool: ['x'], principals: { user: ['ana'] }, arguments: [{ path: 'a', exist: true }] })],
      { defaults: 'deny' },
    );
    expect(found).toEqual([
      { path: 'defaults', message: 'unknown field "defaults" (did you mean "default"?)' },
      {
        path: 'rules[0].arguments[0]',
        rule: 'r1',
        message: 'has no operator; give exactly one of equals, in, regex, range, exists',
      },
      { path: 'rules[0].arguments[0].exist', rule: 'r1', message: 'unknown field "exist" (did you mean "exists"?)' },
      {
        path: 'rules[0].principals',
        rule: 'r1',
        message: 'needs at least one of users, roles, groups, gateways, sessions',
      },
      { path: 'rules[0].principals.user', rule: 'r1', message: 'unknown field "user" (did you mean "users"?)' },
      { path: 'rules[0].tool', rule: 'r1', message: 'unknown field "tool" (did you mean "tools"?)' },
    ]);
  });

  it('report a duplicate id at its second use', () => {
    expect(problemsOf([rule({ id: 'a' }), rule({ id: 'b' }), rule({ id: 'a', effect: 'deny' })])).toEqual([
      { path: 'rules[2].id', rule: 'a', message: 'duplicate id "a", already used by rules[0]' },
    ]);
  });

  it('check ids, descriptions, names and routes', () => {
    const found = problemsOf([
      rule({ id: '-starts-with-dash' }),
      rule({ id: 'x'.repeat(65) }),
      rule({ id: 'ok1', description: 'd'.repeat(501) }),
      rule({ id: 'ok2', tools: ['t'.repeat(201), ''] }),
      rule({ id: 'ok3', effect: 'approval', approval_route: 'Security Team' }),
    ]);
    expect(found.map((problem) => problem.path)).toEqual([
      'rules[0].id',
      'rules[1].id',
      'rules[2].description',
      'rules[3].tools[0]',
      'rules[3].tools[1]',
      'rules[4].approval_route',
    ]);
    expect(found[0]).toMatchObject({
      rule: '-starts-with-dash',
      message: expect.stringContaining('starting with a letter or digit'),
    });
  });

  it('allow an approval route only on approval rules', () => {
    expect(problemsOf([rule({ effect: 'deny', approval_route: 'oncall' })])).toEqual([
      { path: 'rules[0].approval_route', rule: 'r1', message: 'is allowed only on a rule whose effect is "approval"' },
    ]);
    expect(parsePolicyDocument({ rules: [rule({ effect: 'approval', approval_route: 'oncall' })] }).ok).toBe(true);
  });

  it('need exactly one operator per condition', () => {
    const found = problemsOf([
      rule({ arguments: [{ path: 'a' }, { path: 'a', equals: 1, regex: 'x' }, { path: 'a', equals: null }] }),
    ]);
    expect(found).toEqual([
      {
        path: 'rules[0].arguments[0]',
        rule: 'r1',
        message: 'has no operator; give exactly one of equals, in, regex, range, exists',
      },
      {
        path: 'rules[0].arguments[1]',
        rule: 'r1',
        message: 'has equals and regex; give exactly one of equals, in, regex, range, exists',
      },
    ]);
  });

  it('check paths, ranges and lists in conditions', () => {
    const found = problemsOf([
      rule({
        arguments: [
          { path: 'a..b', exists: true },
          { path: '', exists: true },
          { path: 'n', range: {} },
          { path: 'n', range: { gt: 5, lt: 3 } },
          { path: 'n', range: { gte: 3, lt: 3 } },
          { path: 'n', range: { gte: 3, lte: 3 } },
          { path: 'n', in: [] },
          { path: 'n', exists: 'yes' },
        ],
      }),
    ]);
    expect(found.map((problem) => `${problem.path}: ${problem.message}`)).toEqual([
      'rules[0].arguments[0].path: must be dot-separated non-empty names, e.g. repo.owner or files.0.name',
      'rules[0].arguments[1].path: must be dot-separated non-empty names, e.g. repo.owner or files.0.name',
      'rules[0].arguments[2].range: needs at least one of gt, gte, lt, lte',
      'rules[0].arguments[3].range: can never hold: no number is gt 5 and lt 3',
      'rules[0].arguments[4].range: can never hold: no number is gte 3 and lt 3',
      'rules[0].arguments[6].in: must not be empty',
      'rules[0].arguments[7].exists: must be a boolean, not a string',
    ]);
  });

  it('name missing fields and wrong types', () => {
    expect(problemsOf([{ description: 'no id' }, 'text'])).toEqual([
      { path: 'rules[0].effect', message: 'is required' },
      { path: 'rules[0].id', message: 'is required' },
      { path: 'rules[1]', message: 'must be an object, not a string' },
    ]);
    expect(problems(parsePolicyDocument({}))).toEqual([{ path: 'rules', message: 'is required' }]);
    expect(problems(parsePolicyDocument([]))).toEqual([{ path: '', message: 'must be an object, not an array' }]);
  });

  it('limit a document to 10,000 rules', () => {
    const rules = Array.from({ length: 10_001 }, (_, i) => rule({ id: `r${i}` }));
    expect(problemsOf(rules)).toEqual([{ path: 'rules', message: 'must have at most 10000 entries' }]);
  });

  it('refuse hostile nesting instead of overflowing the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(problemsOf([rule({ arguments: [{ path: 'a', equals: deep }] })])).toEqual([
      { path: '', message: 'nested deeper than 64 levels' },
    ]);
    expect(problems(parsePolicyText('{"rules":' + '['.repeat(100_000), 'json'))[0]!.message).toBe(
      'line 1, column 74: nested deeper than 64 levels',
    );
  });

  it('come from the zod schema too, for callers that use it directly', () => {
    const result = policyDocumentSchema.safeParse({ rules: [rule({ approval_route: 'oncall' })] });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.path.join('.'))).toEqual(['rules.0.approval_route']);
  });
});

describe('text', () => {
  it('reports a YAML syntax error with its line and column', () => {
    expect(parsePolicyText('rules:\n  - id: a\n    effect: allow\n    tools: [x]]\n', 'yaml')).toEqual({
      ok: false,
      problems: [{ path: '', message: 'line 4, column 15: Unexpected flow-seq-end token in YAML stream: "]"' }],
    });
    expect(problems(parsePolicyText('rules:\n  - id: a\n    effect: "allow\n', 'yaml'))).toEqual([
      { path: '', message: expect.stringMatching(/^line 4, column 1: .*quote/) },
    ]);
  });

  it('rejects a key given twice, in YAML and in JSON', () => {
    expect(problems(parsePolicyText('rules:\n  - id: a\n    effect: allow\n    effect: deny\n', 'yaml'))).toEqual([
      { path: '', message: 'line 4, column 5: Map keys must be unique' },
    ]);
    expect(
      problems(parsePolicyText('{"rules": [\n  {"id": "a", "effect": "allow", "effect": "deny"}\n]}', 'json')),
    ).toEqual([{ path: '', message: 'line 2, column 34: duplicate key "effect"' }]);
  });

  it('reports a JSON syntax error with its line and column', () => {
    expect(problems(parsePolicyText('{\n  "rules": [\n    {"id": "a", "effect": "allow",}\n  ]\n}', 'json'))).toEqual([
      { path: '', message: 'line 3, column 35: expected a "quoted" property name' },
    ]);
    expect(problems(parsePolicyText('{"rules": []} x', 'json'))).toEqual([
      { path: '', message: 'line 1, column 15: unexpected text after the JSON value' },
    ]);
    expect(problems(parsePolicyText('', 'json'))).toEqual([
      { path: '', message: 'line 1, column 1: unexpected end of the text' },
    ]);
  });

  it('accepts one YAML document only, and no values JSON cannot hold', () => {
    expect(problems(parsePolicyText('rules: []\n---\nrules: []\n', 'yaml'))[0]!.message).toMatch(
      /several YAML documents/,
    );
    expect(
      problems(
        parsePolicyText(
          'rules:\n  - id: a\n    effect: allow\n    arguments:\n      - path: n\n        equals: .nan\n',
          'yaml',
        ),
      ),
    ).toEqual([
      {
        path: 'rules[0].arguments[0].equals',
        rule: 'a',
        message: 'must be a JSON value (string, finite number, boolean, null, array or object)',
      },
    ]);
  });

  it('validates the parsed text like a parsed document', () => {
    expect(problems(parsePolicyText('rules:\n  - id: a\n    effect: allow\n    tool: [x]\n', 'yaml'))).toEqual([
      { path: 'rules[0].tool', rule: 'a', message: 'unknown field "tool" (did you mean "tools"?)' },
    ]);
  });
});
