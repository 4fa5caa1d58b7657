import { Body, Controller, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { stringify } from 'csv-stringify/sync';
import { z } from 'zod';
import { Caller, OrgScope, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import {
  LEGACY_REMOVAL,
  ListCursor,
  numberKey,
  PageQuery,
  pageQuery,
  pageView,
  Route,
  withLegacyKey,
} from '@aileron/http';
import { SigningKeysService } from '@aileron/keys';
import { AuditService } from './audit.service';
import {
  auditQuery,
  CSV_COLUMNS,
  exportQuery,
  filtersOf,
  retentionBody,
  retentionView,
  searchView,
  toView,
  verifyView,
  wsParams,
} from './audit.schemas';

const auditKeysView = z.object({
  keys: z.array(
    z.object({
      kty: z.literal('OKP'),
      crv: z.literal('Ed25519'),
      alg: z.literal('EdDSA'),
      use: z.literal('sig'),
      kid: z.string(),
      x: z.string(),
    }),
  ),
});

const checkpointView = z.object({
  seq: z.number().int(),
  hash: z.string(),
  kind: z.enum(['periodic', 'retention']),
  key_id: z.string(),
  signature: z.string(),
});
const checkpointsView = pageView(checkpointView).extend({
  chain: z.string(),
  checkpoints: z
    .array(checkpointView)
    .meta({ deprecated: true })
    .describe(`the same as \`items\`; deprecated, removed in ${LEGACY_REMOVAL}`),
});
const checkpointsCursor = new ListCursor('audit-checkpoints', numberKey);

/** `s:<seq>`: the cursors audit search gave out before every list had one format. */
function legacyAuditCursor(text: string): number | undefined {
  const match = /^s:(\d{1,15})$/.exec(text);
  return match ? Number(match[1]) : undefined;
}
const searchCursor = new ListCursor('audit', numberKey, legacyAuditCursor);

const SEARCH_DESCRIPTION =
  'Newest first. Filters combine (AND); `next_cursor` continues. Every record carries its hash and the hash of the one before it.';

@Controller()
export class AuditController {
  constructor(
    private readonly audit: AuditService,
    private readonly keys: SigningKeysService,
  ) {}

  @Route({
    method: 'GET',
    path: '/.well-known/aileron/audit-keys',
    summary: 'The public keys that sign audit checkpoints (JWKS, Ed25519), retired ones included',
    description:
      'A checkpoint signs `aileron-audit-checkpoint/v1\\n` + RFC 8785 JSON of `{chain, seq, hash, kind}`; with these keys anyone holding an export can check it without the control plane.',
    tag: 'audit',
    auth: 'public',
    tenancy: 'none',
    response: auditKeysView,
  })
  async publicKeys(): Promise<z.infer<typeof auditKeysView>> {
    await this.keys.ring('audit-checkpoint'); // the first key exists before anyone asks for it
    const keys = await this.keys.publicKeys('audit-checkpoint');
    return {
      keys: [...keys].map(([kid, x]) => ({
        kty: 'OKP' as const,
        crv: 'Ed25519' as const,
        alg: 'EdDSA' as const,
        use: 'sig' as const,
        kid,
        x,
      })),
    };
  }

  @Route({
    method: 'POST',
    path: '/v1/platform/audit-keys/rotate',
    summary: 'Rotate the audit checkpoint signing key (platform operators)',
    description: 'New checkpoints use the new key; every older key stays published so old checkpoints keep verifying.',
    tag: 'platform',
    tenancy: 'platform',
    response: z.object({ kid: z.string(), retired: z.array(z.string()) }),
    status: 201,
  })
  rotateKeys(): Promise<{ kid: string; retired: string[] }> {
    return this.keys.rotate('audit-checkpoint');
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/audit',
    summary: "Search the workspace's audit log",
    description: SEARCH_DESCRIPTION,
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'workspace',
    params: wsParams,
    query: auditQuery,
    response: searchView,
  })
  search(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof auditQuery>,
  ): Promise<z.infer<typeof searchView>> {
    return this.searchIn(scope, query);
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/audit/verify',
    summary: "Check the workspace's whole audit chain and its signed checkpoints",
    description: 'Names the first record that was edited, removed, inserted or moved.',
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'workspace',
    params: wsParams,
    response: verifyView,
  })
  verify(@TenantScope() scope: WorkspaceScope): Promise<z.infer<typeof verifyView>> {
    return this.audit.verify(scope);
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/audit/checkpoints',
    summary: "The signed checkpoints of the workspace's chain, in chain order",
    description:
      'With an export and the keys at /.well-known/aileron/audit-keys, an auditor verifies the chain without trusting the control plane.',
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'workspace',
    params: wsParams,
    query: pageQuery(),
    response: checkpointsView,
  })
  async checkpoints(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: PageQuery,
  ): Promise<z.infer<typeof checkpointsView>> {
    const rows = await this.audit.checkpoints(scope, checkpointsCursor.keyset(query));
    const page = checkpointsCursor.page(
      rows,
      query,
      (c) => c.seq,
      (c) => ({ seq: c.seq, hash: c.hash, kind: c.kind, key_id: c.keyId, signature: c.signature }),
    );
    return { chain: scope.workspaceId, ...withLegacyKey(page, 'checkpoints') };
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/audit/export',
    summary: "Stream the workspace's audit log as JSON Lines or CSV",
    description: 'In chain order, with the same filters as search; streamed, so any size works.',
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'workspace',
    params: wsParams,
    query: exportQuery,
    produces: 'application/x-ndjson',
  })
  async export(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof exportQuery>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.exportFrom(scope, query, reply);
  }

  @Route({
    method: 'GET',
    path: '/v1/audit',
    summary: "Search the organisation's own audit log (catalog, tokens, members, settings)",
    description: SEARCH_DESCRIPTION,
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'organization',
    query: auditQuery,
    response: searchView,
  })
  searchOrganization(
    @TenantScope() scope: OrgScope,
    @Query() query: z.infer<typeof auditQuery>,
  ): Promise<z.infer<typeof searchView>> {
    return this.searchIn(scope, query);
  }

  @Route({
    method: 'GET',
    path: '/v1/audit/verify',
    summary: "Check the organisation's audit chain",
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'organization',
    response: verifyView,
  })
  verifyOrganization(@TenantScope() scope: OrgScope): Promise<z.infer<typeof verifyView>> {
    return this.audit.verify(scope);
  }

  @Route({
    method: 'GET',
    path: '/v1/audit/export',
    summary: "Stream the organisation's audit log as JSON Lines or CSV",
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'organization',
    query: exportQuery,
    produces: 'application/x-ndjson',
  })
  async exportOrganization(
    @TenantScope() scope: OrgScope,
    @Query() query: z.infer<typeof exportQuery>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.exportFrom(scope, query, reply);
  }

  @Route({
    method: 'GET',
    path: '/v1/organization/audit-retention',
    summary: 'How long audit records are kept',
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'organization',
    response: retentionView,
  })
  async retention(@TenantScope() scope: OrgScope): Promise<z.infer<typeof retentionView>> {
    return { days: await this.audit.retentionDays(scope) };
  }

  @Route({
    method: 'PUT',
    path: '/v1/organization/audit-retention',
    summary: 'Set how long audit records are kept',
    description:
      'Older records are removed in whole ranges from the start of each chain; a signed checkpoint anchors what remains, so it still verifies.',
    tag: 'audit',
    permission: 'audit.manage',
    tenancy: 'organization',
    body: retentionBody,
    response: retentionView,
    example: { body: { days: 365 } },
  })
  async setRetention(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: z.infer<typeof retentionBody>,
  ): Promise<z.infer<typeof retentionView>> {
    await this.audit.setRetentionDays(caller, scope, body.days);
    return { days: body.days };
  }

  private async searchIn(scope: OrgScope, query: z.infer<typeof auditQuery>): Promise<z.infer<typeof searchView>> {
    const rows = await this.audit.search(scope, filtersOf(query), searchCursor.keyset(query));
    return withLegacyKey(
      searchCursor.page(rows, query, (r) => r.seq, toView),
      'events',
    );
  }

  private async exportFrom(scope: OrgScope, query: z.infer<typeof exportQuery>, reply: FastifyReply): Promise<void> {
    const csv = query.format === 'csv';
    const records = this.audit.stream(scope, filtersOf(query));
    // the first page is read before the status is sent: a failure there is still a clean problem response
    const first = await records.next();
    reply.raw.writeHead(200, {
      'content-type': csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
      'content-disposition': `attachment; filename="audit.${csv ? 'csv' : 'jsonl'}"`,
      'x-request-id': String(reply.request.id),
    });
    reply.hijack();
    const line = (record: Parameters<typeof toView>[0]): string => {
      const view = toView(record);
      return csv
        ? stringify([CSV_COLUMNS.map((c) => (c === 'data' ? JSON.stringify(view.data) : (view[c] ?? '')))])
        : `${JSON.stringify(view)}\n`;
    };
    try {
      if (csv) reply.raw.write(stringify([[...CSV_COLUMNS]]));
      if (!first.done) reply.raw.write(line(first.value));
      for await (const record of records) {
        if (!reply.raw.write(line(record))) await new Promise((resolve) => reply.raw.once('drain', resolve));
      }
    } finally {
      reply.raw.end();
    }
  }
}
