import { z } from 'zod';
import { LEGACY_REMOVAL, pageQuery, pageView } from '@aileron/http';
import { slug } from '@aileron/auth';
import { EFFECTS, policyDocumentSchema } from './domain/policy-document';
import { REPLAY_MAX_DAYS } from './domain/policy-replay';

export const wsParams = z.object({ ws: slug });
export const versionParams = z.object({ ws: slug, version: z.coerce.number().int().min(1) });

export const policyView = z.object({
  version: z.number().int().describe('0 until the first document is written; only ever grows'),
  digest: z.string().describe('sha256 of the canonical (RFC 8785) document'),
  workspace_default: z.enum(['allow', 'deny']).describe("the workspace's default, used when the document names none"),
  created_at: z.string().nullable(),
  created_by: z.string().nullable(),
  document: policyDocumentSchema,
});

export const writeResult = policyView.extend({
  changed: z.boolean().describe('false when the document equals the one in force (no new version)'),
});

export const validateResult = z.object({
  rules: z.number().int(),
  digest: z.string().describe('sha256 of the canonical (RFC 8785) document, as a save would record it'),
  changed: z.boolean().describe('false when the document equals the one in force (a save would create no version)'),
});

export const versionSummary = z.object({
  version: z.number().int(),
  digest: z.string(),
  rules: z.number().int(),
  restored_from: z.number().int().nullable(),
  created_at: z.string(),
  created_by: z.string().nullable(),
});

export const versionsQuery = pageQuery().extend({
  before: z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .meta({ deprecated: true })
    .describe(`versions older than this; deprecated (use \`cursor\`), removed in ${LEGACY_REMOVAL}`),
});

export const diffQuery = z.object({ from: z.coerce.number().int().min(0), to: z.coerce.number().int().min(0) });

export const rollbackBody = z.object({ version: z.number().int().min(1) }).strict();

const name = z.string().min(1).max(200);
export const evaluateBody = z
  .object({
    server: name,
    tool: name,
    tool_prefix: name
      .optional()
      .describe("the server's catalog `tool_prefix`: rules may name the tool as `<tool_prefix>__<tool>`"),
    arguments: z.record(z.string(), z.unknown()).optional(),
    principal: z
      .object({
        user: name.optional(),
        roles: z.array(name).max(100).optional(),
        groups: z.array(name).max(100).optional(),
        gateway: name.optional(),
        session: name.optional(),
      })
      .strict()
      .optional()
      .describe('who would make the call; rules naming principals do not match a call without one'),
    execution_mode: z.enum(['local', 'remote']).optional(),
  })
  .strict();

export const decisionView = z.object({
  decision: z.enum(EFFECTS),
  reason: z.enum(['rule', 'default', 'evaluation_error']),
  rules: z.array(z.string()).describe('the rules that decided (empty when the default did)'),
  approval_route: z.string().nullable(),
  errors: z
    .array(z.object({ rule: z.string(), message: z.string() }))
    .describe('rules that could not be evaluated for this call'),
  policy_version: z.number().int(),
});

const ruleShape = z.record(z.string(), z.unknown());
export const diffView = z.object({
  from: z.number().int(),
  to: z.number().int(),
  settings: z.array(z.object({ field: z.string(), before: z.unknown(), after: z.unknown() })),
  added: z.array(ruleShape),
  removed: z.array(ruleShape),
  changed: z.array(z.object({ id: z.string(), before: ruleShape, after: ruleShape })),
});

export const replayBody = z
  .object({
    document: policyDocumentSchema.describe('the draft: a policy document as `PUT …/policy` takes it'),
    since: z.iso
      .datetime({ offset: true })
      .describe(`replay the calls recorded from then until now; at most ${REPLAY_MAX_DAYS} days back`),
  })
  .strict();

const replayedDecision = decisionView.pick({ decision: true, reason: true, rules: true, approval_route: true });
export const replayItem = z.object({
  id: z.string().describe('the audit record of the call (`GET …/audit` shows it whole)'),
  occurred_at: z.string(),
  server: z.string(),
  tool: z.string(),
  execution_mode: z.enum(['local', 'remote']).nullable(),
  actor: z.string().nullable().describe('who made the call, as the audit log names them'),
  session: z.string().nullable(),
  arguments: z
    .record(z.string(), z.unknown())
    .describe("as recorded: the policy's `redact` paths and credential-like values hidden"),
  recorded: z.object({
    decision: z.enum(EFFECTS).describe('what the policy decided then'),
    rules: z.array(z.string()).describe('the rules that decided then, where the record names them'),
    policy_version: z.number().int().nullable(),
  }),
  draft: replayedDecision.describe('what the draft decides, and the rules responsible'),
});
export const replayView = pageView(replayItem).extend({
  since: z.string(),
  until: z.string().describe('when the first page ran: every page replays calls recorded before it'),
  examined: z.number().int().describe('recorded calls this page decided again'),
});
