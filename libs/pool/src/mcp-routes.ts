import { z } from 'zod';
import { slug } from '@aileron/auth';
import type { RouteCapability } from '@aileron/http';

/**
 * What the MCP routes, the fast path in front of them and the sessions they
 * open share: the path parameters and the one permission every MCP request
 * needs. One file, so the paths that serve the same requests cannot drift.
 */
const serverName = z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'a server name').describe('a remote server assigned to the workspace');
export const oneServer = z.object({ ws: slug, server: serverName });
export const wholeWorkspace = z.object({ ws: slug });

export const MCP_PERMISSION = 'mcp.use';

/** A session caveat token needs this to open any MCP session; `tools/call` needs `actions:run` too (checked per call). */
export const MCP_CAPABILITY: RouteCapability = 'actions:list';
