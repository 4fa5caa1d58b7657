import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, OrgScope, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import {
  compareText,
  legacyPageView,
  ListCursor,
  PageQuery,
  pageQuery,
  Route,
  textKey,
  withLegacyKey,
} from '@aileron/http';
import { catalogEntryInput, CatalogEntryInput, compareVersions } from './domain/catalog-entry';
import type { CatalogEntryRecord } from './catalog.repository';
import {
  assignBody,
  assignmentView,
  entryView,
  rolloutBody,
  serverParams,
  statusBody,
  toAssignmentView,
  toEntryView,
  wsParams,
  wsServerParams,
} from './catalog.schemas';
import { CatalogService } from './catalog.service';

function view(entry: CatalogEntryRecord): z.infer<typeof entryView> {
  const sorted = [...entry.versions].sort((a, b) => compareVersions(b.version, a.version));
  return toEntryView({ ...entry, versions: sorted }, sorted[0]?.version ?? null);
}

const serversPage = legacyPageView(entryView, 'servers');
const serversCursor = new ListCursor('catalog-servers', textKey);
const assignmentsPage = legacyPageView(assignmentView, 'servers');
const assignmentsCursor = new ListCursor('workspace-servers', textKey);

const EXAMPLE_ENTRY = {
  name: 'github',
  version: '1.0.0',
  mode: 'remote',
  transport: 'stdio',
  command: 'npx',
  args: ['-y', '@modelcontextprotocol/server-github'],
  env: { GITHUB_TOKEN: 'vault://github/token' },
  tool_prefix: 'gh',
  description: 'GitHub, with the organisation bot token',
};

@Controller()
export class CatalogController {
  constructor(private readonly catalog: CatalogService) {}

  @Route({
    method: 'POST',
    path: '/v1/catalog/servers',
    summary: 'Publish a version of a catalog server (new name or new version; versions are immutable)',
    tag: 'catalog',
    permission: 'catalog.write',
    tenancy: 'organization',
    body: catalogEntryInput,
    response: entryView,
    status: 201,
    example: { body: EXAMPLE_ENTRY },
  })
  async publish(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: CatalogEntryInput,
  ): Promise<z.infer<typeof entryView>> {
    return view(await this.catalog.publish(caller, scope, body));
  }

  @Route({
    method: 'GET',
    path: '/v1/catalog/servers',
    summary: "The organisation's catalog: every server with its versions, by name",
    tag: 'catalog',
    permission: 'catalog.read',
    tenancy: 'organization',
    query: pageQuery(),
    response: serversPage,
  })
  async list(@TenantScope() scope: OrgScope, @Query() query: PageQuery): Promise<z.infer<typeof serversPage>> {
    const rows = await this.catalog.list(scope, serversCursor.keyset(query));
    return withLegacyKey(
      serversCursor.page(rows, query, (e) => e.name, view),
      'servers',
    );
  }

  @Route({
    method: 'GET',
    path: '/v1/catalog/servers/:name',
    summary: 'One catalog server with its versions',
    tag: 'catalog',
    permission: 'catalog.read',
    tenancy: 'organization',
    params: serverParams,
    response: entryView,
    example: { params: { name: '{server}' } },
  })
  async get(
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof serverParams>,
  ): Promise<z.infer<typeof entryView>> {
    return view(await this.catalog.entry(scope, params.name));
  }

  @Route({
    method: 'PUT',
    path: '/v1/catalog/servers/:name/status',
    summary: 'The kill switch: disable (or re-enable) a server in every workspace at once',
    tag: 'catalog',
    permission: 'catalog.write',
    tenancy: 'organization',
    params: serverParams,
    body: statusBody,
    response: entryView,
    example: { params: { name: '{server}' }, body: { enabled: false, reason: 'CVE-2026-1234' } },
  })
  async status(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof serverParams>,
    @Body() body: z.infer<typeof statusBody>,
  ): Promise<z.infer<typeof entryView>> {
    return view(await this.catalog.setEnabled(caller, scope, params.name, body.enabled, body.reason ?? null));
  }
}

@Controller()
export class WorkspaceServersController {
  constructor(private readonly catalog: CatalogService) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/servers',
    summary: 'The catalog servers assigned to the workspace, with pinned versions and rollouts, by name',
    tag: 'catalog',
    permission: 'server.read',
    tenancy: 'workspace',
    params: wsParams,
    query: pageQuery(),
    response: assignmentsPage,
  })
  async list(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: PageQuery,
  ): Promise<z.infer<typeof assignmentsPage>> {
    // the workspace's servers are cached whole (the hot path reads them): the page is cut from the cache
    const all = await this.catalog.workspaceServers(scope);
    return withLegacyKey(
      assignmentsCursor.pageInMemory(all, query, (a) => a.name, compareText, toAssignmentView),
      'servers',
    );
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/servers/:name',
    summary: 'Assign a catalog server to the workspace at a pinned version (ends any rollout)',
    tag: 'catalog',
    permission: 'server.write',
    tenancy: 'workspace',
    params: wsServerParams,
    body: assignBody,
    response: assignmentView,
    example: { params: { name: '{server}' }, body: { version: '1.0.0' } },
  })
  async assign(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof wsServerParams>,
    @Body() body: z.infer<typeof assignBody>,
  ): Promise<z.infer<typeof assignmentView>> {
    return toAssignmentView(await this.catalog.assign(caller, scope, params.name, body.version));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/servers/:name',
    summary: 'Remove a server from the workspace',
    tag: 'catalog',
    permission: 'server.write',
    tenancy: 'workspace',
    params: wsServerParams,
    status: 204,
    example: { params: { name: '{server}' } },
  })
  async unassign(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof wsServerParams>,
  ): Promise<void> {
    await this.catalog.unassign(caller, scope, params.name);
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/servers/:name/rollout',
    summary: 'Start (or change) a staged rollout of another version: named gateways, groups, then a percentage',
    tag: 'catalog',
    permission: 'server.write',
    tenancy: 'workspace',
    params: wsServerParams,
    body: rolloutBody,
    response: assignmentView,
    example: { params: { name: '{server}' }, body: { version: '1.1.0', groups: ['canary'], percent: 10 } },
  })
  async rollout(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof wsServerParams>,
    @Body() body: z.infer<typeof rolloutBody>,
  ): Promise<z.infer<typeof assignmentView>> {
    return toAssignmentView(await this.catalog.startRollout(caller, scope, params.name, body));
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/servers/:name/rollout/promote',
    summary: "Promote the rollout: its version becomes the workspace's pinned version for every gateway",
    tag: 'catalog',
    permission: 'server.write',
    tenancy: 'workspace',
    params: wsServerParams,
    response: assignmentView,
    example: { params: { name: '{server}' } },
  })
  async promote(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof wsServerParams>,
  ): Promise<z.infer<typeof assignmentView>> {
    return toAssignmentView(await this.catalog.promote(caller, scope, params.name));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/servers/:name/rollout',
    summary: 'Roll back: end the rollout, every gateway returns to the pinned version',
    tag: 'catalog',
    permission: 'server.write',
    tenancy: 'workspace',
    params: wsServerParams,
    response: assignmentView,
    example: { params: { name: '{server}' } },
  })
  async rollBack(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof wsServerParams>,
  ): Promise<z.infer<typeof assignmentView>> {
    return toAssignmentView(await this.catalog.rollBack(caller, scope, params.name));
  }
}
