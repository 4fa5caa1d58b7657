import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { ApprovalError, ApprovalRecord, ApprovalsService, redactArguments } from '@aileron/approvals';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import type { WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { databaseUnavailableReason } from '@aileron/database';
import { toolError } from '@aileron/errors';
import { PolicyService } from '@aileron/policy';
import { ExecutionJournal, ExecutionRecord } from './execution-journal';
import type { Instance } from './instances.service';
import { ToolPins } from './tool-pins.service';
import { jsonByteLength } from './proxy/json-size';
import type { CallContext, CallGate, ToolCall } from './proxy/proxy-session';
import type { Answer } from './proxy/upstream';

const PROGRESS_EVERY_MS = 5_000;
/** how soon a call held for approval looks again when the database was away */
const DATABASE_RETRY_MS = 1_000;

/**
 * What happens around a forwarded tool call: the compiled policy decides
 * (the same decision filters tools/list), `approval` goes through the
 * approvals domain, and every call that runs is journaled for the audit log.
 */
@Injectable()
export class PoolCalls implements CallGate {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly policies: PolicyService,
    private readonly approvals: ApprovalsService,
    private readonly journal: ExecutionJournal,
    private readonly pins: ToolPins,
  ) {}

  reaches(ctx: CallContext, server: string): boolean {
    return ctx.caller.session?.allowsServer(server) ?? true;
  }

  async listFilter(ctx: CallContext, server: string): Promise<(tool: string) => boolean> {
    const policy = await this.policies.current(scopeOf(ctx));
    const grant = ctx.caller.session;
    // a session token sees only the servers and tools its caveats leave it
    if (grant) return (tool) => grant.allowsTool(server, tool) && policy.compiled.listable({ server, tool, principal: ctx.principal, execution_mode: 'remote' });
    return (tool) => policy.compiled.listable({ server, tool, principal: ctx.principal, execution_mode: 'remote' });
  }

  observeTools(ctx: CallContext, server: string, version: string, tools: Record<string, unknown>[]): Promise<ReadonlySet<string>> {
    return this.pins.observe(scopeOf(ctx), ctx.requester, server, version, tools);
  }

  async authorize(
    ctx: CallContext,
    call: ToolCall,
    wait: { signal: AbortSignal; progress?: (message: string) => void },
  ): Promise<{ run: true; approvalId: string | null } | { run: false; result: Record<string, unknown> }> {
    const grant = ctx.caller.session;
    if (grant && !grant.caps.has('actions:run')) {
      return { run: false, result: toolError('CAPABILITY_REQUIRED', 'This session token may list tools but not call them (it lacks the "actions:run" capability)') };
    }
    if (grant && !grant.allowsTool(call.server, call.tool)) {
      return { run: false, result: toolError('CAPABILITY_REQUIRED', `This session token does not reach ${call.server}/${call.tool}`) };
    }
    const scope = scopeOf(ctx);
    const policy = this.policies.peek(scope) ?? (await this.policies.current(scope));
    const decision = policy.compiled.evaluate({ server: call.server, tool: call.tool, arguments: call.arguments, principal: ctx.principal, execution_mode: 'remote' });
    if (await this.pins.blocked(scope, call.server, call.tool)) {
      return { run: false, result: toolError('TOOL_DEFINITION_CHANGED', `The definition of ${call.server}/${call.tool} changed since it was accepted; an admin must accept the new definition before it runs.`) };
    }
    if (decision.decision === 'allow') return { run: true, approvalId: null };
    if (decision.decision === 'deny') {
      this.record(ctx, call, 'execution.failed', 'deny', { rules: decision.rules, error: 'denied by policy', policy_version: policy.version });
      return { run: false, result: toolError('POLICY_DENIED', `Denied by policy (rule ${decision.rules.join(', ') || 'default'}, policy version ${policy.version})`, { rules: decision.rules }) };
    }
    return this.throughApproval(ctx, scope, call, wait);
  }

  started(ctx: CallContext, call: ToolCall, instance: Instance, approvalId: string | null): (answer: Answer) => void {
    const startedAt = performance.now();
    const base = { instance: instance.id, version: instance.version, ...(approvalId ? { approval_id: approvalId } : {}) };
    const executionId = randomUUID();
    const policy = this.policies.peek(scopeOf(ctx));
    const args = redactArguments(call.arguments, policy?.document.redact ?? []);
    this.record(ctx, call, 'execution.started', approvalId ? 'approved' : 'allow', { ...base, execution_id: executionId, arguments: args });
    return (answer) => {
      const latency = Math.round((performance.now() - startedAt) * 1000) / 1000;
      if ('error' in answer) {
        this.record(ctx, call, 'execution.failed', approvalId ? 'approved' : 'allow', { ...base, execution_id: executionId, latency_ms: latency, error: answer.error.message });
      } else {
        const size = jsonByteLength(answer.result);
        const failed = answer.result.isError === true;
        this.record(ctx, call, failed ? 'execution.failed' : 'execution.succeeded', approvalId ? 'approved' : 'allow', {
          ...base,
          execution_id: executionId,
          latency_ms: latency,
          result_bytes: size,
          ...(failed ? { error: 'the tool reported an error' } : {}),
        });
      }
    };
  }

  /**
   * A retry of an approved call uses its approval; otherwise a request is made
   * (or the pending one for the same call reused) and the call waits for the
   * decision as long as the workspace allows, telling the client it waits.
   */
  private async throughApproval(
    ctx: CallContext,
    scope: WorkspaceScope,
    call: ToolCall,
    wait: { signal: AbortSignal; progress?: (message: string) => void },
  ): Promise<{ run: true; approvalId: string } | { run: false; result: Record<string, unknown> }> {
    // an agent's retry may come on a new MCP session: its agent session is what binds the approval
    const exact = { server: call.server, tool: call.tool, arguments: call.arguments, requester: ctx.requester, session: ctx.agentSessionId ?? ctx.sessionId };
    let request: ApprovalRecord | null = await this.approvals.forCall(scope, exact, ctx.gatewayId);
    if (!request) {
      const asked = { ...exact, agentSession: ctx.agentSessionId, executionMode: 'remote' as const, roles: ctx.principal.roles ?? [], groups: ctx.principal.groups ?? [] };
      request = await this.approvals.request(scope, ctx.requester, asked, ctx.gatewayId);
    }
    const deadline = Date.now() + this.config.pool.approvalWaitSeconds * 1000;
    while (request.status === 'pending' && Date.now() < deadline && !wait.signal.aborted) {
      wait.progress?.(`Waiting for approval ${request.id}: ${this.approvals.reviewUrl(request.id)}`);
      const seconds = Math.max(1, Math.min(PROGRESS_EVERY_MS, deadline - Date.now()) / 1000);
      try {
        request = await this.approvals.wait(ctx.caller, request.id, seconds);
      } catch (error) {
        // the approver cannot decide while the database is away either: the call keeps waiting, as the client was told
        if (!databaseUnavailableReason(error)) throw error;
        wait.progress?.(`Waiting for approval ${request.id}: the control plane's database cannot be reached right now; still waiting`);
        // the client going away ends the pause (and the loop) at once
        await sleep(Math.min(DATABASE_RETRY_MS, Math.max(0, deadline - Date.now())), undefined, { signal: wait.signal }).catch(() => undefined);
      }
    }
    const reviewUrl = this.approvals.reviewUrl(request.id);
    if (request.status === 'approved') {
      try {
        await this.approvals.consume(scope, ctx.requester, request.id, exact, ctx.gatewayId);
        return { run: true, approvalId: request.id };
      } catch (error) {
        // a racing call with the same arguments used it first
        if (!(error instanceof ApprovalError)) throw error;
        return { run: false, result: toolError('APPROVAL_NOT_USABLE', `Approval ${request.id} was already used: ${error.message}`, { approval_id: request.id }) };
      }
    }
    if (request.status === 'pending') {
      return {
        run: false,
        result: toolError('APPROVAL_PENDING', `This call needs approval. Approval ${request.id} is pending: ${reviewUrl}. Call again with the same arguments once it is approved.`, {
          approval_id: request.id,
          review_url: reviewUrl,
        }),
      };
    }
    return {
      run: false,
      result: toolError(`APPROVAL_${request.status.toUpperCase()}`, `Approval ${request.id} was ${request.status}${request.decisionReason ? `: ${request.decisionReason}` : ''}`, { approval_id: request.id }),
    };
  }

  private record(ctx: CallContext, call: ToolCall, type: ExecutionRecord['type'], decision: string, data: Record<string, unknown>): void {
    this.journal.append({
      id: randomUUID(),
      type,
      time: new Date().toISOString(),
      organizationId: ctx.organizationId,
      workspaceId: ctx.workspaceId,
      workspaceSlug: ctx.workspaceSlug,
      // `session` is the agent session where a caveat token made the call, else the MCP session; `mcp_session` always the latter
      sessionId: ctx.agentSessionId ?? ctx.sessionId,
      actor: ctx.requester,
      server: call.server,
      tool: call.tool,
      decision,
      data: { ...data, mcp_session: ctx.sessionId },
    });
  }
}

function scopeOf(ctx: CallContext): WorkspaceScope {
  return SystemScopes.workspace(ctx.organizationId, { id: ctx.workspaceId, slug: ctx.workspaceSlug });
}
