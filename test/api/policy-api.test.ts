import { describe, expect, it } from 'vitest';
import { aToken, aWorkspace, uniqueSlug } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';

const POLICY = {
  rules: [
    { id: 'read-github', effect: 'allow', servers: ['github'], tools: ['get_*', 'list_*'] },
    {
      id: 'merge-review',
      effect: 'approval',
      approval_route: 'security',
      servers: ['github'],
      tools: ['merge_pull_request'],
    },
    { id: 'merge-anything', effect: 'allow', servers: ['github'], tool_prefixes: ['merge_'] },
    // "exists" first: a call without a repo is not about production (false beats error)
    {
      id: 'no-prod',
      effect: 'deny',
      arguments: [
        { path: 'repo', exists: true },
        { path: 'repo', regex: '^prod-' },
      ],
    },
    { id: 'admins-only', effect: 'allow', tools: ['delete_repo'], principals: { roles: ['admin'] } },
  ],
};

const YAML_POLICY = `# the same policy, written by hand
default: deny
rules:
  - id: read-github
    effect: allow
    servers: [github]
    tools: ["get_*", "list_*"]
  - id: big-transfers
    effect: approval
    servers: [bank]
    tools: [transfer]
    arguments:
      - path: amount
        range: { gt: 1000 }
`;

