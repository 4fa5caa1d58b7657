import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import {
  LEGACY_REMOVAL,
  legacyPageView,
  ListCursor,
  numberKey,
  pageQuery,
  PageQuery,
  Route,
  withLegacyKey,
} from '@aileron/http';
import { policyDocumentSchema } from './domain/policy-document';
import {
  decisionView,
  diffQuery,
  diffView,
  evaluateBody,
  policyView,
  replayBody,
  replayView,
  rollbackBody,
  validateResult,
  versionParams,
  versionSummary,
  versionsQuery,
  writeResult,
  wsParams,
} from './policy.schemas';
import { REPLAY_MAX_DAYS, REPLAY_SCAN_LIMIT } from './domain/policy-replay';
import { PolicyReplay } from './policy-replay.service';
import { CurrentPolicy, PolicyService } from './policy.service';

const EXAMPLE = {
  default: 'deny',
  rules: [
    { id: 'read-only-github', effect: 'allow', servers: ['github'], tools: ['get_*', 'list_*', 'search_*'] },
    {
      id: 'merge-needs-review',
      effect: 'approval',
      approval_route: 'security',
      servers: ['github'],
      tools: ['merge_pull_request'],
    },
    { id: 'no-prod-writes', effect: 'deny', tools: ['*'], arguments: [{ path: 'repo', regex: '^prod-' }] },
  ],
};

const versionsPage = legacyPageView(versionSummary, 'versions').extend({
  next_before: z
    .number()
    .int()
    .nullable()
    .meta({ deprecated: true })
    .describe(
      `the \`before\` of the next page, null on the last; deprecated (use \`next_cursor\`), removed in ${LEGACY_REMOVAL}`,
    ),
});
const versionsCursor = new ListCursor('policy-versions', numberKey);

function view(policy: CurrentPolicy): z.infer<typeof policyView> {
  return {
    version: policy.version,
    digest: policy.digest,
    workspace_default: policy.workspaceDefault,
    created_at: policy.createdAt?.toISOString() ?? null,
    created_by: policy.createdBy,
    document: policy.document,
  };
}

