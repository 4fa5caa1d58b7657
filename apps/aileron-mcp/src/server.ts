import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  CallToolResult,
  ListToolsRequestSchema,
  ListToolsResult,
  ProgressToken,
  ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { toolError } from '@aileron/errors';
import { ControlPlane, ControlPlaneError } from './control-plane';
import { callOwnTool, OWN_TOOL_NAMES, OWN_TOOLS } from './own-tools';
import { PoolConnection } from './pool-connection';
import type { Settings } from './settings';

const INSTRUCTIONS = [
  "Tools named server__tool are your workspace's tools, run through Aileron: its policy decides each call.",
  "A call that needs a person's approval answers with an approval id and a review URL: share the URL, wait with approval_status, then call the tool again with exactly the same arguments.",
  'Use message_user to tell or ask the people behind this session something.',
].join(' ');

export type Log = (line: string) => void;

/**
 * The stdio MCP server an agent runs in its sandbox: the workspace's tools
 * proxied from the control plane's `/mcp/{ws}` as the agent session, and two tools
 * of our own (approvals and the message channel).
 */
export function createServer(
  settings: Settings,
  version: string,
  log: Log,
): { server: Server; close(): Promise<void> } {
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
  });
  let lastListFailure = '';

  server.setRequestHandler(ListToolsRequestSchema, async (request, extra): Promise<ListToolsResult> => {
    const cursor = request.params?.cursor;
    const own = cursor === undefined ? OWN_TOOLS : [];
    try {
      const upstream = (await pool.request('tools/list', request.params, extra.signal)) as ListToolsResult;
      lastListFailure = '';
      return { ...upstream, tools: [...upstream.tools, ...own] };
    } catch (error) {
      if (!(error instanceof ControlPlaneError)) throw error;
      // our own tools still work without the pool's (a token narrowed to `comms`, say): list them, and say once why the rest is missing
      if (error.message !== lastListFailure) log(`the workspace's tools are not available: ${error.message}`);
      lastListFailure = error.message;
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

  return { server, close: () => pool.close() };
}
