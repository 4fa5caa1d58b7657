import { z } from 'zod';
import { formatPath } from '@aileron/errors';

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
    decision: z.enum(['allow', 'deny', 'approval']).optional(),
    rule: short.optional(),
    session: short.optional(),
    approval_id: short.optional(),
    latency_ms: z.number().nonnegative().max(86_400_000).optional(),
    result_size: z.number().int().nonnegative().optional(),
    error: z.string().max(2048).optional(),
    /** arguments as the gateway redacted them */
    arguments: z.record(z.string(), z.unknown()).optional(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

export type GatewayEvent = z.infer<typeof gatewayEventSchema>;

export type EventCheck = { ok: true; event: GatewayEvent } | { ok: false; code: string; reason: string };

/** Validates one event as of `now` (ms); a bad one is rejected alone, with a reason, and the rest of its batch is kept. */
export function checkGatewayEvent(raw: unknown, now: number): EventCheck {
  const parsed = gatewayEventSchema.safeParse(raw);
  if (!parsed.success) {
    // relative to the event: the rejection names the event by its index in the batch
    const issue = parsed.error.issues[0]!;
    const path = formatPath(issue.path);
    return { ok: false, code: 'EVENT_INVALID', reason: `${path || '(event)'}: ${issue.message}` };
  }
  const text = JSON.stringify(parsed.data);
  if (Buffer.byteLength(text) > MAX_EVENT_BYTES)
    return { ok: false, code: 'EVENT_TOO_LARGE', reason: `the event is over ${MAX_EVENT_BYTES} bytes` };
  // PostgreSQL text and jsonb cannot hold NUL; refuse it here rather than fail the batch
  if (text.includes('\\u0000'))
    return { ok: false, code: 'EVENT_INVALID', reason: 'strings may not contain NUL (\\u0000)' };
  // nor a lone surrogate: a text column stores it as U+FFFD (the record no longer matches its hash), jsonb fails the batch
  if (ESCAPED_SURROGATE.test(text) && hasLoneSurrogate(parsed.data)) {
    return { ok: false, code: 'EVENT_INVALID', reason: 'strings must be well-formed Unicode (no lone surrogates)' };
  }
  const time = Date.parse(parsed.data.time);
  if (time > now + MAX_CLOCK_SKEW_MS)
    return { ok: false, code: 'EVENT_INVALID', reason: 'time: more than a day in the future' };
  if (time < Date.UTC(2000, 0, 1)) return { ok: false, code: 'EVENT_INVALID', reason: 'time: before the year 2000' };
  return { ok: true, event: parsed.data };
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
