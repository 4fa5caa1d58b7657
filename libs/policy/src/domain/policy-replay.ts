import type { RecordedCall } from '@aileron/audit';
import type { CompiledPolicy, PolicyCall, PolicyDecision } from './policy-decision';

/** How far back a replay may reach: a bounded read of the audit log, whatever the workspace's traffic. */
export const REPLAY_MAX_DAYS = 30;
/** Recorded calls one replay request decides again at most; a cursor continues after them. */
export const REPLAY_SCAN_LIMIT = 2_000;

/** A recorded call the draft decides otherwise than the policy did then. */
export interface ReplayDifference {
  call: RecordedCall;
  draft: PolicyDecision;
}

/**
 * The call as the policy was asked then, as far as the record tells (roles and
 * groups are not recorded), with its server's tool prefix as the catalog has it now.
 */
export function policyCallOf(recorded: RecordedCall, toolPrefixes?: ReadonlyMap<string, string>): PolicyCall {
  const prefix = toolPrefixes?.get(recorded.server);
  return {
    server: recorded.server,
    tool: recorded.tool,
    ...(prefix !== undefined ? { tool_prefix: prefix } : {}),
    arguments: recorded.arguments,
    principal: recorded.principal,
    ...(recorded.executionMode ? { execution_mode: recorded.executionMode } : {}),
  };
}

/**
 * The draft's decision for each recorded call whose effect differs from the
 * recorded one (allow → deny, deny → approval, …). The same effect by another
 * rule or route is no difference: the call would fare the same.
 */
export function replayCalls(
  draft: CompiledPolicy,
  calls: readonly RecordedCall[],
  toolPrefixes?: ReadonlyMap<string, string>,
): ReplayDifference[] {
  const differences: ReplayDifference[] = [];
  for (const call of calls) {
    const decision = draft.evaluate(policyCallOf(call, toolPrefixes));
    if (decision.decision !== call.decision) differences.push({ call, draft: decision });
  }
  return differences;
}
