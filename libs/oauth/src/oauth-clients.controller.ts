import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { AccessService, Caller, OrgScope, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import { NotFoundError } from '@aileron/errors';
import { createdAtKey, ListCursor, Route } from '@aileron/http';
import { OauthGrants } from './oauth-grants.service';
import {
  clientParams,
  clientsQuery,
  connectedClientsPage,
  connectedClientView,
  ownClientParams,
  ownClientsQuery,
  settingsBody,
  settingsView,
  toConnectedClientView,
  toSettingsView,
  wsParams,
} from './oauth.schemas';

const clientsCursor = new ListCursor('oauth-clients', createdAtKey);
const ownCursor = new ListCursor('own-oauth-clients', createdAtKey);

/**
 * Connected clients: the MCP clients people allowed, with OAuth, to use a
 * workspace's MCP endpoint as them. Admins list and disconnect them per
 * workspace; each person lists and disconnects their own; the organisation
 * decides whether self-registered clients may connect at all.
 */
@Controller()
export class OauthClientsController {
  constructor(
    private readonly grants: OauthGrants,
    private readonly access: AccessService,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/oauth/clients',
    summary: 'The MCP clients connected to the workspace with OAuth, newest first',
    description:
      'Each is one person’s consent to one client for the workspace’s MCP endpoint (docs/oauth.md). `client_name` is the client’s own claim, from its metadata.',
    tag: 'oauth',
    permission: 'oauth_client.read',
    tenancy: 'workspace',
    params: wsParams,
    query: clientsQuery,
    response: connectedClientsPage,
  })
  async list(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof clientsQuery>,
  ): Promise<z.infer<typeof connectedClientsPage>> {
    const rows = await this.grants.list(scope, { userId: query.user }, clientsCursor.keyset(query));
    return clientsCursor.page(rows, query, (g) => ({ createdAt: g.createdAt, id: g.id }), toConnectedClientView);
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/oauth/clients/:id',
    summary: 'Disconnect an MCP client: its access and refresh tokens stop working on every replica at once',
    tag: 'oauth',
    permission: 'oauth_client.revoke',
    tenancy: 'workspace',
    params: clientParams,
    response: connectedClientView,
    example: { params: { id: '{oauth_client}' } },
  })
  async revoke(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof clientParams>,
  ): Promise<z.infer<typeof connectedClientView>> {
    return toConnectedClientView(await this.grants.revoke(caller, scope, params.id));
  }

  @Route({
    method: 'GET',
    path: '/v1/me/oauth/clients',
    summary: 'The MCP clients the signed-in person connected with OAuth, in every workspace',
    tag: 'oauth',
    tenancy: 'caller',
    query: ownClientsQuery,
    response: connectedClientsPage,
  })
  async listOwn(
    @Caller() caller: Principal,
    @Query() query: z.infer<typeof ownClientsQuery>,
  ): Promise<z.infer<typeof connectedClientsPage>> {
    // a token or a gateway never consented to anything: it has no clients of its own
    if (caller.kind !== 'user') return { items: [], next_cursor: null };
    const rows = await this.grants.listOfPerson(
      this.access.callerOrganization(caller),
      caller.id,
      ownCursor.keyset(query),
    );
    return ownCursor.page(rows, query, (g) => ({ createdAt: g.createdAt, id: g.id }), toConnectedClientView);
  }

  @Route({
    method: 'DELETE',
    path: '/v1/me/oauth/clients/:id',
    summary: 'Disconnect an MCP client the signed-in person connected',
    tag: 'oauth',
    tenancy: 'caller',
    params: ownClientParams,
    response: connectedClientView,
    example: { params: { id: '{oauth_client}' } },
  })
  async revokeOwn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof ownClientParams>,
  ): Promise<z.infer<typeof connectedClientView>> {
    if (caller.kind !== 'user') throw new NotFoundError('connected client', params.id, 'OAUTH_CLIENT_NOT_FOUND');
    return toConnectedClientView(
      await this.grants.revokeOwn(caller, this.access.callerOrganization(caller), params.id),
    );
  }

  @Route({
    method: 'GET',
    path: '/v1/organization/oauth-settings',
    summary: 'Which MCP clients may connect with OAuth: whether self-registered ones may',
    tag: 'oauth',
    permission: 'organization.read',
    tenancy: 'organization',
    response: settingsView,
  })
  async settings(@TenantScope() scope: OrgScope): Promise<z.infer<typeof settingsView>> {
    return toSettingsView(await this.grants.settings(scope));
  }

  @Route({
    method: 'PUT',
    path: '/v1/organization/oauth-settings',
    summary: 'Allow or refuse MCP clients that registered themselves (RFC 7591 dynamic registration)',
    description:
      'Off by default: only clients that identify themselves with a Client ID Metadata Document (an https client_id) can be given access. On, people of this organisation may also allow clients that registered at `/oauth/reg`.',
    tag: 'oauth',
    permission: 'oauth.settings',
    tenancy: 'organization',
    body: settingsBody,
    response: settingsView,
    example: { body: { allow_dynamic_registration: true } },
  })
  async saveSettings(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: z.infer<typeof settingsBody>,
  ): Promise<z.infer<typeof settingsView>> {
    return toSettingsView(
      await this.grants.putSettings(caller, scope, { allowDynamicRegistration: body.allow_dynamic_registration }),
    );
  }
}
