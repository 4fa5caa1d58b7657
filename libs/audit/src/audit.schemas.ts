import { z } from 'zod';
import { slug } from '@aileron/auth';
import { legacyPageView, pageQuery } from '@aileron/http';
import type { ChainedRecord } from './domain/chain';
import { decisionsMatching } from './domain/execution-record';

export const wsParams = z.object({ ws: slug });

const csvList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.string().max(64)).max(20));

/** Up to 500 a page, as before pages had one size: scripts that read the log in big pages keep working. */
const AUDIT_PAGE = pageQuery({ max: 500 });

export const auditQuery = z
  .object({
    from: z.iso.datetime({ offset: true }).optional().describe('occurred at or after (ISO-8601)'),
    to: z.iso.datetime({ offset: true }).optional().describe('occurred before (ISO-8601)'),
    actor: z.string().max(256).optional().describe('`user:<id>`, `token:<id>`, `gateway:<id>`, `system`'),
    principal: z.string().max(256).optional(),
    server: z.string().max(256).optional(),
    tool: z.string().max(256).optional(),
    decision: z
      .enum(['allow', 'deny', 'approved', 'approval'])
      .optional()
      .describe('`approved`: calls a person let through (`approval`, its older name, finds the same)'),
    session: z.string().max(256).optional(),
    type: csvList.optional().describe('event types, comma-separated'),
    execution_mode: z.enum(['local', 'remote']).optional(),
  })
  .extend(AUDIT_PAGE.shape);

export const exportQuery = auditQuery.omit({ cursor: true, limit: true }).extend({
  format: z.enum(['jsonl', 'csv']).default('jsonl'),
});

export const recordView = z.object({
  id: z.string(),
  seq: z.number().int().describe('position in the chain'),
  type: z.string(),
  recorded_at: z.string().describe('when the control plane recorded it; the chain is in this order'),
  occurred_at: z.string().describe("when it happened, by the reporter's clock"),
  source: z.enum(['api', 'gateway', 'pool', 'system']),
  actor: z.string().nullable(),
  principal: z.string().nullable(),
  execution_mode: z.string().nullable(),
  server: z.string().nullable(),
  tool: z.string().nullable(),
  decision: z.string().nullable(),
  session: z.string().nullable(),
  workspace_id: z.string().nullable(),
  organization_id: z.string(),
  chain_id: z.string().describe("the workspace's id, or the organisation's for its own chain"),
  data: z.record(z.string(), z.unknown()),
  prev_hash: z.string(),
  hash: z.string().describe('sha256 of the canonical record (RFC 8785), prev_hash included'),
});

export const searchView = legacyPageView(recordView, 'events');

export const verifyView = z.object({
  ok: z.boolean(),
  events: z.number().int().describe('records checked'),
  checkpoints: z.number().int().describe('signed checkpoints checked'),
  first_bad: z
    .object({ seq: z.number().int(), id: z.string().nullable(), reason: z.string() })
    .optional()
    .describe('the first record that is not what the chain says it should be'),
});

export const retentionBody = z.object({
  days: z.number().int().min(1).max(36_500).nullable().describe('null keeps records for ever'),
});
export const retentionView = retentionBody;

export const ingestBody = z.object({
  events: z
    .array(z.unknown())
    .min(1)
    .max(1000)
    .describe('each event is validated alone; see the gateway docs for its fields'),
});

export const ingestView = z.object({
  accepted: z.number().int(),
  duplicates: z.number().int().describe('events whose id the log already holds (a retried batch)'),
  rejected: z.array(
    z.object({
      index: z.number().int(),
      id: z.string().nullable(),
      code: z.string(),
      reason: z.string().describe('the first field at fault, relative to the event: `data.rules[0]: …`'),
      errors: z
        .array(z.object({ path: z.string(), message: z.string() }))
        .describe('every field at fault, named as a 400 names it: `body.events[3].decision`'),
    }),
  ),
});

export function toView(record: ChainedRecord): z.infer<typeof recordView> {
  return {
    id: record.id,
    seq: record.seq,
    type: record.type,
    recorded_at: record.recordedAt.toISOString(),
    occurred_at: record.occurredAt.toISOString(),
    source: record.source,
    actor: record.actor,
    principal: record.principal,
    execution_mode: record.executionMode,
    server: record.server,
    tool: record.tool,
    decision: record.decision,
    session: record.sessionId,
    workspace_id: record.workspaceId,
    organization_id: record.organizationId,
    chain_id: record.chainId,
    data: record.data,
    prev_hash: record.prevHash,
    hash: record.hash,
  };
}

export const CSV_COLUMNS = [
  'seq',
  'id',
  'type',
  'recorded_at',
  'occurred_at',
  'source',
  'actor',
  'principal',
  'execution_mode',
  'server',
  'tool',
  'decision',
  'session',
  'workspace_id',
  'data',
  'prev_hash',
  'hash',
] as const;

export function filtersOf(query: Omit<z.infer<typeof auditQuery>, 'cursor' | 'limit'>) {
  return {
    from: query.from ? new Date(query.from) : undefined,
    to: query.to ? new Date(query.to) : undefined,
    actor: query.actor,
    principal: query.principal,
    server: query.server,
    tool: query.tool,
    decisions: query.decision ? decisionsMatching(query.decision) : undefined,
    session: query.session,
    types: query.type,
    execution_mode: query.execution_mode,
  };
}
