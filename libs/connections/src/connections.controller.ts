import { Body, Controller, Inject, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { TenantScope, WorkspaceScope, Caller, Principal } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { createdAtKey, ListCursor, Route } from '@aileron/http';
import { ConnectionFlow } from './connection-flow.service';
import {
  connectAnswer,
  connectBody,
  connectionParams,
  connectionsPage,
  connectionsQuery,
  removedView,
  toConnectionView,
  wsParams,
} from './connections.schemas';

const cursor = new ListCursor('connections', createdAtKey);

/**
 * The pool's OAuth connections to upstream MCP servers, over REST: ask where
 * to connect, list them with their state (never a token), end one. The
 * connecting itself happens in a browser (ConnectPagesController).
 */
@Controller()
export class ConnectionsController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly flow: ConnectionFlow,
    private readonly clock: Clock,
  ) {}

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/connections',
    summary: 'Where to connect a server that signs in with OAuth (its catalog entry says auth: oauth)',
    description:
      'Discovers the upstream’s authorization server and registers the pool there now (a mistake is told here), then answers the URL a person opens in a browser to connect: their own connection (per_person), or the workspace’s (per_workspace, owners and admins). The tokens go to the vault; no answer ever carries one.',
    tag: 'connections',
    permission: 'connection.create',
    tenancy: 'workspace',
    params: wsParams,
    body: connectBody,
    response: connectAnswer,
    status: 201,
    example: { body: { server: '{server}' } },
  })
  async prepare(
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof connectBody>,
  ): Promise<z.infer<typeof connectAnswer>> {
    const prepared = await this.flow.prepare(scope, body.server);
    return {
      server: prepared.server,
      connections: prepared.connections,
      authorization_url: prepared.authorizationUrl,
      authorization_server: prepared.authorizationServer,
      registration: prepared.registration,
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/connections',
    summary: 'The workspace’s OAuth connections to upstream servers and their state, newest first',
    description:
      'Owners, admins and auditors see every connection; others see the workspace’s and their own. No token is ever in an answer.',
    tag: 'connections',
    permission: 'connection.read',
    tenancy: 'workspace',
    params: wsParams,
    query: connectionsQuery,
    response: connectionsPage,
  })
  async list(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof connectionsQuery>,
  ): Promise<z.infer<typeof connectionsPage>> {
    const rows = await this.flow.list(caller, scope, query.server, cursor.keyset(query));
    const now = this.clock.now();
    return cursor.page(
      rows,
      query,
      (c) => ({ createdAt: c.createdAt, id: c.id }),
      (c) => toConnectionView(this.config.publicUrl, c, now),
    );
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/connections/:id',
    summary: 'End an OAuth connection: revoked upstream where the server can, then deleted with its tokens',
    description: 'A person ends their own; owners and admins any of the workspace’s.',
    tag: 'connections',
    permission: 'connection.delete',
    tenancy: 'workspace',
    params: connectionParams,
    response: removedView,
    example: { params: { id: '{connection}' } },
  })
  async remove(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof connectionParams>,
  ): Promise<z.infer<typeof removedView>> {
    const removed = await this.flow.remove(caller, scope, params.id);
    return {
      ...toConnectionView(this.config.publicUrl, removed, this.clock.now()),
      upstream_revoked: removed.upstreamRevoked,
    };
  }
}
