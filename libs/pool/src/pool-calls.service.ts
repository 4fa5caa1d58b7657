import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ApprovalsService, redactArguments } from '@aileron/approvals';
import { clippedError, ExecutionDecision, ExecutionRecord, ExecutionType } from '@aileron/audit';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { CatalogService } from '@aileron/catalog';
import { Clock } from '@aileron/clock';
import type { WorkspaceScope } from '@aileron/auth';
import { toolError } from '@aileron/errors';
import { PolicyService } from '@aileron/policy';
import { ExecutionJournal } from './execution-journal';
import type { Instance } from './pool-instances.service';
import { ToolPins } from './tool-pins.service';
import { jsonByteLength } from './proxy/json-size';
import type { CallContext, CallGate, ToolCall } from './proxy/mcp-session';
import type { Answer } from './proxy/upstream';

/**
 * What happens around a forwarded tool call: the compiled policy decides
 * (the same decision filters tools/list), `approval` goes through the
 * approvals domain, and every call that runs is journaled for the audit log.
 */
@Injectable()
export class PoolCalls implements CallGate {
  /** what decided a call that may run, from `authorize` to its `started` record (the same call object) */
  private readonly decided = new WeakMap<ToolCall, { rules: string[]; policyVersion: number }>();

  constructor(
    private readonly policies: PolicyService,
    private readonly approvals: ApprovalsService,
    private readonly journal: ExecutionJournal,
    private readonly pins: ToolPins,
    private readonly clock: Clock,
    private readonly catalog: CatalogService,
  ) {}

  reaches(ctx: CallContext, server: string): boolean {
    return ctx.caller.agentSession?.allowsServer(server) ?? true;
  }

  async listFilter(ctx: CallContext, server: string): Promise<(tool: string) => boolean> {
    const [policy, prefixes] = await Promise.all([
      this.policies.current(scopeOf(ctx)),
      this.catalog.toolPrefixes(scopeOf(ctx)),
    ]);
    const grant = ctx.caller.agentSession;
    const named = {
      server,
      ...toolPrefix(prefixes, server),
      principal: ctx.principal,
      execution_mode: 'remote' as const,
    };
    // an agent session's caveat token sees only the servers and tools its caveats leave it
    if (grant) return (tool) => grant.allowsTool(server, tool) && policy.compiled.listable({ ...named, tool });
    return (tool) => policy.compiled.listable({ ...named, tool });
  }

  observeTools(
    ctx: CallContext,
    server: string,
    version: string,
    tools: Record<string, unknown>[],
  ): Promise<ReadonlySet<string>> {
    return this.pins.observe(scopeOf(ctx), ctx.requester, server, version, tools);
  }

  async authorize(
    ctx: CallContext,
    call: ToolCall,
    wait: { signal: AbortSignal; progress?: (message: string) => void },
  ): Promise<{ run: true; approvalId: string | null } | { run: false; result: Record<string, unknown> }> {
    const grant = ctx.caller.agentSession;
    if (grant && !grant.caps.has('actions:run')) {
      return {
        run: false,
        result: toolError(
          'CAPABILITY_REQUIRED',
          'This session token may list tools but not call them (it lacks the "actions:run" capability)',
        ),
      };
    }
    if (grant && !grant.allowsTool(call.server, call.tool)) {
      return {
        run: false,
        result: toolError('CAPABILITY_REQUIRED', `This session token does not reach ${call.server}/${call.tool}`),
      };
    }
    const scope = scopeOf(ctx);
    // what this replica holds is read without awaiting: every await here is a turn on each call's path
    const policy = this.policies.peek(scope) ?? (await this.policies.current(scope));
    const prefixes = this.catalog.peekToolPrefixes(scope) ?? (await this.catalog.toolPrefixes(scope));
    const decision = policy.compiled.evaluate({
      server: call.server,
      tool: call.tool,
      // whichever endpoint the call came through: a rule naming `<prefix>__<tool>` is not bypassed by `/mcp/{ws}/{server}`
      ...toolPrefix(prefixes, call.server),
      arguments: call.arguments,
      principal: ctx.principal,
      execution_mode: 'remote',
    });
    if (this.pins.blocked(scope, call.server, call.tool)) {
      return {
        run: false,
        result: toolError(
          'TOOL_DEFINITION_CHANGED',
          `The definition of ${call.server}/${call.tool} changed since it was accepted; an admin must accept the new definition before it runs.`,
        ),
      };
    }
    if (decision.decision === 'allow') {
      this.decided.set(call, { rules: decision.rules, policyVersion: policy.version });
      return { run: true, approvalId: null };
    }
    if (decision.decision === 'deny') {
      this.record(ctx, call, 'execution.failed', 'deny', {
        execution_id: randomUUID(),
        rules: decision.rules,
        // redacted as a call that runs is: a policy replay decides the call again from them
        arguments: redactArguments(call.arguments, policy.document.redact ?? []),
        error: 'denied by policy',
        policy_version: policy.version,
      });
      return {
        run: false,
        result: toolError(
          'POLICY_DENIED',
          `Denied by policy (rule ${decision.rules.join(', ') || 'default'}, policy version ${policy.version})`,
          { rules: decision.rules },
        ),
      };
    }
    return this.throughApproval(ctx, scope, call, wait);
  }

