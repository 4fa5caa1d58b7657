import { Body, Controller, Inject, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AuditService, ingestBody, ingestView } from '@aileron/audit';
import { Caller, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { Route } from '@aileron/http';
import { ifNoneMatchHits } from './domain/etag';
import { BundlesService, PreparedBody } from './bundles.service';
import { GatewaySecretsService } from './gateway-secrets.service';
import { enrollBody, enrolledView, resolvedSecretsView, resolveSecretsBody } from './gateway.schemas';
import { GatewaysService } from './gateways.service';

/** Answers a conditional GET: 304 when the gateway already holds these bytes. */
export function sendPrepared(request: FastifyRequest, reply: FastifyReply, prepared: PreparedBody): void {
  void reply.header('etag', prepared.etag).header('cache-control', 'private, no-cache');
  if (ifNoneMatchHits(request.headers['if-none-match'], prepared.etag)) {
    void reply.code(304).send();
    return;
  }
  void reply.code(200).header('content-type', 'application/json; charset=utf-8').send(prepared.body);
}

/** What enrolled gateways call, with their gateway token. */
@Controller()
export class GatewayApiController {
  constructor(
    private readonly gateways: GatewaysService,
    private readonly bundles: BundlesService,
    private readonly audit: AuditService,
    private readonly secrets: GatewaySecretsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Route({
    method: 'POST',
    path: '/v1/gateway/enroll',
    summary: 'Exchange a one-time enrolment code for a gateway token',
    description: 'The code is the credential: it works once, before it expires. The token is shown once.',
    tag: 'gateway',
    auth: 'public',
    tenancy: 'none',
    body: enrollBody,
    response: enrolledView,
    status: 201,
    example: { body: { enrollment_code: 'ail_enr_…', name: 'alice-laptop' } },
  })
  async enroll(@Body() body: z.infer<typeof enrollBody>): Promise<z.infer<typeof enrolledView>> {
    const { gateway, token } = await this.gateways.enroll(body.enrollment_code, body.name);
    const base = this.config.publicUrl;
    return {
      gateway_id: gateway.id,
      token,
      organization: gateway.organizationSlug,
      workspace: gateway.workspaceSlug,
      groups: gateway.groups,
      catalog_url: `${base}/v1/gateway/catalog`,
      policy_url: `${base}/v1/gateway/policy`,
      keys_url: `${base}/.well-known/aileron/policy-keys`,
      token_expires_at: gateway.tokenExpiresAt?.toISOString() ?? null,
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/gateway/catalog',
    summary: "The servers this gateway's workspace may use, with the local-config merge policy",
    description:
      'Remote servers come with their Streamable HTTP endpoint; local ones with their command. Send `If-None-Match` with the last `ETag` to get 304 when nothing changed.',
    tag: 'gateway',
    tenancy: 'gateway',
    produces: 'application/json',
  })
  async catalog(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    sendPrepared(request, reply, await this.bundles.catalogFor(caller, scope));
  }

  @Route({
    method: 'GET',
    path: '/v1/gateway/policy',
    summary: 'The signed policy bundle (Ed25519 over RFC 8785 JSON), with version, expiry and offline mode',
    description:
      'Verify `signature.value` over the canonical JSON of `payload` with the key `signature.kid` from /.well-known/aileron/policy-keys. `ETag` and 304 as for the catalog.',
    tag: 'gateway',
    tenancy: 'gateway',
    produces: 'application/json',
  })
  async policy(
    @TenantScope() scope: WorkspaceScope,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    sendPrepared(request, reply, await this.bundles.policyBundle(scope));
  }

  @Route({
    method: 'POST',
    path: '/v1/gateway/audit',
    summary: 'Ship a batch of audit events recorded by the gateway (local executions and decisions)',
    description:
      "Each event carries its own `id` (UUID): a retried batch stores nothing twice (`duplicates`). Events are checked one by one; a bad one is rejected with its index and reason while the good ones are kept. The chain orders by arrival; the gateway's `time` is kept as `occurred_at`.",
    tag: 'gateway',
    tenancy: 'gateway',
    body: ingestBody,
    response: ingestView,
    example: {
      body: {
        events: [
          {
            id: '0b9d7c1e-8f0a-4a53-9d8e-2f4c6b1a7e90',
            type: 'execution.succeeded',
            time: '2026-11-23T10:00:00.000Z',
            execution_mode: 'local',
            server: 'github',
            tool: 'get_issue',
            decision: 'allow',
            latency_ms: 12,
          },
        ],
      },
    },
  })
  ingest(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof ingestBody>,
  ): Promise<z.infer<typeof ingestView>> {
    return this.audit.ingest(scope, caller, body.events);
  }

  @Route({
    method: 'POST',
    path: '/v1/gateway/secrets/resolve',
    summary: "The values of a local server's `vault://` references, for the gateway that starts it",
    description:
      "Only for a server of the gateway's workspace at the version its catalog gives this gateway, and only for secrets written with `deliver_to_gateways: true`; all values or none. Each value read is a `secret.read` audit record naming the gateway, written before the answer: if it cannot be, `503 AUDIT_UNAVAILABLE` and no value. The policy bundle's `needs_secrets` lists the servers that need this. Values are in this answer only (`Cache-Control: no-store`), never in a catalog, log or error.",
    tag: 'gateway',
    tenancy: 'gateway',
    body: resolveSecretsBody,
    response: resolvedSecretsView,
    example: { body: { server: 'github', version: '1.2.0' } },
  })
  async resolveSecrets(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof resolveSecretsBody>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<z.infer<typeof resolvedSecretsView>> {
    void reply.header('cache-control', 'no-store');
    return this.secrets.resolve(caller, scope, body.server, body.version);
  }
}
