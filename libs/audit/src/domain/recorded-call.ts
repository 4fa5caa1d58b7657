import type { ChainedRecord } from './chain';

/**
 * The tool calls a workspace's audit chain holds, one record per call: the
 * record written where the policy's decision was taken. The overview counts
 * them and a policy replay decides them again, so both read the same records.
 *
 * - the pool: `execution.started` with decision `allow` (a call that ran
 *   without asking) and `execution.failed` with decision `deny` (a call the
 *   policy refused). An approved call's `execution.started` says `approved`:
 *   that call is already counted by its request, below;
 * - gateways: each local call's record with decision `allow` or `deny`,
 *   except `execution.started` (a gateway that reports the start and the end
 *   of a call would count twice). A gateway asks the control plane for
 *   approvals, so those are requests too;
 * - `approval.requested`: a call the policy sent to approval, whether it was
 *   decided or ran later. Requests a sandbox's shell rule asked for (their
 *   rule is `shell:…`, a name no policy rule may take) are not policy decisions and are left out.
 *
 * The repository's SQL (`CALL_RECORD`) selects exactly these.
 */
export type RecordedDecision = 'allow' | 'deny' | 'approval';

/** The columns of a call record the replay reads. */
export type CallRecordRow = Pick<
  ChainedRecord,
  | 'seq'
  | 'id'
  | 'type'
  | 'occurredAt'
  | 'source'
  | 'actor'
  | 'principal'
  | 'executionMode'
  | 'server'
  | 'tool'
  | 'decision'
  | 'sessionId'
  | 'data'
>;

/** A recorded call as the policy saw it, as far as the record tells. */
export interface RecordedCall {
  id: string;
  seq: number;
  occurredAt: Date;
  server: string;
  tool: string;
  /** as recorded: after the policy's `redact` paths and credential-like values were hidden */
  arguments: Record<string, unknown>;
  executionMode: 'local' | 'remote' | null;
  actor: string | null;
  /** who made the call, as the policy matched it; roles and groups are not recorded */
  principal: { user?: string; gateway?: string; session?: string };
  session: string | null;
  decision: RecordedDecision;
  /** the rules that decided, where the record names them */
  rules: string[];
  policyVersion: number | null;
}

/** Calls per bucket of time, as the repository counts them. */
export interface CallCounts {
  /** the bucket's start, in ms since the epoch */
  start: number;
  calls: number;
  denied: number;
  approval: number;
}

const GATEWAY_PREFIX = 'gateway:';

/** The call a record holds; null for a record without a server and a tool (it is not a call). */
export function recordedCallOf(row: CallRecordRow): RecordedCall | null {
  const data = row.data;
  const requested = row.type === 'approval.requested';
  const server = requested ? text(data.server) : row.server;
  const tool = requested ? text(data.tool) : row.tool;
  if (!server || !tool) return null;
  // the pool names the caller in `actor` (an approval request, in `requester`); a gateway in `principal`, itself in `actor`
  const who = requested ? text(data.requester) : row.source === 'gateway' ? row.principal : row.actor;
  const gateway = [who, row.actor].find((a) => a?.startsWith(GATEWAY_PREFIX))?.slice(GATEWAY_PREFIX.length);
  const session = requested ? text(data.session) : row.sessionId;
  const principal: RecordedCall['principal'] = {
    ...(who && !who.startsWith(GATEWAY_PREFIX) ? { user: who } : {}),
    ...(gateway ? { gateway } : {}),
    // the pool decides without a session (its principal has none); a gateway names the session of its calls
    ...(row.source === 'gateway' && session ? { session } : {}),
  };
  const mode = requested ? data.execution_mode : row.executionMode;
  return {
    id: row.id,
    seq: row.seq,
    occurredAt: row.occurredAt,
    server,
    tool,
    arguments: isObject(data.arguments) ? data.arguments : {},
    executionMode: mode === 'local' || mode === 'remote' ? mode : null,
    actor: row.actor,
    principal,
    session: session ?? null,
    decision: requested ? 'approval' : row.decision === 'deny' ? 'deny' : 'allow',
    rules: Array.isArray(data.rules)
      ? data.rules.filter((r): r is string => typeof r === 'string')
      : typeof data.rule === 'string'
        ? [data.rule]
        : [],
    policyVersion: typeof data.policy_version === 'number' ? data.policy_version : null,
  };
}

function text(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
