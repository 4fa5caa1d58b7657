import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, describePrincipal, Principal, slug, TenantScope, WorkspaceScope } from '@aileron/auth';
import {
  compareTextPairs,
  legacyPageView,
  ListCursor,
  Page,
  PageQuery,
  pageQuery,
  Route,
  textPairKey,
  withLegacyKey,
} from '@aileron/http';
import { type InstanceView, PoolInstances } from './pool-instances.service';
import { ToolPins } from './tool-pins.service';

const wsParams = z.object({ ws: slug });
const serverParams = z.object({ ws: slug, name: z.string().min(1).max(32) });
const instanceParams = z.object({ ws: slug, id: z.string().min(1).max(64) });
const toolParams = z.object({ ws: slug, name: z.string().min(1).max(32), tool: z.string().min(1).max(128) });
const settingsBody = z.strictObject({
  block_changed_tools: z.boolean().describe('hold back tools whose definition changed until an admin accepts them'),
});

type PinView = Awaited<ReturnType<ToolPins['list']>>[number];
const instanceView = z.object({
  workspace: z.string(),
  server: z.string(),
  version: z.string(),
  id: z.string(),
  state: z.enum(['starting', 'running']),
  started_at: z.string().describe('when it started (or began starting)'),
  pid: z.number().optional(),
  inflight: z.number().describe('requests in flight'),
  sessions: z.number().describe('upstream MCP sessions on it'),
});
const instancesPage = legacyPageView(instanceView, 'instances');
const instancesCursor = new ListCursor('pool-instances', textPairKey);
const toolsCursor = new ListCursor('tool-pins', textPairKey);

@Controller()
export class PoolController {
  constructor(
    private readonly instances: PoolInstances,
    private readonly pins: ToolPins,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/pool/instances',
    summary: "The workspace's remote server instances, running or starting (on the replica that answers), by server",
    tag: 'pool',
    permission: 'pool.read',
    tenancy: 'workspace',
    params: wsParams,
    query: pageQuery(),
    response: instancesPage,
    example: { params: { ws: 'default' } },
  })
  list(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: PageQuery,
  ): Page<InstanceView> & { instances: InstanceView[] } {
    const key = (i: InstanceView) => [i.server, i.id] as const;
    const running = this.instances.list(scope).sort((a, b) => compareTextPairs(key(a), key(b)));
    return withLegacyKey(
      instancesCursor.pageInMemory(running, query, key, compareTextPairs, (i) => i),
      'instances',
    );
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/pool/instances/:id/restart',
    summary: 'Restart a running instance: it stops, its server starts again at once, and its MCP sessions carry on',
    description:
      'Answers once the new instance runs (its id is new). Calls in flight on the old one fail; sessions carry on at their next request. Only the replica running the instance knows it: elsewhere POOL_INSTANCE_NOT_FOUND.',
    tag: 'pool',
    permission: 'pool.manage',
    tenancy: 'workspace',
    params: instanceParams,
    response: instanceView,
    example: { params: { ws: 'default', id: 'srv-000000000000' } },
  })
  restart(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof instanceParams>,
  ): Promise<InstanceView> {
    return this.instances.restart(scope, params.id, describePrincipal(caller));
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/pool/settings',
    summary: "The workspace's pool settings",
    tag: 'pool',
    permission: 'pool.read',
    tenancy: 'workspace',
    params: wsParams,
    example: { params: { ws: 'default' } },
  })
  settings(@TenantScope() scope: WorkspaceScope): Promise<{ block_changed_tools: boolean }> {
    return this.pins.settings(scope);
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/pool/settings',
    summary: "Change the workspace's pool settings",
    tag: 'pool',
    permission: 'pool.manage',
    tenancy: 'workspace',
    params: wsParams,
    body: settingsBody,
    example: { params: { ws: 'default' }, body: { block_changed_tools: true } },
  })
  putSettings(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Body() body: z.infer<typeof settingsBody>,
  ): Promise<{ block_changed_tools: boolean }> {
    return this.pins.putSettings(scope, describePrincipal(caller), body);
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/servers/:name/tools',
    summary: 'Pinned tool definitions of a remote server, and those that changed, by version then tool',
    description:
      'The first definition the pool saw for each tool of each version is pinned (sha256 of its canonical JSON). A different definition under the same version shows as `changed_hash` until accepted.',
    tag: 'pool',
    permission: 'pool.read',
    tenancy: 'workspace',
    params: serverParams,
    query: pageQuery(),
    example: { params: { ws: 'default', name: '{server}' } },
  })
  async tools(
    @TenantScope() scope: WorkspaceScope,
    @Param('name') name: string,
    @Query() query: PageQuery,
  ): Promise<Page<PinView> & { tools: PinView[] }> {
    const rows = await this.pins.list(scope, name, {}, toolsCursor.keyset(query));
    return withLegacyKey(
      toolsCursor.page(
        rows,
        query,
        (p) => [p.version, p.tool] as const,
        (p) => p,
      ),
      'tools',
    );
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/servers/:name/tools/:tool/accept',
    summary: "Accept a tool's changed definition as the pinned one",
    tag: 'pool',
    permission: 'pool.manage',
    tenancy: 'workspace',
    params: toolParams,
    example: { params: { ws: 'default', name: '{server}', tool: 'echo' } },
  })
  async accept(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Param('name') name: string,
    @Param('tool') tool: string,
  ): Promise<{ tools: Awaited<ReturnType<ToolPins['list']>> }> {
    return { tools: await this.pins.accept(scope, describePrincipal(caller), name, tool) };
  }
}
