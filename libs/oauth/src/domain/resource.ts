/**
 * The MCP endpoints as OAuth protected resources (RFC 9728, RFC 8707). Each
 * workspace's MCP endpoint is one resource, `<public URL>/mcp/<ws>`: a token
 * issued for it reaches `/mcp/<ws>`, `/mcp/<ws>/<server>` and
 * `/mcp/<ws>/sandbox`, and nothing else. Pure rules, for the authorization
 * server here and for whatever needs to name the resources (the pool's 401s).
 */

/** A workspace slug as the MCP routes take it. */
const WORKSPACE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** `/mcp/<ws>` or `/mcp/<ws>/<server>`, the query aside */
const MCP_PATH = /^\/mcp\/([^/?#]+)(?:\/[^/?#]+)?\/?(?:\?.*)?$/;

export const PROTECTED_RESOURCE_METADATA = '/.well-known/oauth-protected-resource';
/** the scope every MCP resource offers: calling the workspace's MCP endpoint as the person who consented */
export const MCP_SCOPE = 'mcp';

/** The resource identifier of a workspace's MCP endpoint. */
export function mcpResource(publicUrl: string, workspace: string): string {
  return `${publicUrl}/mcp/${workspace}`;
}

/**
 * The workspace a resource indicator names, or null when it is not one of our
 * MCP endpoints exactly (another host, a path below it, a query or fragment):
 * a token is bound to the workspace's endpoint as a whole, never to a part of it.
 */
export function workspaceOfResource(publicUrl: string, resource: string): string | null {
  const prefix = `${publicUrl}/mcp/`;
  if (!resource.startsWith(prefix)) return null;
  const workspace = resource.slice(prefix.length);
  return WORKSPACE.test(workspace) ? workspace : null;
}

/** The workspace of an MCP request's path (`/mcp/<ws>` or below it), or null for any other path. */
export function workspaceOfMcpPath(path: string): string | null {
  const match = MCP_PATH.exec(path);
  return match && WORKSPACE.test(match[1]!) ? match[1]! : null;
}

/** Where the resource's metadata is: the well-known path inserted before the resource's path (RFC 9728 § 3.1). */
export function resourceMetadataUrl(publicUrl: string, workspace: string): string {
  return `${publicUrl}${PROTECTED_RESOURCE_METADATA}/mcp/${workspace}`;
}

/**
 * The `WWW-Authenticate` challenge of a 401 on an MCP path (RFC 9728 § 5.1,
 * RFC 6750 § 3), or undefined on any other path. A request that carried a
 * token that is not good here gets `error="invalid_token"` too.
 */
export function mcpChallenge(publicUrl: string, path: string, tokenSent: boolean): string | undefined {
  const workspace = workspaceOfMcpPath(path);
  if (workspace === null) return undefined;
  const parts = [`resource_metadata="${resourceMetadataUrl(publicUrl, workspace)}"`, `scope="${MCP_SCOPE}"`];
  if (tokenSent) parts.push('error="invalid_token"');
  return `Bearer ${parts.join(', ')}`;
}

/** The protected resource metadata of a workspace's MCP endpoint (RFC 9728 § 2). */
export function protectedResourceMetadata(
  publicUrl: string,
  workspace: string,
  authorizationServer: string,
): Record<string, unknown> {
  return {
    resource: mcpResource(publicUrl, workspace),
    authorization_servers: [authorizationServer],
    scopes_supported: [MCP_SCOPE],
    bearer_methods_supported: ['header'],
    resource_name: `Aileron MCP endpoint of workspace "${workspace}"`,
    resource_documentation: `${publicUrl}/docs`,
  };
}
