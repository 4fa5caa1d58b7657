import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { z } from 'zod';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { describeIssues, fieldIssues } from '@aileron/errors';
import { BuiltinServers } from '@aileron/pool';
import {
  commandBounds,
  SANDBOX_STATE_CAPABILITY,
  SANDBOX_STATE_METHOD,
  SandboxStateSchema,
} from './domain/sandbox-policy';
import {
  type ClientAsks,
  type OpenPage,
  type Progress,
  SandboxTools,
  type SessionState,
  type ToolCaller,
} from './sandbox-tools';
import { SandboxesService } from './sandboxes.service';
import { ShellRulesService } from './shell-rules.service';

/** The name the sandbox tools have on `/mcp/{ws}/sandbox`, and as `sandbox__*` on `/mcp/{ws}`. */
export const SANDBOX_SERVER = 'sandbox';
const VERSION = '1.0.0';
/** where the update's answer lists the writable roots it did not take */
const SANDBOX_STATE_META = 'aileron/sandbox-state';

/**
 * The Codex harness tells servers that declare this capability how it wants
 * commands sandboxed; the request is answered once applied, so the next
 * `bash` call is sure to see it (the shell-tool README). Its params are read
 * by the handler, so a malformed policy is refused saying why rather than
 * by the SDK's generic message.
 */
const SandboxStateUpdate = z.object({
  method: z.literal(SANDBOX_STATE_METHOD),
  params: z.unknown().optional(),
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
      (who, sandbox, command, workdir, wait, asks) => shellRules.gate(who, sandbox, command, workdir, wait, asks),
      (who) => (who as Connection).state.restrictions,
    );
  }

  onModuleInit(): void {
    this.builtins.register({
      name: SANDBOX_SERVER,
      version: VERSION,
      present: (scope) => this.sandboxes.any(scope),
      connect: (scope, caller, transport) => this.connect({ scope, caller, state: { restrictions: null } }, transport),
    });
  }

  /** A server for one upstream MCP session: its state is its own, and it ends with that session. */
  private async connect(connection: Connection, transport: Transport): Promise<void> {
    const state = connection.state;
    const server = new Server(
      { name: 'aileron-sandbox', title: 'Aileron sandboxes', version: VERSION },
      {
        capabilities: { tools: {}, experimental: { [SANDBOX_STATE_CAPABILITY]: { version: '1.0.0' } } },
        instructions:
          "Tools to read, change and run things in the workspace's sandboxes. Every change is kept as a commit on the branch aileron/snapshots; you have no git tool and need none.",
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: this.tools.list() }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      // a question for the person at the client goes with this call (its stream, downstream)
      const declared = server.getClientCapabilities()?.elicitation;
      const related = { relatedRequestId: extra.requestId };
      const asks: ClientAsks = {};
      if (declared?.form)
        asks.elicit = async (message) =>
          (
            await server.elicitInput(
              { message, requestedSchema: { type: 'object', properties: {} } },
              { ...related, signal: extra.signal },
            )
          ).action;
      if (declared?.url) asks.openPage = openPage(server, related, extra.signal);
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
      return this.tools.call(connection, request.params.name, request.params.arguments, extra.signal, asks, progress);
    });
    server.setRequestHandler(SandboxStateUpdate, async (request) => {
      const parsed = SandboxStateSchema.safeParse(request.params ?? {});
      // a policy we cannot read changes nothing: the session keeps the bounds it had
      if (!parsed.success)
        throw new McpError(
          ErrorCode.InvalidParams,
          `${SANDBOX_STATE_METHOD}: ${describeIssues(fieldIssues('params', parsed.error.issues))}`,
        );
      const { restrictions, ignored } = commandBounds(parsed.data);
      state.restrictions = restrictions;
      // the ack Codex waits for is {}; what was not taken is said beside it, for a client that reads it
      return ignored.length > 0 ? { _meta: { [SANDBOX_STATE_META]: { ignored_writable_roots: ignored } } } : {};
    });
    await server.connect(transport);
  }
}

/**
 * A page for the person at the client, as a URL-mode elicitation on the
 * call's stream. Its reply is not waited for and decides nothing (the page
 * does); once over, a request still unanswered is withdrawn, and a decided
 * one is announced complete.
 */
function openPage(server: Server, related: { relatedRequestId: string | number }, call: AbortSignal): OpenPage {
  return ({ message, url, id }) => {
    const withdraw = new AbortController();
    const stop = (): void => withdraw.abort();
    call.addEventListener('abort', stop, { once: true });
    void server
      .elicitInput({ mode: 'url', message, url, elicitationId: id }, { ...related, signal: withdraw.signal })
      .catch(() => undefined);
    return {
      done: (decided) => {
        call.removeEventListener('abort', stop);
        if (decided)
          void server
            .createElicitationCompletionNotifier(id, related)()
            .catch(() => undefined);
        withdraw.abort();
      },
    };
  };
}
