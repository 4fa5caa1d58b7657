import { z } from 'zod';
import type { ChainedRecord } from './chain';

/**
 * The one shape of an execution record (ADR-0001, "Audit schema
 * consistency"): a tool call the pool ran (remote) and one a gateway reports
 * (local) are written through this schema, so dashboards, exports, the
 * policy replay and event subscribers read both without asking where the call
 * ran; `execution_mode` tells them apart for filtering only.
 *
 * The pool's names won over the gateways' older ones because they say more:
 * `approved` (a person let the call through; `approval` is the policy's
 * verdict, not what happened), `rules` (a decision can take several rules)
 * and `result_bytes` (the unit in the name, like `latency_ms`). A gateway
 * may still send the old names: `gatewayExecution` maps them.
 */
export const EXECUTION_TYPES = ['execution.started', 'execution.succeeded', 'execution.failed'] as const;
export type ExecutionType = (typeof EXECUTION_TYPES)[number];

/** What let the call run, or stopped it: the policy allowed it, a person approved it, the policy denied it. */
export const EXECUTION_DECISIONS = ['allow', 'approved', 'deny'] as const;
export type ExecutionDecision = (typeof EXECUTION_DECISIONS)[number];

/** The longest name an execution record holds (server, tool, principal, ids): a tool call naming a longer one is refused. */
export const EXECUTION_NAME_MAX = 256;
/** The longest error text an execution record holds; a longer one is clipped when recorded (`clippedError`). */
export const EXECUTION_ERROR_MAX = 2048;
/**
 * How deep a record's data may nest (objects and arrays). The chain's
 * canonical form, the checks that make text storable and PostgreSQL's `jsonb`
 * walk it by recursion: a few thousand levels overflow one of them, and a
 * record that cannot be written fails its whole batch, every workspace's.
 */
export const RECORD_DEPTH_MAX = 64;

/** Whether a JSON value nests deeper than `max`, found without recursion (the value is a caller's). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [item, depth] = next;
    if (typeof item !== 'object' || item === null) continue;
    if (depth > max) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * A call's arguments as an API takes them (a gateway's approval request, its
 * use): an object nested no deeper than the record of the call holds them, one
 * level down in its data. Checked without recursion, before anything walks
 * them (the approval's redaction and digest, the chain, `jsonb`).
 */
export const callArgumentsSchema = z
  .record(z.string(), z.unknown())
  .refine((args) => !nestsDeeperThan(args, RECORD_DEPTH_MAX - 1), `nests deeper than ${RECORD_DEPTH_MAX - 1} levels`);

const short = z.string().min(1).max(EXECUTION_NAME_MAX);
/** a column every execution record has: a gateway that leaves it out is told so, not that `undefined` is no string */
const column = z
  .string({ error: (issue) => (issue.input === undefined ? 'required in an execution record' : undefined) })
  .min(1)
  .max(EXECUTION_NAME_MAX);

/** The fields of an execution's data, one definition for both writers and for the gateway's top-level copies. */
export const executionFields = {
  execution_id: short.describe("one call's id: its `execution.started` and its end share it"),
  // an object is all JSON can send here (its keys are strings); checked without walking it, as the pool writes one per call
  arguments: z
    .custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), {
      error: 'must be an object',
    })
    .describe('as the policy saw them, after its `redact` paths'),
  rules: z.array(short).max(100).describe('the policy rules that decided (empty: its default did)'),
  policy_version: z.number().int().nonnegative(),
  approval_id: short,
  latency_ms: z.number().nonnegative().max(86_400_000),
  result_bytes: z.number().int().nonnegative(),
  error: z.string().max(EXECUTION_ERROR_MAX),
  version: short.describe('the catalog version of the server that ran the call'),
  /** the pool instance that ran a remote call */
  instance: short,
  /** the MCP session a remote call came in on (`session` may name the agent session instead) */
  mcp_session: short,
};

const f = executionFields;

/**
 * An execution record's `data`. Unknown keys are kept (a gateway may add its
 * own), the known ones must have their type.
 */
export const executionDataSchema = z.looseObject({
  execution_id: f.execution_id,
  arguments: f.arguments.optional(),
  rules: f.rules.optional(),
  policy_version: f.policy_version.optional(),
  approval_id: f.approval_id.optional(),
  latency_ms: f.latency_ms.optional(),
  result_bytes: f.result_bytes.optional(),
  error: f.error.optional(),
  version: f.version.optional(),
  instance: f.instance.optional(),
  mcp_session: f.mcp_session.optional(),
});

/** An execution record: the columns every call has, and its data. */
export const executionRecordSchema = z
  .object({
    type: z.enum(EXECUTION_TYPES, { error: `an execution record is one of ${EXECUTION_TYPES.join(', ')}` }),
    execution_mode: z.enum(['local', 'remote']),
    server: column,
    tool: column,
    decision: z.enum(EXECUTION_DECISIONS, {
      error: `an execution record's decision is one of ${EXECUTION_DECISIONS.join(', ')}`,
    }),
    /** on whose behalf the call ran */
    principal: column,
    session: short.nullable(),
    data: executionDataSchema,
  })
  .strict();

export type ExecutionRecord = z.output<typeof executionRecordSchema>;

/** A record the pool writes; throws if it is not of the one shape (a defect, never the caller's input). */
export function executionRecord(input: z.input<typeof executionRecordSchema>): ExecutionRecord {
  return executionRecordSchema.parse(input);
}

