import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, OrgScope, Principal, TenantScope } from '@aileron/auth';
import { createdAtKey, legacyPageView, ListCursor, PageQuery, pageQuery, Route, withLegacyKey } from '@aileron/http';
import { AuditSinkRecord } from './audit-sinks.repository';
import { AuditSinksService } from './audit-sinks.service';

const sinkBody = z.object({
  name: z.string().min(1).max(100),
  url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048),
  secret: z.string().min(16).max(256).optional().describe('HMAC secret; generated (and returned once) when absent'),
});

const sinkView = z.object({
  id: z.string(),
  name: z.string(),
  host: z.string().describe('where records go; the full URL may carry credentials and is not shown'),
  enabled: z.boolean().describe('false while paused (`POST /v1/audit/sinks/{id}/pause`)'),
  created_at: z.string(),
  created_by: z.string().nullable(),
  last_delivered_at: z.string().nullable(),
  last_error: z.string().nullable(),
  last_error_at: z.string().nullable(),
});

const idParams = z.object({ id: z.uuid() });
const sinksPage = legacyPageView(sinkView, 'sinks');
const sinksCursor = new ListCursor('audit-sinks', createdAtKey);

function view(sink: AuditSinkRecord): z.infer<typeof sinkView> {
  return {
    id: sink.id,
    name: sink.name,
    host: new URL(sink.url).host,
    enabled: sink.enabled,
    created_at: sink.createdAt.toISOString(),
    created_by: sink.createdBy,
    last_delivered_at: sink.lastDeliveredAt?.toISOString() ?? null,
    last_error: sink.lastError,
    last_error_at: sink.lastErrorAt?.toISOString() ?? null,
  };
}

@Controller()
export class AuditSinksController {
  constructor(private readonly sinks: AuditSinksService) {}

  @Route({
    method: 'POST',
    path: '/v1/audit/sinks',
    summary: 'Stream every audit record of the organisation to a SIEM endpoint',
    description:
      'Records arrive in chain order as JSON batches, signed: `x-aileron-signature: v1=<hex HMAC-SHA256 of "<x-aileron-timestamp>.<body>">`; reject timestamps older than 5 minutes. `x-aileron-delivery` is the same when a batch is re-sent. Private and loopback targets are refused unless UPSTREAM_ALLOW_CIDRS allows them.',
    tag: 'audit',
    permission: 'audit.manage',
    tenancy: 'organization',
    body: sinkBody,
    response: sinkView.extend({ secret: z.string().describe('shown once') }),
    status: 201,
    example: { body: { name: 'splunk', url: 'https://siem.example.com/aileron' } },
  })
  async create(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: z.infer<typeof sinkBody>,
  ): Promise<z.infer<typeof sinkView> & { secret: string }> {
    const { sink, secret } = await this.sinks.create(caller, scope, body);
    return { ...view(sink), secret };
  }

  @Route({
    method: 'GET',
    path: '/v1/audit/sinks',
    summary: "The organisation's audit sinks and how their delivery goes, oldest first",
    tag: 'audit',
    permission: 'audit.read',
    tenancy: 'organization',
    query: pageQuery(),
    response: sinksPage,
  })
  async list(@TenantScope() scope: OrgScope, @Query() query: PageQuery): Promise<z.infer<typeof sinksPage>> {
    const rows = await this.sinks.list(scope, sinksCursor.keyset(query));
    return withLegacyKey(
      sinksCursor.page(rows, query, (s) => s, view),
      'sinks',
    );
  }

  @Route({
    method: 'POST',
    path: '/v1/audit/sinks/:id/pause',
    summary: 'Pause a sink: nothing is sent to it until it is resumed',
    description:
      'Its place in each chain is kept: once resumed, the sink receives every record written while it was paused. Pausing a paused sink changes nothing.',
    tag: 'audit',
    permission: 'audit.manage',
    tenancy: 'organization',
    params: idParams,
    response: sinkView,
    example: { params: { id: '{sink}' } },
  })
  async pause(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof idParams>,
  ): Promise<z.infer<typeof sinkView>> {
    return view(await this.sinks.pause(caller, scope, params.id));
  }

  @Route({
    method: 'POST',
    path: '/v1/audit/sinks/:id/resume',
    summary: 'Resume a paused sink',
    description:
      'Delivery goes on from where it stopped, records written while it was paused included (unlike a webhook, which does not re-send what it missed).',
    tag: 'audit',
    permission: 'audit.manage',
    tenancy: 'organization',
    params: idParams,
    response: sinkView,
    example: { params: { id: '{sink}' } },
  })
  async resume(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof idParams>,
  ): Promise<z.infer<typeof sinkView>> {
    return view(await this.sinks.resume(caller, scope, params.id));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/audit/sinks/:id',
    summary: 'Stop streaming to a sink',
    tag: 'audit',
    permission: 'audit.manage',
    tenancy: 'organization',
    params: idParams,
    status: 204,
    example: { params: { id: '{sink}' } },
  })
  async remove(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param() params: z.infer<typeof idParams>,
  ): Promise<void> {
    await this.sinks.remove(caller, scope, params.id);
  }
}
