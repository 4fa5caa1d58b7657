import { z } from 'zod';
import { slug } from '@aileron/auth';
import type { RouteCapability } from '@aileron/http';

/**
 * What the MCP routes, the fast path in front of them and the sessions they
 * open share: the path parameters and the one permission every MCP request
 * needs. One file, so the paths that serve the same requests cannot drift.
 */
const serverName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'a server name')
  .describe('a remote server assigned to the workspace');
export const oneServer = z.object({ ws: slug, server: serverName });
export const wholeWorkspace = z.object({ ws: slug });

export const MCP_PERMISSION = 'mcp.use';

/** The two endpoints, as route templates (the metrics' labels too). */
export const MCP_ONE_SERVER = '/mcp/:ws/:server';
export const MCP_WHOLE_WORKSPACE = '/mcp/:ws';
/** Either endpoint's path, for the fast path, which sees requests before routing: `ws`, then the server if any. */
export const MCP_PATH = /^\/mcp\/([^/?#]+)(?:\/([^/?#]+))?$/;

/** A session caveat token needs this to open any MCP session; `tools/call` needs `actions:run` too (checked per call). */
export const MCP_CAPABILITY: RouteCapability = 'actions:list';