  started(ctx: CallContext, call: ToolCall, instance: Instance, approvalId: string | null): (answer: Answer) => void {
    const startedAt = performance.now();
    const executionId = randomUUID();
    const decision = approvalId ? 'approved' : 'allow';
    // Each record's data is a literal of its own, completed in place (`record`): the two records sit on the
    // call's path, where spreading a shared part into each, and copying each again, cost more than building them.
    const data = (): ExecutionRecord['data'] => {
      const fresh: ExecutionRecord['data'] = {
        execution_id: executionId,
        instance: instance.id,
        version: instance.version,
      };
      if (approvalId) fresh.approval_id = approvalId;
      return fresh;
    };
    const policy = this.policies.peek(scopeOf(ctx));
    const start = data();
    start.arguments = redactArguments(call.arguments, policy?.document.redact ?? []);
    const decided = this.decided.get(call);
    if (decided) {
      // the record of the decision names what decided, as a gateway's does
      start.rules = decided.rules;
      start.policy_version = decided.policyVersion;
    }
    this.record(ctx, call, 'execution.started', decision, start);
    return (answer) => {
      const end = data();
      end.latency_ms = Math.round((performance.now() - startedAt) * 1000) / 1000;
      if ('error' in answer) {
        end.error = clippedError(String(answer.error.message));
        this.record(ctx, call, 'execution.failed', decision, end);
        return;
      }
      end.result_bytes = jsonByteLength(answer.result);
      const failed = answer.result.isError === true;
      if (failed) end.error = 'the tool reported an error';
      this.record(ctx, call, failed ? 'execution.failed' : 'execution.succeeded', decision, end);
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
    const exact = {
      server: call.server,
      tool: call.tool,
      arguments: call.arguments,
      requester: ctx.requester,
      session: ctx.agentSessionId ?? ctx.mcpSessionId,
    };
    const asked = {
      ...exact,
      agentSession: ctx.agentSessionId,
      executionMode: 'remote' as const,
      roles: ctx.principal.roles ?? [],
      groups: ctx.principal.groups ?? [],
    };
    const held = await this.approvals.holdCall(
      scope,
      ctx.caller,
      { exact, gatewayId: ctx.gatewayId },
      () => this.approvals.request(scope, ctx.requester, asked, ctx.gatewayId),
      wait,
    );
    const { request } = held;
    switch (held.outcome) {
      case 'approved':
        this.decided.set(call, { rules: request.rules, policyVersion: request.policyVersion });
        return { run: true, approvalId: request.id };
      case 'not-usable':
        return {
          run: false,
          result: toolError('APPROVAL_NOT_USABLE', `Approval ${request.id} was already used: ${held.reason}`, {
            approval_id: request.id,
          }),
        };
      case 'pending':
        return {
          run: false,
          result: toolError(
            'APPROVAL_PENDING',
            `This call needs approval. Approval ${request.id} is pending: ${held.reviewUrl}. Call again with the same arguments once it is approved.`,
            {
              approval_id: request.id,
              review_url: held.reviewUrl,
            },
          ),
        };
      case 'refused':
        return {
          run: false,
          result: toolError(
            `APPROVAL_${request.status.toUpperCase()}`,
            `Approval ${request.id} was ${request.status}${request.decisionReason ? `: ${request.decisionReason}` : ''}`,
            { approval_id: request.id },
          ),
        };
    }
  }

  /**
   * Journals one record, of the one execution shape a gateway's local calls
   * are checked against (`ExecutionRecord`, the schema's type). It is built
   * here, not parsed: parsing each of a call's two records cost the control
   * plane's thread 3-4 % of its time under load (a `peers` profile), to check
   * what this typed code wrote. What comes from outside is bounded where it
   * enters: the tool's name at the call (`EXECUTION_NAME_MAX`), an upstream's
   * error text here (`clippedError`). pool.test.ts holds what the pool wrote
   * to the schema.
   */
  private record(
    ctx: CallContext,
    call: ToolCall,
    type: ExecutionType,
    decision: ExecutionDecision,
    data: ExecutionRecord['data'],
  ): void {
    // completed in place: the caller built it for this record alone
    data.mcp_session = ctx.mcpSessionId;
    // the person is the actor; the OAuth client they let act for them is named beside (its own claim)
    const oauthClient = ctx.caller.oauthClient;
    if (oauthClient) data.oauth_client = { id: oauthClient.clientId, name: oauthClient.clientName };
    this.journal.append({
      id: randomUUID(),
      type,
      time: this.clock.date().toISOString(),
      organizationId: ctx.organizationId,
      workspaceId: ctx.workspaceId,
      workspaceSlug: ctx.workspaceSlug,
      // `session` is the agent session where a caveat token made the call, else the MCP session; `mcp_session` always the latter
      sessionId: ctx.agentSessionId ?? ctx.mcpSessionId,
      actor: ctx.requester,
      server: call.server,
      tool: call.tool,
      decision,
      data,
    });
  }
}

/** The catalog tool prefix of the version the pool runs, as a PolicyCall names it. */
function toolPrefix(prefixes: ReadonlyMap<string, string>, server: string): { tool_prefix?: string } {
  const prefix = prefixes.get(server);
  return prefix === undefined ? {} : { tool_prefix: prefix };
}

function scopeOf(ctx: CallContext): WorkspaceScope {
  return SystemScopes.workspace(ctx.organizationId, { id: ctx.workspaceId, slug: ctx.workspaceSlug });
}
