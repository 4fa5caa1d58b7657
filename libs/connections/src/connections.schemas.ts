import { z } from 'zod';
import { slug, uuid } from '@aileron/auth';
import { SERVER_NAME } from '@aileron/catalog';
import { pageQuery, pageView } from '@aileron/http';
import type { ConnectionRecord } from './connections.repository';
import { connectUrl, stateOf, WORKSPACE_SUBJECT } from './domain/connection';

const serverName = z.string().regex(SERVER_NAME, 'not a server name');
export const wsParams = z.object({ ws: slug });
export const connectionParams = z.object({ ws: slug, id: uuid });
export const connectBody = z
  .object({ server: serverName.describe('a server of the workspace whose catalog entry says auth: oauth') })
  .strict();
export const connectionsQuery = pageQuery().extend({
  server: serverName.optional().describe('only the connections to this server'),
});

export const connectAnswer = z.object({
  server: z.string(),
  connections: z
    .enum(['per_person', 'per_workspace'])
    .describe("whose connection it makes: the person's who opens the URL, or the workspace's"),
  authorization_url: z
    .string()
    .describe(
      'where a person connects, in a browser: after the console sign-in it goes on to the upstream’s authorization server; per_workspace servers need an owner or admin there',
    ),
  authorization_server: z.string().describe('the upstream’s authorization server, as discovery found it'),
  registration: z
    .enum(['preregistered', 'metadata_document', 'dynamic'])
    .describe(
      'how the pool is known to it: the entry’s client, our Client ID Metadata Document, or a dynamic registration',
    ),
});

export const connectionView = z.object({
  id: z.string(),
  server: z.string(),
  connections: z.enum(['per_person', 'per_workspace']),
  user: z
    .object({ id: z.string(), email: z.string().nullable(), name: z.string().nullable() })
    .nullable()
    .describe('whose connection it is; null for the workspace’s'),
  state: z
    .enum(['connected', 'expired', 'needs_reconnect'])
    .describe(
      'connected: usable (renewed as needed); expired: its access token ran out and there is no refresh token; needs_reconnect: the upstream no longer accepts it',
    ),
  problem: z.string().nullable().describe('why it needs a reconnect, in our words'),
  authorization_server: z.string(),
  registration: z.enum(['preregistered', 'metadata_document', 'dynamic']),
  scope: z.string().nullable(),
  refreshable: z.boolean().describe('whether it has a refresh token'),
  access_expires_at: z.string().nullable(),
  connected_at: z.string(),
  last_refreshed_at: z.string().nullable(),
  last_used_at: z.string().nullable().describe('when a call last used it (to the minute)'),
  connected_by: z.string().describe('`user:<id>` of the person who signed in'),
  reconnect_url: z.string().describe('where to connect again, in a browser'),
});
export const connectionsPage = pageView(connectionView);
export const removedView = connectionView.extend({
  upstream_revoked: z
    .boolean()
    .describe('whether the upstream’s revocation endpoint took the tokens (false: it has none, or it failed)'),
});

export function toConnectionView(
  publicUrl: string,
  connection: ConnectionRecord,
  now: number,
): z.infer<typeof connectionView> {
  return {
    id: connection.id,
    server: connection.server,
    connections: connection.subject === WORKSPACE_SUBJECT ? 'per_workspace' : 'per_person',
    user: connection.userId
      ? { id: connection.userId, email: connection.user?.email ?? null, name: connection.user?.name ?? null }
      : null,
    state: stateOf(connection, now),
    problem: connection.problem,
    authorization_server: connection.upstream.authorizationServer,
    registration: connection.upstream.client.registration,
    scope: connection.scope,
    refreshable: connection.hasRefreshToken,
    access_expires_at: connection.accessExpiresAt?.toISOString() ?? null,
    connected_at: connection.connectedAt.toISOString(),
    last_refreshed_at: connection.lastRefreshedAt?.toISOString() ?? null,
    last_used_at: connection.lastUsedAt?.toISOString() ?? null,
    connected_by: connection.createdBy,
    reconnect_url: connectUrl(publicUrl, connection.workspaceSlug, connection.server),
  };
}

export const connectQuery = z.object({
  workspace: slug,
  server: serverName,
});
export const callbackQuery = z.object({
  code: z.string().max(4096).optional(),
  state: z.string().max(512).optional(),
  error: z.string().max(200).optional(),
  error_description: z.string().max(2000).optional(),
  iss: z.string().max(2048).optional(),
});

export const clientMetadataView = z.object({
  client_id: z.string().describe('this document’s own URL'),
  client_name: z.string(),
  client_uri: z.string(),
  application_type: z
    .literal('web')
    .describe('OpenID Connect Registration: a web application, its redirect URI a server’s'),
  redirect_uris: z.array(z.string()),
  grant_types: z.array(z.string()),
  response_types: z.array(z.string()),
  token_endpoint_auth_method: z.string(),
});