// the HTTP contract, on the embedded database: every repository query it makes runs on PGlite and PostgreSQL alike in test/database/repository-parity.test.ts
describe('policy API', () => {
  let cp: TestControlPlane;
  let ws: string;
  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
  });

  const evaluate = (body: Record<string, unknown>, workspace = ws) =>
    cp.request('POST', `/v1/workspaces/${workspace}/policy/evaluate`, { body });

  it('a new workspace denies by default, naming no rule; the embedded default workspace allows', async () => {
    const current = await cp.request('GET', `/v1/workspaces/${ws}/policy`);
    expect(current.body).toMatchObject({ version: 0, workspace_default: 'deny', document: { rules: [] } });
    const decision = await evaluate({ server: 'github', tool: 'get_issue' });
    expect(decision.body).toMatchObject({ decision: 'deny', reason: 'default', rules: [], policy_version: 0 });

    const open = await cp.request('POST', '/v1/workspaces', {
      body: { slug: uniqueSlug('open'), name: 'Open', policy_default: 'allow' },
    });
    expect(open.body.policy_default).toBe('allow');
    expect((await evaluate({ server: 'x', tool: 'y' }, open.body.slug)).body.decision).toBe('allow');

    // embedded mode: one developer is never blocked (server mode's first workspace: below)
    expect((await evaluate({ server: 'github', tool: 'get_issue' }, 'default')).body.decision).toBe('allow');
  });

  it('PUT stores a version; deny beats approval beats allow, and the answer names the deciding rules', async () => {
    const put = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: POLICY });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ version: 1, changed: true });

    expect((await evaluate({ server: 'github', tool: 'get_issue' })).body).toMatchObject({
      decision: 'allow',
      reason: 'rule',
      rules: ['read-github'],
      policy_version: 1,
    });
    expect((await evaluate({ server: 'github', tool: 'merge_pull_request' })).body).toMatchObject({
      decision: 'approval',
      rules: ['merge-review'],
      approval_route: 'security',
    });
    expect(
      (await evaluate({ server: 'github', tool: 'merge_pull_request', arguments: { repo: 'prod-payments' } })).body,
    ).toMatchObject({
      decision: 'deny',
      rules: ['no-prod'],
    });
    expect(
      (await evaluate({ server: 'github', tool: 'delete_repo', principal: { roles: ['admin'] } })).body.rules,
    ).toEqual(['admins-only']);
    expect(
      (await evaluate({ server: 'github', tool: 'delete_repo', principal: { roles: ['member'] } })).body,
    ).toMatchObject({ decision: 'deny', reason: 'default' });
  });

  it('a rule that cannot be evaluated never lets a call through silently', async () => {
    // no-prod needs "repo" to be a string: a number makes it an error, which counts as deny
    const wrongType = await evaluate({ server: 'github', tool: 'get_issue', arguments: { repo: 42 } });
    expect(wrongType.body).toMatchObject({ decision: 'deny', rules: ['no-prod'], errors: [{ rule: 'no-prod' }] });
    expect((await evaluate({ server: 'github', tool: 'get_issue', arguments: {} })).body).toMatchObject({
      decision: 'allow',
      errors: [],
    });
  });

  it('accepts YAML; the same document again creates no version', async () => {
    const yaml = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: YAML_POLICY,
      headers: { 'content-type': 'application/yaml' },
    });
    expect(yaml.status, yaml.text).toBe(200);
    expect(yaml.body).toMatchObject({ version: 2, changed: true, document: { default: 'deny' } });
    expect((await evaluate({ server: 'bank', tool: 'transfer', arguments: { amount: 5000 } })).body).toMatchObject({
      decision: 'approval',
      rules: ['big-transfers'],
    });
    expect((await evaluate({ server: 'bank', tool: 'transfer', arguments: { amount: 5 } })).body).toMatchObject({
      decision: 'deny',
      reason: 'default',
    });
    // without an amount the rule cannot be evaluated: it counts as its effect, not as "no match"
    expect((await evaluate({ server: 'bank', tool: 'transfer' })).body).toMatchObject({
      decision: 'approval',
      rules: ['big-transfers'],
      errors: [{ rule: 'big-transfers' }],
    });

    const again = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: YAML_POLICY,
      headers: { 'content-type': 'application/yaml' },
    });
    expect(again.body).toMatchObject({ version: 2, changed: false });
  });

  it('regexes are RE2: a catastrophic pattern is evaluated at once, backreferences, lookaround and novels are refused', async () => {
    const own = (await aWorkspace(cp, cp.ownerToken)).slug;
    const put = await cp.request('PUT', `/v1/workspaces/${own}/policy`, {
      body: {
        default: 'allow',
        rules: [{ id: 'nested', effect: 'deny', arguments: [{ path: 'q', regex: '^(a+)+$' }] }],
      },
    });
    expect(put.status, put.text).toBe(200);
    expect(
      (await evaluate({ server: 'github', tool: 'search', arguments: { q: `${'a'.repeat(40)}!` } }, own)).body,
    ).toMatchObject({ decision: 'allow', reason: 'default' });
    expect(
      (await evaluate({ server: 'github', tool: 'search', arguments: { q: 'a'.repeat(40) } }, own)).body,
    ).toMatchObject({ decision: 'deny', rules: ['nested'] });
    const refused = await cp.request('PUT', `/v1/workspaces/${own}/policy`, {
      body: {
        rules: [
          { id: 'backref', effect: 'deny', arguments: [{ path: 'q', regex: '(a)\\1' }] },
          { id: 'lookahead', effect: 'deny', arguments: [{ path: 'q', regex: 'prod(?=-)' }] },
          { id: 'novel', effect: 'deny', arguments: [{ path: 'q', regex: 'a'.repeat(1001) }] },
        ],
      },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.code).toBe('POLICY_INVALID');
    expect(refused.body.errors).toEqual([
      expect.objectContaining({
        path: 'body.rules[0].arguments[0].regex',
        rule: 'backref',
        message: expect.stringContaining('RE2 syntax'),
      }),
      expect.objectContaining({
        path: 'body.rules[1].arguments[0].regex',
        rule: 'lookahead',
        message: expect.stringContaining('RE2 syntax'),
      }),
      expect.objectContaining({
        path: 'body.rules[2].arguments[0].regex',
        rule: 'novel',
        message: expect.stringContaining('longer than 1000 characters'),
      }),
    ]);
  });

  it('bad documents get every problem with the rule and field, and nothing is stored', async () => {
    const bad = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: {
        rules: [
          { id: 'a', effect: 'allow', tools: ['x'] },
          { id: 'b', effect: 'deny', arguments: [{ path: 'repo', regex: '(' }] },
          { id: 'a', effect: 'allow', approval_route: 'sec' },
          { id: 'c', effect: 'maybe', tool: 'typo' },
        ],
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toContain('application/problem+json');
    expect(bad.body.code).toBe('POLICY_INVALID');
    const problems = bad.body.errors as { path: string; rule?: string; message: string }[];
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'body.rules[1].arguments[0].regex', rule: 'b' }),
        expect.objectContaining({ path: 'body.rules[2].id', rule: 'a' }),
        expect.objectContaining({ path: 'body.rules[2].approval_route', rule: 'a' }),
        expect.objectContaining({ path: 'body.rules[3].effect', rule: 'c' }),
      ]),
    );
    expect(problems.some((p) => p.path.startsWith('body.rules[3]') && /tool/.test(p.path + p.message))).toBe(true);

    const yaml = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: 'rules:\n  - id: x\n   effect: [deny\n',
      headers: { 'content-type': 'application/yaml' },
    });
    expect(yaml.status).toBe(400);
    expect(yaml.body.code).toBe('MALFORMED_YAML');
    expect(yaml.body.detail).toMatch(/line \d+, column \d+/);

    const xml = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: '<rules/>',
      headers: { 'content-type': 'application/xml' },
    });
    expect(xml.status).toBe(415);

    expect((await cp.request('GET', `/v1/workspaces/${ws}/policy`)).body.version).toBe(2);
  });

  it('validate answers the problems a save would, or that a save would change nothing, and stores nothing', async () => {
    const validate = (body: unknown, headers: Record<string, string> = {}) =>
      cp.request('POST', `/v1/workspaces/${ws}/policy/validate`, { body, headers });
    const bad = {
      rules: [
        { id: 'b', effect: 'deny', arguments: [{ path: 'repo', regex: '(' }] },
        { id: 'c', effect: 'maybe' },
      ],
    };
    const checked = await validate(bad);
    const saved = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: bad });
    expect(checked.status).toBe(400);
    expect(checked.body.code).toBe('POLICY_INVALID');
    expect(checked.body.errors).toEqual(saved.body.errors);
    expect(checked.body.errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: 'body.rules[1].effect', rule: 'c' })]),
    );

    const yaml = await validate('rules:\n  - id: x\n   effect: [deny\n', { 'content-type': 'application/yaml' });
    expect(yaml.status).toBe(400);
    expect(yaml.body).toMatchObject({ code: 'MALFORMED_YAML', detail: expect.stringMatching(/^line 3, column \d+/) });

    // the document in force: a save would make no version; another one would
    expect((await validate(YAML_POLICY, { 'content-type': 'application/yaml' })).body).toMatchObject({
      rules: 2,
      changed: false,
    });
    const draft = await validate({ rules: [{ id: 'only', effect: 'allow', tools: ['x'] }] });
    expect(draft.status, draft.text).toBe(200);
    expect(draft.body).toEqual({ rules: 1, digest: expect.stringMatching(/^[0-9a-f]{64}$/), changed: true });

    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws });
    expect(
      (await cp.request('POST', `/v1/workspaces/${ws}/policy/validate`, { token: member.token, body: { rules: [] } }))
        .status,
    ).toBe(200);
    expect((await cp.request('GET', `/v1/workspaces/${ws}/policy`)).body.version).toBe(2);
  });

  it('lists versions, shows one, diffs two and rolls back as a new version', async () => {
    const versions = await cp.request('GET', `/v1/workspaces/${ws}/policy/versions`);
    expect(versions.body.versions.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    expect(versions.body.versions[1]).toMatchObject({ rules: 5, restored_from: null });

    const one = await cp.request('GET', `/v1/workspaces/${ws}/policy/versions/1`);
    expect(one.body.document.rules).toHaveLength(5);
    expect((await cp.request('GET', `/v1/workspaces/${ws}/policy/versions/99`)).body.code).toBe(
      'POLICY_VERSION_NOT_FOUND',
    );

    const diff = await cp.request('GET', `/v1/workspaces/${ws}/policy/diff?from=1&to=2`);
    expect(diff.status, diff.text).toBe(200);
    expect(diff.body.added.map((r: { id: string }) => r.id)).toEqual(['big-transfers']);
    expect(diff.body.removed.map((r: { id: string }) => r.id)).toEqual([
      'admins-only',
      'merge-anything',
      'merge-review',
      'no-prod',
    ]);
    expect(diff.body.changed).toEqual([]);
    expect(diff.body.settings).toEqual([expect.objectContaining({ field: 'default', after: 'deny' })]);

    const rollback = await cp.request('POST', `/v1/workspaces/${ws}/policy/rollback`, { body: { version: 1 } });
    expect(rollback.body).toMatchObject({ version: 3, changed: true });
    expect((await evaluate({ server: 'github', tool: 'merge_pull_request' })).body).toMatchObject({
      decision: 'approval',
      policy_version: 3,
    });
    const history = await cp.request('GET', `/v1/workspaces/${ws}/policy/versions?limit=1`);
    expect(history.body).toMatchObject({ versions: [{ version: 3, restored_from: 1 }], next_before: 3 });
  });

  it('evaluate changes nothing; members may read and evaluate but not write; the change is an outbox event', async () => {
    const before = (await cp.request('GET', `/v1/workspaces/${ws}/policy/versions`)).body;
    for (let i = 0; i < 3; i++) await evaluate({ server: 'github', tool: 'get_issue' });
    expect((await cp.request('GET', `/v1/workspaces/${ws}/policy/versions`)).body).toEqual(before);

    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws });
    expect((await cp.request('GET', `/v1/workspaces/${ws}/policy`, { token: member.token })).status).toBe(200);
    expect(
      (
        await cp.request('POST', `/v1/workspaces/${ws}/policy/evaluate`, {
          token: member.token,
          body: { server: 'a', tool: 'b' },
        })
      ).status,
    ).toBe(200);
    const write = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { token: member.token, body: { rules: [] } });
    expect(write.status).toBe(403);

    const events = await cp.cp.database.client.$queryRawUnsafe<{ payload: { version: number; workspace: string } }[]>(
      `SELECT payload FROM outbox_messages WHERE topic = 'policy.updated' AND payload->>'workspace' = $1 ORDER BY id`,
      ws,
    );
    expect(events.map((e) => e.payload.version)).toEqual([1, 2, 3]);
  });
});

describe('policy API in server mode', () => {
  let cp: TestControlPlane;
  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('postgres');
  });

  it('the first workspace is locked down: the default workspace denies what no rule allows', async () => {
    const fallback = await cp.request('POST', '/v1/workspaces/default/policy/evaluate', {
      body: { server: 'github', tool: 'get_issue' },
    });
    expect(fallback.status, fallback.text).toBe(200);
    expect(fallback.body).toMatchObject({ decision: 'deny', reason: 'default' });
  });
});
