import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  CallToolResult,
  type ClientCapabilities,
  ElicitResultSchema,
  InitializeRequestSchema,
  type JSONRPCMessage,
  ListToolsRequestSchema,
  ListToolsResult,
  ProgressToken,
  type ServerCapabilities,
  ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { toolError } from '@aileron/errors';
import { ControlPlane, ControlPlaneError } from './control-plane';
import { callOwnTool, OWN_TOOL_NAMES, OWN_TOOLS } from './own-tools';
import { PoolConnection, SANDBOX_STATE_CAPABILITY, SANDBOX_STATE_METHOD } from './pool-connection';
import type { Settings } from './settings';

const INSTRUCTIONS = [
  "Tools named server__tool are your workspace's tools, run through Aileron: its policy decides each call.",
  "A call that needs a person's approval answers with an approval id and a review URL: share the URL, wait with approval_status, then call the tool again with exactly the same arguments.",
  'Use message_user to tell or ask the people behind this session something.',
].join(' ');

/** A person answering at their client takes as long as they take; the agent's client cancels through us if it gives up. */
const ELICITATION_TIMEOUT_MS = 60 * 60_000;
/** How long the agent's `initialize` waits for the control plane to say what it offers before it is answered without. */
const PREPARE_TIMEOUT_MS = 10_000;

const SandboxStateRequest = z.object({
  method: z.literal(SANDBOX_STATE_METHOD),
  params: z.record(z.string(), z.unknown()).optional(),
});

export type Log = (line: string) => void;

/**
 * The stdio MCP server an agent runs in its sandbox: the workspace's tools
 * proxied from the control plane's `/mcp/{ws}` as the agent session, and two tools
 * of our own (approvals and the message channel). What the agent's client
 * can answer (elicitation) is declared to the pool as the client declared
 * it, and a server's question passes through to the person there; what the
 * pool takes besides tools (a client's sandbox policy) is declared to the
 * agent as the pool declared it, and passed on.
 */
