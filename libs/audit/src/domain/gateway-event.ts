import { z } from 'zod';
import { formatPath, PathIssue } from '@aileron/errors';
import {
  ExecutionRecord,
  executionFields,
  gatewayExecution,
  isExecutionType,
  LEGACY_DENIED,
  nestsDeeperThan,
  RECORD_DEPTH_MAX,
} from './execution-record';

/** At most this many events in one ingest batch. */
export const MAX_BATCH = 1000;
const MAX_EVENT_BYTES = 32 * 1024;
/** a gateway clock this far ahead of ours is wrong, not early */
const MAX_CLOCK_SKEW_MS = 24 * 3600_000;

const short = z.string().min(1).max(256);

/**
 * One audit event as a gateway sends it. The gateway's timestamp is kept as
 * `occurred_at`; the chain orders by arrival.
 */
export const gatewayEventSchema = z
  .object({
    // PostgreSQL stores a uuid in lower case: hashing it as sent would not verify, nor match on a retry
    id: z
      .uuid({ error: 'must be a UUID (the event id makes retried batches idempotent)' })
      .transform((id) => id.toLowerCase()),
    type: z
      .string()
      .max(64)
      .regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_-]*)+$/, 'must look like `domain.event`, e.g. `execution.succeeded`'),
    time: z.iso.datetime({ offset: true, error: 'must be an ISO-8601 date-time with a time zone' }),
    execution_mode: z.enum(['local', 'remote']).default('local'),
    principal: short.optional(),
    server: short.optional(),
    tool: short.optional(),
    // `approval` is an older gateway's name for `approved` (execution-record.ts)
    decision: z.enum(['allow', 'deny', 'approved', 'approval']).optional(),
    session: short.optional(),
    execution_id: executionFields.execution_id.optional(),
    rules: executionFields.rules.optional(),
    /** an older gateway's one rule: read as `rules: [rule]` */
    rule: short.optional(),
    policy_version: executionFields.policy_version.optional(),
    approval_id: executionFields.approval_id.optional(),
    latency_ms: executionFields.latency_ms.optional(),
    result_bytes: executionFields.result_bytes.optional(),
    /** an older gateway's name for `result_bytes` */
    result_size: executionFields.result_bytes.optional(),
    error: executionFields.error.optional(),
    /** arguments as the gateway redacted them */
    arguments: executionFields.arguments.optional(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

type GatewayEventInput = z.infer<typeof gatewayEventSchema>;

/** The fields of an event besides its columns: they go into the record's `data`. */
const DATA_FIELDS = [
  'execution_id',
  'rules',
  'rule',
  'policy_version',
  'approval_id',
  'latency_ms',
  'result_bytes',
  'result_size',
  'error',
  'arguments',
] as const;

/** An event as it is recorded: its columns, and everything else in `data`. */
export interface GatewayEvent {
  id: string;
  type: string;
  time: string;
  execution_mode: 'local' | 'remote';
  principal: string | null;
  server: string | null;
  tool: string | null;
  decision: string | null;
  session: string | null;
  data: Record<string, unknown>;
  /** set for a tool call's record (`execution.*`): the one shape it was checked against, announced as its event */
  execution: ExecutionRecord | null;
}

export type EventCheck =
  | { ok: true; event: GatewayEvent }
  | { ok: false; code: string; reason: string; issues: readonly PathIssue[] };

/**
 * Validates one event as of `now` (ms); a bad one is rejected alone, with a
 * reason, and the rest of its batch is kept. `gateway` is the actor the
 * gateway is recorded as.
 */
export function checkGatewayEvent(raw: unknown, now: number, gateway: string): EventCheck {
  const parsed = gatewayEventSchema.safeParse(raw);
  if (!parsed.success) return invalid(parsed.error.issues);
  // before anything walks it: serialising or hashing a few thousand levels overflows the stack
  if (nestsDeeperThan(parsed.data.data, RECORD_DEPTH_MAX))
    return invalid([{ path: ['data'], message: `nests deeper than ${RECORD_DEPTH_MAX} levels` }]);
  const text = JSON.stringify(parsed.data);
  if (Buffer.byteLength(text) > MAX_EVENT_BYTES)
    return invalid([{ path: [], message: `the event is over ${MAX_EVENT_BYTES} bytes` }], 'EVENT_TOO_LARGE');
  // PostgreSQL text and jsonb cannot hold NUL; refuse it here rather than fail the batch
  if (text.includes('\\u0000')) return invalid([{ path: [], message: 'strings may not contain NUL (\\u0000)' }]);
  // nor a lone surrogate: a text column stores it as U+FFFD (the record no longer matches its hash), jsonb fails the batch
  if (ESCAPED_SURROGATE.test(text) && hasLoneSurrogate(parsed.data)) {
    return invalid([{ path: [], message: 'strings must be well-formed Unicode (no lone surrogates)' }]);
  }
  const time = Date.parse(parsed.data.time);
  if (time > now + MAX_CLOCK_SKEW_MS) return invalid([{ path: ['time'], message: 'more than a day in the future' }]);
  if (time < Date.UTC(2000, 0, 1)) return invalid([{ path: ['time'], message: 'before the year 2000' }]);
  return recorded(parsed.data, gateway);
}

/** The event's columns and data; a tool call's record also checked against (and mapped to) the one execution shape. */
function recorded(event: GatewayEventInput, gateway: string): EventCheck {
  const data: Record<string, unknown> = { ...(event.data ?? {}) };
  for (const key of DATA_FIELDS) if (event[key] !== undefined) data[key] = event[key];
  const columns = {
    execution_mode: event.execution_mode,
    server: event.server ?? null,
    tool: event.tool ?? null,
    session: event.session ?? null,
  };
  if (!event.type.startsWith('execution.'))
    return {
      ok: true,
      event: {
        id: event.id,
        type: event.type,
        time: event.time,
        ...columns,
        principal: event.principal ?? null,
        decision: event.decision ?? null,
        data,
        execution: null,
      },
    };
  if (!isExecutionType(event.type) && event.type !== LEGACY_DENIED)
    return invalid([
      {
        path: ['type'],
        message: `an execution record is execution.started, execution.succeeded or execution.failed (${LEGACY_DENIED} is read as execution.failed)`,
      },
    ]);
  const checked = gatewayExecution(event, columns, data, gateway);
  if (!checked.success) return invalid(checked.error.issues);
  const execution = checked.data;
  return {
    ok: true,
    event: {
      id: event.id,
      type: execution.type,
      time: event.time,
      execution_mode: execution.execution_mode,
      server: execution.server,
      tool: execution.tool,
      principal: execution.principal,
      decision: execution.decision,
      session: execution.session,
      data: execution.data,
      execution,
    },
  };
}

/** Relative to the event: the rejection names the event by its index in the batch, and lists every field at fault. */
function invalid(issues: readonly PathIssue[], code = 'EVENT_INVALID'): EventCheck {
  const first = issues[0]!;
  const path = formatPath(first.path);
  return { ok: false, code, reason: path ? `${path}: ${first.message}` : first.message, issues };
}

/** JSON.stringify writes a lone surrogate, and only a lone one, as a `\ud800`-style escape: a cheap first look. */
const ESCAPED_SURROGATE = /\\ud[89a-f]/i;
const LONE_SURROGATE = /\p{Cs}/u;

function hasLoneSurrogate(value: unknown): boolean {
  if (typeof value === 'string') return LONE_SURROGATE.test(value);
  if (Array.isArray(value)) return value.some(hasLoneSurrogate);
  if (value !== null && typeof value === 'object')
    return Object.entries(value).some(([key, item]) => LONE_SURROGATE.test(key) || hasLoneSurrogate(item));
  return false;
}
