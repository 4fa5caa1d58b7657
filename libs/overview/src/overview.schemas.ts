import { z } from 'zod';
import { slug } from '@aileron/auth';
import { OVERVIEW_WINDOWS } from './domain/overview-window';

export const wsParams = z.object({ ws: slug });
export const overviewQuery = z.object({
  window: z
    .enum(Object.keys(OVERVIEW_WINDOWS) as ['1h', '1d'])
    .default('1h')
    .describe('`1h`: the last hour by minute; `1d`: the last day by hour'),
});

const counts = {
  calls: z.number().int().describe('tool calls decided (allowed, denied or sent to approval)'),
  allowed: z.number().int(),
  denied: z.number().int().describe('calls the policy refused'),
  approval: z.number().int().describe('calls the policy sent to approval'),
};

export const overviewView = z.object({
  window: z.enum(['1h', '1d']),
  from: z.string().describe('the first bucket starts here'),
  to: z.string().describe('the last bucket ends here: the current minute or hour, still filling'),
  bucket_seconds: z.number().int(),
  buckets: z.array(z.object({ start: z.string(), ...counts })).describe('every bucket of the window, oldest first'),
  totals: z.object(counts),
  approvals_waiting: z.number().int().describe('approval requests pending now'),
  pool: z.object({
    instances: z
      .array(
        z.object({
          server: z.string(),
          version: z.string().nullable(),
          id: z.string().nullable(),
          state: z
            .enum(['running', 'suspected', 'starting', 'crashed'])
            .describe(
              '`suspected`: a session saw its connection break, the next use checks it; `crashed`: ended unexpectedly or failed to start, restarted on the next use',
            ),
          crashes: z.number().int().describe('since it last ran stably'),
          last_crash_at: z.string().nullable(),
          inflight: z.number().int(),
          sessions: z.number().int(),
        }),
      )
      .describe('on the replica that answers, by server'),
  }),
  gateways: z.object({
    enrolled: z.number().int().describe('gateways not revoked'),
    seen_in_window: z.number().int().describe('of those, seen since `from`'),
    recent: z
      .array(
        z.object({ id: z.string(), name: z.string(), last_seen_at: z.string().nullable(), enrolled_at: z.string() }),
      )
      .describe('the ten seen most recently'),
  }),
});
