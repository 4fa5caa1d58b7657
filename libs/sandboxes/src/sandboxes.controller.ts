import type { Readable } from 'node:stream';
import { Body, Controller, Headers, Param, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Caller, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import { ValidationError } from '@aileron/errors';
import {
  compareTextPairs,
  createdAtKey,
  legacyPageView,
  ListCursor,
  PageQuery,
  pageQuery,
  Route,
  textKey,
  textPairKey,
  withLegacyKey,
} from '@aileron/http';
import {
  checkBody,
  checkView,
  createBody,
  fileQuery,
  filesPage,
  filesQuery,
  fileView,
  sandboxParams,
  shellRulesBody,
  shellRulesView,
  sandboxView,
  snapshotParams,
  snapshotsQuery,
  snapshotView,
  toSandboxView,
  toSnapshotView,
  wsParams,
} from './sandboxes.schemas';
import { SandboxFilesService } from './sandbox-files.service';
import { SandboxesService } from './sandboxes.service';
import { ShellRulesService } from './shell-rules.service';
import type { ShellRule } from './domain/shell-rules';
import type { ListedEntry } from './domain/tree-listing';

const SOURCE_TYPES: Record<string, 'git-bundle' | 'tar.gz'> = {
  'application/x-git-bundle': 'git-bundle',
  'application/gzip': 'tar.gz',
};

const sandboxesPage = legacyPageView(sandboxView, 'sandboxes');
const sandboxesCursor = new ListCursor('sandboxes', textKey);
const snapshotsPage = legacyPageView(snapshotView, 'snapshots');
const snapshotsCursor = new ListCursor('sandbox-snapshots', createdAtKey);
// directories first, then by name: the order the listing is sorted in
const filesCursor = new ListCursor('sandbox-files', textPairKey);
const entryKey = (e: ListedEntry) => [e.kind === 'directory' ? '0' : '1', e.name] as const;

@Controller()
export class SandboxesController {
  constructor(
    private readonly sandboxes: SandboxesService,
    private readonly shellRules: ShellRulesService,
    private readonly files: SandboxFilesService,
  ) {}

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/sandboxes',
    summary: 'Make a sandbox agents work in (an empty repository at /src, or one uploaded next)',
    tag: 'sandboxes',
    permission: 'sandbox.write',
    tenancy: 'workspace',
    params: wsParams,
    body: createBody,
    response: sandboxView,
    status: 201,
    example: { body: { name: 'fix-flaky-test', network: 'none' } },
  })
  async create(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof createBody>,
  ): Promise<z.infer<typeof sandboxView>> {
    const limits = {
      ...(body.limits.cpu_seconds ? { cpuSeconds: body.limits.cpu_seconds } : {}),
      ...(body.limits.memory_mb ? { memoryMb: body.limits.memory_mb } : {}),
      ...(body.limits.pids ? { pids: body.limits.pids } : {}),
    };
    return toSandboxView(
      await this.sandboxes.create(caller, scope, { name: body.name, network: body.network, limits }),
    );
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/sandboxes',
    summary: "The workspace's sandboxes",
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: wsParams,
    query: pageQuery(),
    response: sandboxesPage,
  })
  async list(@TenantScope() scope: WorkspaceScope, @Query() query: PageQuery): Promise<z.infer<typeof sandboxesPage>> {
    const rows = await this.sandboxes.list(scope, sandboxesCursor.keyset(query));
    return withLegacyKey(
      sandboxesCursor.page(rows, query, (s) => s.name, toSandboxView),
      'sandboxes',
    );
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/sandboxes/:name',
    summary: 'One sandbox',
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: sandboxParams,
    response: sandboxView,
    example: { params: { name: '{sandbox}' } },
  })
  async get(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof sandboxParams>,
  ): Promise<z.infer<typeof sandboxView>> {
    return toSandboxView(await this.sandboxes.get(scope, params.name));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/sandboxes/:name',
    summary: 'Delete a sandbox: its processes, its files and its history',
    tag: 'sandboxes',
    permission: 'sandbox.write',
    tenancy: 'workspace',
    params: sandboxParams,
    status: 204,
    example: { params: { name: '{sandbox}' } },
  })
  async remove(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof sandboxParams>,
  ): Promise<void> {
    await this.sandboxes.remove(caller, scope, params.name);
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/sandboxes/:name/source',
    summary: 'Upload the initial repository: a git bundle (application/x-git-bundle) or a tar.gz (application/gzip)',
    description:
      "Streamed, at most AILERON_SANDBOX_SOURCE_MAX_BYTES. A bundle's HEAD becomes the base of the branch aileron/snapshots; an archive is unpacked inside the sandbox and committed.",
    tag: 'sandboxes',
    permission: 'sandbox.write',
    tenancy: 'workspace',
    params: sandboxParams,
    response: sandboxView,
    example: { params: { name: '{sandbox}' } },
  })
  async upload(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof sandboxParams>,
    @Headers('content-type') contentType: string | undefined,
    @Req() request: FastifyRequest,
  ): Promise<z.infer<typeof sandboxView>> {
    const type = SOURCE_TYPES[(contentType ?? '').split(';')[0]!.trim().toLowerCase()];
    if (!type)
      throw new ValidationError([
        { path: 'headers.content-type', message: 'must be application/x-git-bundle or application/gzip' },
      ]);
    return toSandboxView(await this.sandboxes.upload(caller, scope, params.name, type, request.body as Readable));
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/sandboxes/:name/snapshots',
    summary: "The sandbox's snapshot commits, newest first",
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: sandboxParams,
    query: snapshotsQuery,
    response: snapshotsPage,
    example: { params: { name: '{sandbox}' } },
  })
  async snapshots(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof sandboxParams>,
    @Query() query: z.infer<typeof snapshotsQuery>,
  ): Promise<z.infer<typeof snapshotsPage>> {
    const rows = await this.sandboxes.snapshots(scope, params.name, snapshotsCursor.keyset(query));
    return withLegacyKey(
      snapshotsCursor.page(rows, query, (s) => s, toSnapshotView),
      'snapshots',
    );
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/sandboxes/:name/snapshots/:sha/diff',
    summary: "One snapshot's change as a unified diff (text/x-diff)",
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: snapshotParams,
    example: { params: { name: '{sandbox}', sha: '{sha}' } },
  })
  async diff(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof snapshotParams>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<string> {
    const diff = await this.sandboxes.diff(scope, params.name, params.sha);
    void reply.header('content-type', 'text/x-diff; charset=utf-8');
    return diff;
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/sandboxes/:name/bundle',
    summary: 'A git bundle of the branch aileron/snapshots: `git fetch <file> aileron/snapshots` in your clone',
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: sandboxParams,
    example: { params: { name: '{sandbox}' } },
  })
  async bundle(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof sandboxParams>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<NodeJS.ReadableStream> {
    const stream = await this.sandboxes.bundle(scope, params.name);
    void reply
      .header('content-type', 'application/x-git-bundle')
      .header('content-disposition', `attachment; filename="${params.name.replace(/[^a-z0-9-]/g, '')}.bundle"`);
    return stream;
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/sandboxes/:name/files',
    summary: "One directory of the sandbox's files as a snapshot holds them (the newest by default), directories first",
    description:
      'Read from the history, never from the running sandbox: browsing does not wake it, and shows what was committed.',
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: sandboxParams,
    query: filesQuery,
    response: filesPage,
    example: { params: { name: '{sandbox}' } },
  })
  async listFiles(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof sandboxParams>,
    @Query() query: z.infer<typeof filesQuery>,
  ): Promise<z.infer<typeof filesPage>> {
    const { commit, entries } = await this.files.list(scope, params.name, query.at, query.path);
    const prefix = query.path === '' ? '' : `${query.path}/`;
    const page = filesCursor.pageInMemory(entries, query, entryKey, compareTextPairs, (e) => ({
      name: e.name,
      path: prefix + e.name,
      kind: e.kind,
      size: e.size,
    }));
    return { ...page, commit };
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/sandboxes/:name/file',
    summary: "One file's text as a snapshot holds it (the newest by default); a link's is its target",
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: sandboxParams,
    query: fileQuery,
    response: fileView,
    example: { params: { name: '{sandbox}' }, query: { path: 'README.md' } },
  })
  readFile(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof sandboxParams>,
    @Query() query: z.infer<typeof fileQuery>,
  ): Promise<z.infer<typeof fileView>> {
    return this.files.read(scope, params.name, query.at, query.path);
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/shell-rules',
    summary: "The workspace's shell rules for the sandboxes' bash tool",
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: wsParams,
    response: shellRulesView,
  })
  async getShellRules(@TenantScope() scope: WorkspaceScope): Promise<z.infer<typeof shellRulesView>> {
    const rules = await this.shellRules.get(scope);
    return {
      rules: rules.rules as z.infer<typeof shellRulesView>['rules'],
      elicitation: rules.elicitation,
      version: rules.version,
      updated_by: rules.updatedBy,
    };
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/shell-rules',
    summary:
      'Replace the shell rules: allow, prompt or forbidden per program and argument prefix (or a Codex .rules file)',
    tag: 'sandboxes',
    permission: 'shell_rules.write',
    tenancy: 'workspace',
    params: wsParams,
    body: shellRulesBody,
    response: shellRulesView,
    example: { body: { rules: [{ program: 'git', args: ['push'], decision: 'prompt' }] } },
  })
  async putShellRules(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof shellRulesBody>,
  ): Promise<z.infer<typeof shellRulesView>> {
    const saved = await this.shellRules.put(caller, scope, {
      ...(body.rules ? { rules: body.rules.map((r, i) => ({ ...r, source: `rules[${i}]` })) as ShellRule[] } : {}),
      ...(body.codex_rules !== undefined ? { codexRules: body.codex_rules } : {}),
      ...(body.elicitation !== undefined ? { elicitation: body.elicitation } : {}),
    });
    return {
      rules: saved.rules as z.infer<typeof shellRulesView>['rules'],
      elicitation: saved.elicitation,
      version: saved.version,
      updated_by: saved.updatedBy,
    };
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/shell-rules/check',
    summary:
      'What the shell rules would decide of a command line, without running it: the decision, the rule, the reason',
    tag: 'sandboxes',
    permission: 'sandbox.read',
    tenancy: 'workspace',
    params: wsParams,
    body: checkBody,
    response: checkView,
    example: { body: { command: 'git push --force origin main' } },
  })
  async checkCommand(
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof checkBody>,
  ): Promise<z.infer<typeof checkView>> {
    const decided = await this.shellRules.check(
      scope,
      body.command,
      body.sandbox !== undefined ? { sandbox: body.sandbox, workdir: body.workdir } : null,
    );
    return {
      decision: decided.decision,
      rule: decided.rule as z.infer<typeof checkView>['rule'],
      reason: decided.reason,
      command: [...decided.command],
      resolved_in: decided.resolvedIn,
    };
  }
}