/** An error text as a record holds it: an upstream's may be of any length, the record's is bounded. */
export function clippedError(text: string): string {
  if (text.length <= EXECUTION_ERROR_MAX) return text;
  let end = EXECUTION_ERROR_MAX - 1;
  // never half a surrogate pair: stored, a lone one would read as U+FFFD
  if (/[\uD800-\uDBFF]/.test(text[end - 1]!)) end -= 1;
  return `${text.slice(0, end)}…`;
}

export function isExecutionType(type: string): type is ExecutionType {
  return (EXECUTION_TYPES as readonly string[]).includes(type);
}

/**
 * The execution record a gateway reports, under the current names. Older
 * gateways' names are read as the current ones: `decision: approval` as
 * `approved`, `rule` as `rules: [rule]`, `result_size` as `result_bytes`, the
 * type `execution.denied` as `execution.failed` (its decision `deny`). A
 * record without `execution_id` is a call reported once: its own id is the
 * execution's.
 */
export function gatewayExecution(
  event: { id: string; type: string; decision?: string | undefined; principal?: string | undefined },
  columns: { execution_mode: string; server: string | null; tool: string | null; session: string | null },
  data: Record<string, unknown>,
  gatewayActor: string,
): z.ZodSafeParseResult<ExecutionRecord> {
  const type = event.type === LEGACY_DENIED ? 'execution.failed' : event.type;
  const decision =
    event.decision === 'approval'
      ? 'approved'
      : (event.decision ?? (event.type === LEGACY_DENIED ? 'deny' : undefined));
  const { rule, result_size, ...rest } = data;
  const current: Record<string, unknown> = { execution_id: event.id, ...rest };
  if (rule !== undefined) {
    const rules = Array.isArray(rest.rules) ? rest.rules : [];
    current.rules = rules.includes(rule) ? rules : [rule, ...rules];
  }
  if (result_size !== undefined && rest.result_bytes === undefined) current.result_bytes = result_size;
  return executionRecordSchema.safeParse({
    type,
    execution_mode: columns.execution_mode,
    server: columns.server ?? undefined,
    tool: columns.tool ?? undefined,
    decision,
    // a gateway that names nobody ran the call for itself
    principal: event.principal ?? gatewayActor,
    session: columns.session,
    data: current,
  });
}

/** What older gateways call a denied call's record. */
export const LEGACY_DENIED = 'execution.denied';

/**
 * The decisions a search for `decision` finds: an execution that ran after an
 * approval is `approved`, and records ingested before the names were one say
 * `approval` (their hash covers what they say, so they are read, not rewritten).
 */
export function decisionsMatching(decision: string): string[] {
  return decision === 'approved' || decision === 'approval' ? ['approved', 'approval'] : [decision];
}

/**
 * The event an execution record is announced as (webhooks, the live stream),
 * the same for both writers. The record's own fields come last: a gateway's
 * own `data` keys cannot stand in for the workspace, the session or the call.
 */
export function executionEventPayload(
  record: ExecutionRecord,
  context: { workspace: string; actor: string; occurredAt: Date },
): Record<string, unknown> {
  return {
    ...record.data,
    workspace: context.workspace,
    session: record.session,
    execution_mode: record.execution_mode,
    execution_id: record.data.execution_id,
    server: record.server,
    tool: record.tool,
    decision: record.decision,
    principal: record.principal,
    occurred_at: context.occurredAt.toISOString(),
    actor: context.actor,
  };
}

/**
 * An execution's event as an outbox record (`envelope`, with its topic and
 * tenant) announcing its audit record `recordId` of the same transaction: the
 * whole payload for those who hear it at once (webhooks, the live stream), and
 * for the table only the reference and what the record does not hold, the
 * workspace's slug at the time. The call is stored once; `executionEventOf`
 * rebuilds the payload from the record.
 *
 * The payload is built when first read: most of the pool's batches have no one
 * to hear them (no endpoint, no live stream open), and building every call's
 * two was a twentieth of the batch. Copying the record with a spread reads it.
 */
export function announcedExecution<E extends object>(
  envelope: E,
  record: ExecutionRecord,
  context: { workspace: string; actor: string; occurredAt: Date },
  recordId: string,
): E & { payload: Record<string, unknown>; fromAuditRecord: { id: string; rest: Record<string, unknown> } } {
  let payload: Record<string, unknown> | undefined;
  const announced = { ...envelope, fromAuditRecord: { id: recordId, rest: { workspace: context.workspace } } };
  Object.defineProperty(announced, 'payload', {
    get: () => (payload ??= executionEventPayload(record, context)),
    enumerable: true,
  });
  return announced as E & {
    payload: Record<string, unknown>;
    fromAuditRecord: { id: string; rest: Record<string, unknown> };
  };
}

/** The payload `announcedExecution` gave its event, from the audit record as stored and the rest its event row kept. */
export function executionEventOf(
  stored: Pick<
    ChainedRecord,
    | 'type'
    | 'executionMode'
    | 'server'
    | 'tool'
    | 'decision'
    | 'principal'
    | 'sessionId'
    | 'data'
    | 'actor'
    | 'occurredAt'
  >,
  rest: Record<string, unknown>,
): Record<string, unknown> {
  return executionEventPayload(
    {
      // written through the schema by the one writer that announces records so
      type: stored.type as ExecutionType,
      execution_mode: stored.executionMode as ExecutionRecord['execution_mode'],
      server: stored.server!,
      tool: stored.tool!,
      decision: stored.decision as ExecutionDecision,
      principal: stored.principal!,
      session: stored.sessionId,
      data: stored.data as ExecutionRecord['data'],
    },
    { workspace: String(rest.workspace), actor: stored.actor!, occurredAt: stored.occurredAt },
  );
}
