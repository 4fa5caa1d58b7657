import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ApprovalsService, redactArguments } from '@aileron/approvals';
import { describePrincipal, Principal, WorkspaceScope } from '@aileron/auth';
import { DatabaseService } from '@aileron/database';
import { DomainError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { PolicyService } from '@aileron/policy';
import {
  analyzeCommand,
  decideCommand,
  parseCodexRules,
  programsToResolve,
  ShellRulesError,
  ShellSyntaxError,
  type CommandDecision,
  type ShellRule,
} from './domain/shell-rules';
import { sandboxSlug } from './domain/slug';
import type { ClientAsks, Elicit, HeldCall, OpenPage, ToolCaller } from './sandbox-tools';
import { SandboxesRepository, type SandboxRecord, type ShellRulesRecord } from './sandboxes.repository';
import { SandboxesService } from './sandboxes.service';

/** What `bash` answers instead of running a command: as a refused program would (exit code, a line on stderr). */
export interface ShellRefusal {
  stderr: string;
  exitCode: number;
}

/**
 * The workspace's shell rules, decided for each `bash` command before it
 * runs: every program the line could run is found (pipelines, substitutions,
 * wrappers such as `env` or `sudo`, `bash -c` strings) and resolved to its
 * full path inside the sandbox; the strictest rule wins. `forbidden` answers
 * exit code 1 and a line naming the rule; `prompt` asks a person through an
 * approval request for that exact command, which then runs once, or, where
 * the workspace allows it and the caller is a person at their own client,
 * asks them there (elicitation), their answer an audit record.
 */
@Injectable()
export class ShellRulesService {
  constructor(
    private readonly db: DatabaseService,
    private readonly repository: SandboxesRepository,
    private readonly sandboxes: SandboxesService,
    private readonly approvals: ApprovalsService,
    private readonly outbox: OutboxService,
    private readonly policies: PolicyService,
  ) {}

  async get(scope: WorkspaceScope): Promise<ShellRulesRecord> {
    return (
      (await this.repository.shellRules(scope)) ?? {
        rules: [],
        elicitation: false,
        version: 0,
        updatedBy: null,
        updatedAt: new Date(0),
      }
    );
  }

  /** Replaces the rules: given as a list, or as a Codex `.rules` file (checked as Codex checks it). */
  async put(
    caller: Principal,
    scope: WorkspaceScope,
    request: { rules?: ShellRule[]; codexRules?: string; elicitation?: boolean },
  ): Promise<ShellRulesRecord> {
    let rules: ShellRule[] = request.rules ?? [];
    if (request.codexRules !== undefined) {
      try {
        rules = [...rules, ...parseCodexRules(request.codexRules, 'codex_rules')];
      } catch (error) {
        if (error instanceof ShellRulesError) throw new DomainError('SHELL_RULES_INVALID', error.message);
        throw error;
      }
    }
    const actor = describePrincipal(caller);
    return this.db.transaction(async (tx) => {
      const saved = await this.repository.putShellRules(
        scope,
        { rules, elicitation: request.elicitation ?? false, updatedBy: actor },
        tx,
      );
      await this.outbox.record(tx, {
        topic: 'sandbox.shell_rules_changed',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { workspace: scope.workspaceSlug, version: saved.version, rules: rules.length, actor },
      });
      return saved;
    });
  }

  /**
   * What the workspace's rules would decide of a command line, without
   * running it: the decision, the rule and the reason `bash` would give.
   * With a sandbox, its programs are resolved there as the `bash` tool
   * resolves them; without one they are compared by name and path only.
   */
  async check(
    scope: WorkspaceScope,
    command: string,
    where: { sandbox: string; workdir: string } | null,
  ): Promise<CommandDecision & { resolvedIn: string | null }> {
    const sandbox = where ? await this.sandboxes.get(scope, where.sandbox) : null;
    const rules = ((await this.repository.shellRules(scope))?.rules ?? []) as ShellRule[];
    if (rules.length === 0)
      return {
        decision: 'allow',
        rule: null,
        command: [],
        reason: 'the workspace has no shell rules: every command runs, bounded by the sandbox',
        resolvedIn: null,
      };
    const decided = await decide(rules, command, async (names) => {
      if (!sandbox || !where) return {};
      const runner = await this.sandboxes.runner(scope, sandbox);
      return (await runner.call({ op: 'which', names, workdir: where.workdir })).paths;
    });
    return { ...decided, resolvedIn: sandbox?.name ?? null };
  }

  /** Null: the command runs. Otherwise what `bash` answers instead. */
  async gate(
    who: ToolCaller,
    sandbox: SandboxRecord,
    command: string,
    workdir: string,
    wait: HeldCall,
    asks: ClientAsks,
  ): Promise<ShellRefusal | null> {
    const elicit = asks.elicit;
    const stored = await this.repository.shellRules(who.scope);
    const rules = (stored?.rules ?? []) as ShellRule[];
    if (rules.length === 0) return null;
    const decision = await decide(rules, command, async (names) => {
      const runner = await this.sandboxes.runner(who.scope, sandbox);
      return (await runner.call({ op: 'which', names, workdir })).paths;
    });
    if (decision.decision === 'allow') return null;
    if (decision.decision === 'forbidden') return { stderr: `aileron: ${decision.reason}\n`, exitCode: 1 };
    // the workspace lets the person at the client decide, when the client can ask them and the one answering is that person
    if (stored?.elicitation && elicit && signedInPerson(who.caller)) {
      const answer = await elicit(
        `Run this command in sandbox "${sandbox.name}" (${workdir})?\n\n${command}\n\n${decision.reason}`,
      );
      // recorded before an accepted command runs: a decision nobody can find afterwards is no decision
      await this.recordAnswer(who, sandbox, command, workdir, decision.reason, decision.rule, answer);
      return answer === 'accept'
        ? null
        : {
            stderr: `aileron: ${decision.reason}. The person at the client ${answer === 'decline' ? 'declined' : 'cancelled'}; the command did not run.\n`,
            exitCode: 1,
          };
    }
    return this.prompt(who, sandbox, command, workdir, decision.reason, decision.rule, wait, asks.openPage);
  }

  /**
   * A person's answer at their own client, as an audit record of the
   * workspace's chain (and an event): who, which command (shown as approvals
   * show arguments, the policy's `redact` paths hidden), which rule, what
   * they answered.
   */
  private async recordAnswer(
    who: ToolCaller,
    sandbox: SandboxRecord,
    command: string,
    workdir: string,
    reason: string,
    rule: ShellRule | null,
    answer: Awaited<ReturnType<Elicit>>,
  ): Promise<void> {
    const policy = await this.policies.current(who.scope);
    const name = sandboxSlug(sandbox.name);
    await this.db.transaction((tx) =>
      this.outbox.record(tx, {
        topic: 'sandbox.prompt_answered',
        organizationId: who.scope.organizationId,
        workspaceId: who.scope.workspaceId,
        payload: {
          workspace: who.scope.workspaceSlug,
          sandbox: name,
          server: 'sandbox',
          tool: 'bash',
          arguments: redactArguments({ sandbox: name, command, workdir }, policy.document.redact ?? []),
          rules: [ruleName(rule)],
          reason,
          answer,
          via: 'elicitation',
          actor: describePrincipal(who.caller),
        },
      }),
    );
  }

  /**
   * A person decides the exact command (its sandbox and workdir included) in
   * the approval flow; approved, it runs once. The call waits as a pool call
   * held for approval does (through a database outage too, telling the
   * client it waits), then says where the request is. A client that can
   * open a page for its person (URL-mode elicitation) is shown the review
   * page while the call waits: an approver decides there, signed in as
   * themselves; the client's reply decides nothing.
   */
  private async prompt(
    who: ToolCaller,
    sandbox: SandboxRecord,
    command: string,
    workdir: string,
    reason: string,
    rule: ShellRule | null,
    wait: HeldCall,
    openPage: OpenPage | undefined,
  ): Promise<ShellRefusal | null> {
    const caller = who.caller;
    const requester = caller.agentSession?.creator ?? describePrincipal(caller);
    const gatewayId = requester.startsWith('gateway:') ? requester.slice('gateway:'.length) : null;
    const exact = {
      server: 'sandbox',
      tool: 'bash',
      arguments: { sandbox: sandboxSlug(sandbox.name), command, workdir },
      requester,
      session: caller.agentSession?.id ?? null,
    };
    const ask = () =>
      this.approvals.requestForRule(
        who.scope,
        describePrincipal(caller),
        { ...exact, agentSession: caller.agentSession?.id ?? null, executionMode: 'remote' },
        gatewayId,
        [ruleName(rule)],
      );
    const asked = (await this.approvals.forCall(who.scope, exact, gatewayId)) ?? (await ask());
    const page =
      openPage && asked.status === 'pending'
        ? openPage({
            message: `Approval ${asked.id} is needed to run this command in sandbox "${sandbox.name}" (${workdir}):\n\n${command}\n\n${reason}. An approver decides on this page; the command runs once it is approved.`,
            url: this.approvals.reviewUrl(asked.id),
            id: `${asked.id}.${randomUUID()}`,
          })
        : undefined;
    let held: Awaited<ReturnType<ApprovalsService['holdCall']>>;
    try {
      held = await this.approvals.holdCall(who.scope, caller, { exact, gatewayId }, asked, wait);
    } catch (error) {
      page?.done(false);
      throw error;
    }
    page?.done(held.request.status !== 'pending');
    const { request } = held;
    switch (held.outcome) {
      case 'approved':
        return null;
      case 'not-usable':
        return { stderr: `aileron: approval ${request.id} was already used: ${held.reason}\n`, exitCode: 1 };
      case 'pending':
        return {
          stderr: `aileron: ${reason}. Approval ${request.id} is pending at ${held.reviewUrl}; run the same command again once it is approved.\n`,
          exitCode: 1,
        };
      case 'refused':
        return {
          stderr: `aileron: ${reason}. Approval ${request.id} was ${request.status}; the command did not run.\n`,
          exitCode: 1,
        };
    }
  }
}

/** How approvals and audit records name the shell rule that asked. */
function ruleName(rule: ShellRule | null): string {
  return `shell:${rule?.source ?? 'unanalysable command'}`;
}

/**
 * Whether the MCP client's answer to an elicitation can be a person's own:
 * only when the MCP session was opened with a person's sign-in (a user's
 * JWT). With a caveat token the client is the agent, with an API or gateway
 * token a program: the one answering would be the caller itself, so its
 * "accept" decides nothing and the command goes to an approver instead.
 */
function signedInPerson(caller: Principal): boolean {
  return caller.kind === 'user' && caller.agentSession === undefined;
}

/**
 * The rules' decision of one line (shell-rules.md): its programs found,
 * resolved by `resolve` (PATH lookup and realpath in the sandbox), the
 * strictest rule winning. A line that cannot be read cannot be checked: a
 * person decides, unless every rule allows anyway.
 */
async function decide(
  rules: ShellRule[],
  command: string,
  resolve: (names: string[]) => Promise<Record<string, string | null>>,
): Promise<CommandDecision> {
  try {
    const analysis = analyzeCommand(command);
    const names = programsToResolve(analysis, rules);
    const resolved = names.length > 0 ? await resolve(names) : {};
    return decideCommand(analysis, rules, new Map(Object.entries(resolved)));
  } catch (error) {
    if (!(error instanceof ShellSyntaxError)) throw error;
    const strict = rules.some((r) => r.decision !== 'allow');
    return {
      decision: strict ? 'prompt' : 'allow',
      rule: null,
      command: [],
      reason: strict
        ? `the command could not be analysed (${error.message}), so a person decides`
        : `the command could not be analysed (${error.message}); every rule allows it, so it runs`,
    };
  }
}
