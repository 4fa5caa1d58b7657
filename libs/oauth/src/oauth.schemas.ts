import { z } from 'zod';
import { slug, uuid } from '@aileron/auth';
import { pageQuery, pageView } from '@aileron/http';
import type { GrantRecord, OauthSettingsRecord } from './oauth.repository';

export const wsParams = z.object({ ws: slug });
export const clientParams = z.object({ ws: slug, id: uuid });
export const ownClientParams = z.object({ id: uuid });
export const resourceParams = z.object({ ws: slug });
export const serverResourceParams = z.object({ ws: slug, server: z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/) });

export const clientsQuery = pageQuery().extend({
  user: uuid.optional().describe('only the clients this person connected'),
});
export const ownClientsQuery = pageQuery();

export const connectedClientView = z.object({
  id: z.string().describe('the connection (the consent); revoking it ends every token issued under it'),
  client_id: z.string().describe('an https URL (a Client ID Metadata Document) or a dynamically registered id'),
  client_name: z.string().nullable().describe("as the client's metadata named it: the client's own claim"),
  registration: z.enum(['metadata_document', 'dynamic']),
  workspace: z.string(),
  resource: z.string().describe('the MCP endpoint its tokens reach'),
  scope: z.string(),
  user: z.object({ id: z.string(), email: z.string().nullable(), name: z.string().nullable() }),
  connected_at: z.string(),
  last_used_at: z.string().nullable().describe('when one of its tokens was last used (to the minute)'),
});
export const connectedClientsPage = pageView(connectedClientView);

export function toConnectedClientView(grant: GrantRecord): z.infer<typeof connectedClientView> {
  return {
    id: grant.id,
    client_id: grant.clientId,
    client_name: grant.clientName,
    registration: grant.registration,
    workspace: grant.workspaceSlug,
    resource: grant.resource,
    scope: grant.scope,
    user: { id: grant.userId, email: grant.user.email, name: grant.user.name },
    connected_at: grant.createdAt.toISOString(),
    last_used_at: grant.lastUsedAt?.toISOString() ?? null,
  };
}

export const settingsBody = z
  .object({
    allow_dynamic_registration: z
      .boolean()
      .describe(
        'whether MCP clients that registered themselves (RFC 7591) may be given access; off, only clients with a Client ID Metadata Document',
      ),
  })
  .strict();
export const settingsView = z.object({
  allow_dynamic_registration: z.boolean(),
  updated_at: z.string().nullable(),
});

export function toSettingsView(settings: OauthSettingsRecord): z.infer<typeof settingsView> {
  return {
    allow_dynamic_registration: settings.allowDynamicRegistration,
    updated_at: settings.updatedAt?.toISOString() ?? null,
  };
}

export const resourceMetadataView = z.object({
  resource: z.string(),
  authorization_servers: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  bearer_methods_supported: z.array(z.string()),
  resource_name: z.string(),
  resource_documentation: z.string(),
});
