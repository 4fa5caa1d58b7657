import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { z } from 'zod';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { BuiltinServers } from '@aileron/pool';
import {
  type Elicit,
  type Progress,
  restrictionsOf,
  SandboxTools,
  type SessionState,
  type ToolCaller,
} from './sandbox-tools';
import { SandboxesService } from './sandboxes.service';
import { ShellRulesService } from './shell-rules.service';

/** The name the sandbox tools have on `/mcp/{ws}/sandbox`, and as `sandbox__*` on `/mcp/{ws}`. */
export const SANDBOX_SERVER = 'sandbox';
const VERSION = '1.0.0';

/**
 * The Codex harness tells servers that declare this capability how it wants
 * commands sandboxed; the request is answered once applied, so the next
 * `bash` call is sure to see it (the shell-tool README).
 */
const SandboxStateUpdate = z.object({
  method: z.literal('codex/sandbox-state/update'),
  params: z
    .object({ sandboxPolicy: z.record(z.string(), z.unknown()).optional() })
    .passthrough()
    .optional(),
});

/** One upstream MCP session's caller, and what it has told the server. */
interface Connection extends ToolCaller {
  state: SessionState;
}

/**
 * The sandbox tools as an MCP server of the control plane's own. The pool
 * reaches it like any instance (so policy, approvals, caveat tokens and
 * execution records apply), but in this process: each upstream MCP session
 * connects a server of its own, which knows its caller (the tools know whose
 * change to commit) and keeps that session's state.
 */
@Injectable()
export class SandboxToolServer implements OnModuleInit {
  private readonly tools: SandboxTools;

  constructor(
    private readonly sandboxes: SandboxesService,
    shellRules: ShellRulesService,
    private readonly builtins: BuiltinServers,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.tools = new SandboxTools(
      sandboxes,
      { defaultMs: config.sandboxes.bashTimeoutMs, maxMs: config.sandboxes.bashMaxTimeoutMs },
      (who, sandbox, command, workdir, wait, elicit) => shellRules.gate(who, sandbox, command, workdir, wait, elicit),
      (who) => restrictionsOf((who as Connection).state.sandboxPolicy),
    );
  }

  onModuleInit(): void {
    this.builtins.register({
      name: SANDBOX_SERVER,
      version: VERSION,
      present: (scope) => this.sandboxes.any(scope),
      connect: (scope, caller, transport) => this.connect({ scope, caller, state: { sandboxPolicy: null } }, transport),
    });
  }

  /** A server for one upstream MCP session: its state is its own, and it ends with that session. */
  private async connect(connection: Connection, transport: Transport): Promise<void> {
    const state = connection.state;
    const server = new Server(
      { name: 'aileron-sandbox', title: 'Aileron sandboxes', version: VERSION },
      {
        capabilities: { tools: {}, experimental: { 'codex/sandbox-state': { version: '1.0.0' } } },
        instructions:
          "Tools to read, change and run things in the workspace's sandboxes. Every change is kept as a commit on the branch aileron/snapshots; you have no git tool and need none.",
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: this.tools.list() }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      // a question for the person at the client goes with this call (its stream, downstream)
      const elicit: Elicit | undefined = server.getClientCapabilities()?.elicitation
        ? async (message) =>
            (
              await server.elicitInput(
                { message, requestedSchema: { type: 'object', properties: {} } },
                { relatedRequestId: extra.requestId, signal: extra.signal },
              )
            ).action
        : undefined;
      // the client asked to hear how the call goes (a progress token): a call held for a person's approval says it waits
      const token = request.params._meta?.progressToken;
      let step = 0;
      const progress: Progress | undefined =
        token === undefined
          ? undefined
          : (message) =>
              void extra
                .sendNotification({
                  method: 'notifications/progress',
                  params: { progressToken: token, progress: ++step, message },
                })
                .catch(() => undefined);
      return this.tools.call(connection, request.params.name, request.params.arguments, extra.signal, elicit, progress);
    });
    server.setRequestHandler(SandboxStateUpdate, async (request) => {
      state.sandboxPolicy = (request.params?.sandboxPolicy as Record<string, unknown> | undefined) ?? null;
      return {};
    });
    await server.connect(transport);
  }
}
