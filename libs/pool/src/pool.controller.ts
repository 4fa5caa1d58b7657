import { Body, Controller, Param } from '@nestjs/common';
import { z } from 'zod';
import { Caller, describePrincipal, Principal, slug, TenantScope, WorkspaceScope } from '@aileron/auth';
import { Route } from '@aileron/http';
import { PoolInstances } from './instances.service';
import { ToolPins } from './tool-pins.service';

const wsParams = z.object({ ws: slug });
const serverParams = z.object({ ws: slug, name: z.string().min(1).max(32) });
const toolParams = z.object({ ws: slug, name: z.string().min(1).max(32), tool: z.string().min(1).max(128) });
const settingsBody = z.strictObject({ block_changed_tools: z.boolean().describe('hold back tools whose definition changed until an admin accepts them') });

@Controller()
export class PoolController {
  constructor(
    private readonly instances: PoolInstances,
    private readonly pins: ToolPins,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/pool/instances',
    summary: "The workspace's running remote server instances (on the replica that answers)",
    tag: 'pool',
    permission: 'pool.read',
    tenancy: 'workspace',
    params: wsParams,
    example: { params: { ws: 'default' } },
  })
  list(@TenantScope() scope: WorkspaceScope): { instances: ReturnType<PoolInstances['list']> } {
    return { instances: this.instances.list(scope) };
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
  putSettings(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Body() body: z.infer<typeof settingsBody>): Promise<{ block_changed_tools: boolean }> {
    return this.pins.putSettings(scope, describePrincipal(caller), body);
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/servers/:name/tools',
    summary: 'Pinned tool definitions of a remote server, and those that changed',
    description: 'The first definition the pool saw for each tool of each version is pinned (sha256 of its canonical JSON). A different definition under the same version shows as `changed_hash` until accepted.',
    tag: 'pool',
    permission: 'pool.read',
    tenancy: 'workspace',
    params: serverParams,
    example: { params: { ws: 'default', name: '{server}' } },
  })
  async tools(@TenantScope() scope: WorkspaceScope, @Param('name') name: string): Promise<{ tools: Awaited<ReturnType<ToolPins['list']>> }> {
    return { tools: await this.pins.list(scope, name) };
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
  async accept(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Param('name') name: string, @Param('tool') tool: string): Promise<{ tools: Awaited<ReturnType<ToolPins['list']>> }> {
    return { tools: await this.pins.accept(scope, describePrincipal(caller), name, tool) };
  }
}
