import { Body, Controller, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, OrgScope, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import { legacyPageView, ListCursor, PageQuery, pageQuery, Route, textKey, withLegacyKey } from '@aileron/http';
import {
  createWorkspaceBody,
  CreateWorkspaceBody,
  updateWorkspaceBody,
  workspaceView,
  wsParams,
} from './tenancy.schemas';
import { TenancyService } from './tenancy.service';
import { toWorkspaceView } from './views';

const workspacesPage = legacyPageView(workspaceView, 'workspaces');
const workspacesCursor = new ListCursor('workspaces', textKey);

@Controller()
export class WorkspacesController {
  constructor(private readonly tenancy: TenancyService) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces',
    summary: 'Workspaces the caller can see, with its role in each, by slug',
    tag: 'workspaces',
    tenancy: 'caller',
    query: pageQuery(),
    response: workspacesPage,
  })
  async list(@Caller() caller: Principal, @Query() query: PageQuery): Promise<z.infer<typeof workspacesPage>> {
    const rows = await this.tenancy.listWorkspaces(caller, workspacesCursor.keyset(query));
    return withLegacyKey(
      workspacesCursor.page(rows, query, (w) => w.slug, toWorkspaceView),
      'workspaces',
    );
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces',
    summary: "Create a workspace in the caller's organisation",
    tag: 'workspaces',
    permission: 'workspace.create',
    tenancy: 'organization',
    body: createWorkspaceBody,
    response: workspaceView,
    status: 201,
    example: { body: { slug: 'payments', name: 'Payments team' } },
  })
  async create(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: CreateWorkspaceBody,
  ): Promise<z.infer<typeof workspaceView>> {
    return toWorkspaceView(await this.tenancy.createWorkspace(caller, scope, body));
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws',
    summary: 'One workspace',
    tag: 'workspaces',
    permission: 'workspace.read',
    tenancy: 'workspace',
    params: wsParams,
    response: workspaceView,
  })
  async get(@TenantScope() scope: WorkspaceScope): Promise<z.infer<typeof workspaceView>> {
    return toWorkspaceView({ ...(await this.tenancy.getWorkspace(scope)), role: scope.role });
  }

  @Route({
    method: 'PATCH',
    path: '/v1/workspaces/:ws',
    summary: 'Rename a workspace (its slug never changes)',
    tag: 'workspaces',
    permission: 'workspace.update',
    tenancy: 'workspace',
    params: wsParams,
    body: updateWorkspaceBody,
    response: workspaceView,
    example: { body: { name: 'Renamed' } },
  })
  async update(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: { name: string },
  ): Promise<z.infer<typeof workspaceView>> {
    return toWorkspaceView(await this.tenancy.updateWorkspace(caller, scope, body));
  }
}