export function createServer(
  settings: Settings,
  version: string,
  log: Log,
): { server: Server; serve(transport: Transport): Promise<void>; close(): Promise<void> } {
  // The low-level Server, not McpServer: the pool's tools arrive as JSON Schema and pass through as they are.
  const server = new Server(
    { name: 'aileron', version },
    { capabilities: { tools: { listChanged: true } }, instructions: INSTRUCTIONS },
  );
  const controlPlane = new ControlPlane(settings);
  const relays = new Map<ProgressToken, (notification: ServerNotification) => Promise<void>>();
  const pool = new PoolConnection(settings, version, {
    toolsChanged: () => void server.sendToolListChanged().catch(() => undefined),
    progress: (params) =>
      void relays
        .get(params.progressToken)?.({ method: 'notifications/progress', params })
        .catch(() => undefined),
    elicit: (params, signal) =>
      server.request({ method: 'elicitation/create', params }, ElicitResultSchema, {
        signal,
        timeout: ELICITATION_TIMEOUT_MS,
      }),
    elicitationComplete: (params) =>
      void server.notification({ method: 'notifications/elicitation/complete', params }).catch(() => undefined),
  });
  let lastFailure = '';
  /** a reason the workspace's tools are missing, said once for each new reason */
  const unavailable = (error: ControlPlaneError): void => {
    if (error.message !== lastFailure) log(`the workspace's tools are not available: ${error.message}`);
    lastFailure = error.message;
  };

  server.setRequestHandler(ListToolsRequestSchema, async (request, extra): Promise<ListToolsResult> => {
    const cursor = request.params?.cursor;
    const own = cursor === undefined ? OWN_TOOLS : [];
    try {
      const upstream = (await pool.request('tools/list', request.params, extra.signal)) as ListToolsResult;
      lastFailure = '';
      return { ...upstream, tools: [...upstream.tools, ...own] };
    } catch (error) {
      if (!(error instanceof ControlPlaneError)) throw error;
      // our own tools still work without the pool's (a token narrowed to `comms`, say): list them, and say once why the rest is missing
      unavailable(error);
      return { tools: own };
    }
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name } = request.params;
    if (OWN_TOOL_NAMES.has(name)) return callOwnTool(controlPlane, name, request.params.arguments, extra.signal);
    const token = request.params._meta?.progressToken;
    if (token !== undefined) relays.set(token, extra.sendNotification);
    try {
      return (await pool.request('tools/call', request.params, extra.signal)) as CallToolResult;
    } catch (error) {
      if (error instanceof ControlPlaneError) return toolError(error.code, error.message);
      throw error;
    } finally {
      if (token !== undefined) relays.delete(token);
    }
  });

  /**
   * Before the agent's `initialize` is answered: the pool's session opens
   * with the agent's elicitation declared as the agent declared it, and
   * what the pool takes besides tools becomes ours to declare. A control
   * plane that cannot be reached now leaves it out (said on stderr); the
   * tools still open on first use.
   */
  async function prepare(agent: ClientCapabilities): Promise<ServerCapabilities> {
    pool.mirror(agent);
    let offered: ServerCapabilities | undefined;
    try {
      offered = await Promise.race([
        pool.serverCapabilities(),
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new ControlPlaneError(0, 'UNREACHABLE', `no answer within ${PREPARE_TIMEOUT_MS / 1000} s`)),
            PREPARE_TIMEOUT_MS,
          ).unref(),
        ),
      ]);
    } catch (error) {
      // whatever went wrong, the agent still gets its answer and our own tools; the pool's are retried on first use
      unavailable(
        error instanceof ControlPlaneError
          ? error
          : new ControlPlaneError(0, 'UNREACHABLE', error instanceof Error ? error.message : String(error)),
      );
      return {};
    }
    const sandboxState = offered?.experimental?.[SANDBOX_STATE_CAPABILITY];
    if (!sandboxState) return {};
    // answered once the pool applied it to every server that runs commands for this session
    server.setRequestHandler(SandboxStateRequest, (request, extra) =>
      pool.updateSandboxState(request.params, extra.signal),
    );
    return { experimental: { [SANDBOX_STATE_CAPABILITY]: sandboxState } };
  }

  return {
    server,
    serve: (transport) => serveAfterPreparing(server, transport, prepare),
    close: () => pool.close(),
  };
}

/**
 * Connects the server once the agent's `initialize` has arrived and
 * `prepare` has said what to declare besides (a server's capabilities are
 * fixed when it connects). The initialize, and whatever came after it, is
 * then handed to the server in order.
 */
async function serveAfterPreparing(
  server: Server,
  transport: Transport,
  prepare: (agent: ClientCapabilities) => Promise<ServerCapabilities>,
): Promise<void> {
  const held: JSONRPCMessage[] = [];
  let deliver: ((message: JSONRPCMessage) => void) | null = null;
  const relay: Transport = {
    start: async () => undefined,
    send: (message, options) => transport.send(message, options),
    close: () => transport.close(),
  };
  const initialize = new Promise<ClientCapabilities | null>((resolve) => {
    transport.onmessage = (message) => {
      if (deliver) return deliver(message);
      held.push(message);
      const parsed = InitializeRequestSchema.safeParse(message);
      if (parsed.success) resolve(parsed.data.params.capabilities);
    };
    // the agent went away before it initialized: nothing to prepare
    transport.onclose = () => resolve(null);
  });
  transport.onerror = (error) => relay.onerror?.(error);
  await transport.start();
  const agent = await initialize;
  if (agent) server.registerCapabilities(await prepare(agent));
  await server.connect(relay);
  transport.onclose = () => relay.onclose?.();
  if (!agent) {
    relay.onclose?.();
    return;
  }
  deliver = (message) => relay.onmessage?.(message);
  for (const message of held.splice(0)) deliver(message);
}
