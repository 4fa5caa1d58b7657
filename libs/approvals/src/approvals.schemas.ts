import { z } from 'zod';
import { callArgumentsSchema } from '@aileron/audit';
import { slug } from '@aileron/auth';
import { LEGACY_REMOVAL, pageQuery } from '@aileron/http';
import type { ApprovalRecord } from './approvals.repository';

export const wsParams = z.object({ ws: slug });
export const idParams = z.object({ id: z.uuid() });

export const approvalView = z.object({
  id: z.string(),
  workspace_id: z.string(),
  status: z.enum(['pending', 'approved', 'denied', 'expired', 'cancelled']),
  requester: z.string().describe('on whose behalf the call would run'),
  requested_by: z.string().describe('the gateway, pool instance or token that asked'),
  session: z.string().nullable(),
  server: z.string(),
  tool: z.string(),
  arguments: z
    .record(z.string(), z.unknown())
    .describe("the exact arguments, credential-like values and the policy's `redact` paths shown as [redacted]"),
  arguments_digest: z
    .string()
    .describe('sha256 of the canonical (RFC 8785) full arguments: the approval lets only these through'),
  execution_mode: z.string(),
  policy_version: z.number().int(),
  rules: z.array(z.string()).describe('the policy rules that asked for approval'),
  route: z.string(),
  quorum: z.number().int(),
  decisions: z.array(
    z.object({
      approver: z.string(),
      decision: z.enum(['approve', 'deny']),
      reason: z.string().nullable(),
      via: z.string(),
      at: z.string(),
    }),
  ),
  expires_at: z.string(),
  created_at: z.string(),
  decided_at: z.string().nullable(),
  reason: z.string().nullable(),
  consumed_at: z.string().nullable().describe('when the approved call ran; an approval works once'),
  review_url: z.string(),
});

export function toView(record: ApprovalRecord, reviewUrl: string): z.infer<typeof approvalView> {
  return {
    id: record.id,
    workspace_id: record.workspaceId,
    status: record.status,
    requester: record.requester,
    requested_by: record.requestedBy,
    session: record.sessionId,
    server: record.server,
    tool: record.tool,
    arguments: record.arguments,
    arguments_digest: record.argumentsDigest,
    execution_mode: record.executionMode,
    policy_version: record.policyVersion,
    rules: record.rules,
    route: record.route,
    quorum: record.quorum,
    decisions: record.decisions.map((d) => ({
      approver: d.approver,
      decision: d.decision,
      reason: d.reason,
      via: d.via,
      at: d.createdAt.toISOString(),
    })),
    expires_at: record.expiresAt.toISOString(),
    created_at: record.createdAt.toISOString(),
    decided_at: record.decidedAt?.toISOString() ?? null,
    reason: record.decisionReason,
    consumed_at: record.consumedAt?.toISOString() ?? null,
    review_url: reviewUrl,
  };
}

export const listQuery = pageQuery().extend({
  status: z.enum(['pending', 'approved', 'denied', 'expired', 'cancelled']).optional(),
  before: z.iso
    .datetime({ offset: true })
    .optional()
    .meta({ deprecated: true })
    .describe(
      `requests created before this instant; deprecated (use \`cursor\`: requests created in the same millisecond are not told apart), removed in ${LEGACY_REMOVAL}`,
    ),
});

export const waitQuery = z.object({
  wait: z.coerce.number().int().min(0).max(120).optional().describe('seconds to wait for a decision (at most 120)'),
});

export const decideBody = z.object({
  reason: z.string().max(2000).optional(),
  channel: z.enum(['rest', 'page', 'cli']).default('rest').describe('where the decision was made, for the record'),
});

export const linkBody = z.object({ user: z.uuid().describe('the approver the link is for') });
export const linkView = z.object({
  user: z.string().describe('the approver the link was sent to'),
  expires_at: z.string().describe('the link works until the request expires'),
  channels: z.number().int().describe('webhook endpoints that carry it to them'),
});

const callFields = {
  server: z.string().min(1).max(256),
  tool: z.string().min(1).max(256),
  arguments: callArgumentsSchema.optional(),
  session: z.string().min(1).max(256).optional(),
  principal: z
    .string()
    .min(1)
    .max(320)
    .describe('on whose behalf the call runs: the signed-in developer (`user:<id>` or e-mail)'),
};

export const gatewayRequestBody = z.object({
  ...callFields,
  roles: z.array(z.string().max(64)).max(50).optional(),
  groups: z.array(z.string().max(128)).max(200).optional(),
});

export const consumeBody = z.object(callFields);

export const linkQuery = z.object({ link: z.string().min(1).max(200) });
export const linkDecisionBody = z.object({
  link: z.string().min(1).max(200),
  decision: z.enum(['approve', 'deny']),
  reason: z.string().max(2000).optional(),
});

export const sessionDecisionBody = z
  .object({ decision: z.enum(['approve', 'deny']), reason: z.string().max(2000).optional() })
  .strict();

export const cancelBody = z.object({ reason: z.string().max(2000).optional() });