@Controller()
export class PolicyController {
  constructor(
    private readonly policies: PolicyService,
    private readonly replays: PolicyReplay,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/policy',
    summary: "The workspace's policy document in force and its version",
    tag: 'policy',
    permission: 'policy.read',
    tenancy: 'workspace',
    params: wsParams,
    response: policyView,
  })
  async get(@TenantScope() scope: WorkspaceScope): Promise<z.infer<typeof policyView>> {
    return view(await this.policies.current(scope));
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/policy',
    summary: "Replace the workspace's policy document (JSON or YAML); returns its new version",
    description:
      'Every problem is reported at once, each with the path of the field (`body.rules[2].arguments[0].regex`) and the id of its rule. Writing the document in force again creates no version.',
    tag: 'policy',
    permission: 'policy.write',
    tenancy: 'workspace',
    params: wsParams,
    body: policyDocumentSchema,
    bodyValidation: 'handler',
    accepts: ['yaml'],
    response: writeResult,
    example: { body: EXAMPLE },
  })
  async put(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: unknown,
  ): Promise<z.infer<typeof writeResult>> {
    const { policy, changed } = await this.policies.replace(caller, scope, body);
    return { ...view(policy), changed };
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/policy/validate',
    summary: 'Check a policy document (JSON or YAML) as a save would, without saving it',
    description:
      'Answers what `PUT …/policy` would for the same body: `400 POLICY_INVALID` with every problem in `errors`, `400 MALFORMED_YAML` naming the line, or, for a valid document, its rule count, digest and whether it differs from the one in force. Nothing is stored; editors call it as the author types.',
    tag: 'policy',
    permission: 'policy.read',
    tenancy: 'workspace',
    params: wsParams,
    body: policyDocumentSchema,
    bodyValidation: 'handler',
    accepts: ['yaml'],
    response: validateResult,
    example: { body: EXAMPLE },
  })
  async validate(@TenantScope() scope: WorkspaceScope, @Body() body: unknown): Promise<z.infer<typeof validateResult>> {
    return this.policies.validate(scope, body);
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/policy/versions',
    summary: 'Every version of the policy, newest first',
    tag: 'policy',
    permission: 'policy.read',
    tenancy: 'workspace',
    params: wsParams,
    query: versionsQuery,
    response: versionsPage,
  })
  async versions(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof versionsQuery>,
  ): Promise<z.infer<typeof versionsPage>> {
    const rows = await this.policies.versions(scope, versionsCursor.keyset(query, query.before));
    const page = versionsCursor.page(
      rows,
      query,
      (v) => v.version,
      (v) => ({
        version: v.version,
        digest: v.digest,
        rules: v.rules,
        restored_from: v.restoredFrom,
        created_at: v.createdAt.toISOString(),
        created_by: v.createdBy,
      }),
    );
    return {
      ...withLegacyKey(page, 'versions'),
      next_before: page.next_cursor === null ? null : page.items[page.items.length - 1]!.version,
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/policy/versions/:version',
    summary: 'One version of the policy document',
    tag: 'policy',
    permission: 'policy.read',
    tenancy: 'workspace',
    params: versionParams,
    response: policyView.omit({ workspace_default: true }),
    example: { params: { version: '1' } },
  })
  async version(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof versionParams>,
  ): Promise<Omit<z.infer<typeof policyView>, 'workspace_default'>> {
    const record = await this.policies.version(scope, params.version);
    return {
      version: record.version,
      digest: record.digest,
      created_at: record.createdAt.toISOString(),
      created_by: record.createdBy,
      document: record.document,
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/policy/diff',
    summary: 'What changed between two versions (rules by id; 0 is the empty policy)',
    tag: 'policy',
    permission: 'policy.read',
    tenancy: 'workspace',
    params: wsParams,
    query: diffQuery,
    response: diffView,
    example: { query: { from: '0', to: '1' } },
  })
  async diff(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof diffQuery>,
  ): Promise<z.infer<typeof diffView>> {
    const diff = await this.policies.diff(scope, query.from, query.to);
    return { from: query.from, to: query.to, ...(diff as unknown as Omit<z.infer<typeof diffView>, 'from' | 'to'>) };
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/policy/rollback',
    summary: 'Put an earlier version back in force, as a new version',
    tag: 'policy',
    permission: 'policy.write',
    tenancy: 'workspace',
    params: wsParams,
    body: rollbackBody,
    response: writeResult,
    example: { body: { version: 1 } },
  })
  async rollback(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof rollbackBody>,
  ): Promise<z.infer<typeof writeResult>> {
    const { policy, changed } = await this.policies.rollback(caller, scope, body.version);
    return { ...view(policy), changed };
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/policy/evaluate',
    summary: 'What the policy in force decides for a call, and which rules decided; no side effects',
    tag: 'policy',
    permission: 'policy.evaluate',
    tenancy: 'workspace',
    params: wsParams,
    body: evaluateBody,
    response: decisionView,
    example: {
      body: { server: 'github', tool: 'merge_pull_request', arguments: { repo: 'payments' }, execution_mode: 'remote' },
    },
  })
  async evaluate(
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof evaluateBody>,
  ): Promise<z.infer<typeof decisionView>> {
    return this.policies.evaluate(scope, body);
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/policy/replay',
    summary: "Run a draft policy against the workspace's recorded calls: the calls it would decide differently",
    description: `Decides again every call the audit log recorded since \`since\` (at most ${REPLAY_MAX_DAYS} days back: \`400 REPLAY_WINDOW_TOO_LONG\`) with the draft, and lists those whose decision changes (allow → deny, deny → approval, …) with the rules responsible and the decision recorded then. Paged: a page decides at most ${REPLAY_SCAN_LIMIT} recorded calls, so it may hold fewer items than \`limit\` with a \`next_cursor\`; send the same body with the cursor to continue. Every page replays the calls recorded before the first page ran (\`until\`). Nothing is stored. The draft is checked as \`PUT …/policy\` checks it (\`400 POLICY_INVALID\`, fields named \`body.document.…\`). Roles and groups are not recorded with calls: rules naming only those do not match a replayed call.`,
    tag: 'policy',
    // it lists recorded calls, which only the audit log's readers see
    permission: 'audit.read',
    tenancy: 'workspace',
    params: wsParams,
    query: pageQuery(),
    body: replayBody,
    bodyValidation: 'handler',
    response: replayView,
    example: { body: { document: EXAMPLE, since: '2026-11-20T00:00:00.000Z' } },
  })
  async replay(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: PageQuery,
    @Body() body: unknown,
  ): Promise<z.infer<typeof replayView>> {
    const page = await this.replays.replay(scope, body, query);
    return {
      items: page.differences.map(({ call, draft }) => ({
        id: call.id,
        occurred_at: call.occurredAt.toISOString(),
        server: call.server,
        tool: call.tool,
        execution_mode: call.executionMode,
        actor: call.actor,
        session: call.session,
        arguments: call.arguments,
        recorded: { decision: call.decision, rules: call.rules, policy_version: call.policyVersion },
        draft: {
          decision: draft.decision,
          reason: draft.reason,
          rules: [...draft.rules],
          approval_route: draft.approval_route,
        },
      })),
      next_cursor: page.nextCursor,
      since: page.since.toISOString(),
      until: page.until.toISOString(),
      examined: page.examined,
    };
  }
}
