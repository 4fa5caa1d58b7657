import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, OrgScope, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import { createdAtKey, legacyPageView, ListCursor, Route, withLegacyKey } from '@aileron/http';
import {
  enrollmentCodeBody,
  enrollmentCodeView,
  gatewayParams,
  gatewaysQuery,
  gatewayView,
  keysView,
  revokeByPersonBody,
  revokedByPersonView,
  rotateBody,
  rotatedView,
  settingsBody,
  settingsView,
  toGatewayView,
  toSettingsView,
  updateGatewayBody,
  wsParams,
} from './gateway.schemas';
import { GatewaysService } from './gateways.service';
import { SigningKeysService } from '@aileron/keys';

const gatewaysPage = legacyPageView(gatewayView, 'gateways');
const gatewaysCursor = new ListCursor('gateways', createdAtKey);

/** Admins: enrolment codes, the workspace's gateways, the organisation's gateway settings. */
@Controller()
export class GatewaysController {
  constructor(
    private readonly gateways: GatewaysService,
    private readonly keys: SigningKeysService,
  ) {}

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/enrollment-codes',
    summary: 'A one-time, expiring code for enrolling a gateway into the workspace',
    tag: 'gateways',
    permission: 'gateway.enroll',
    tenancy: 'workspace',
    params: wsParams,
    body: enrollmentCodeBody,
    response: enrollmentCodeView,
    status: 201,
    example: { body: { expires_in_seconds: 900, groups: ['canary'], token_expires_in_seconds: 7776000 } },
  })
  async createCode(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof enrollmentCodeBody>,
  ): Promise<z.infer<typeof enrollmentCodeView>> {
    const created = await this.gateways.createEnrollmentCode(caller, scope, {
      expiresInSeconds: body.expires_in_seconds,
      groups: body.groups,
      tokenExpiresInSeconds: body.token_expires_in_seconds ?? null,
    });
    return {
      code: created.code,
      expires_at: created.expiresAt.toISOString(),
      groups: created.groups,
      token_expires_in_seconds: body.token_expires_in_seconds ?? null,
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/gateways',
    summary: "The workspace's enrolled gateways, with when each was last seen, newest enrolment first",
    tag: 'gateways',
    permission: 'gateway.read',
    tenancy: 'workspace',
    params: wsParams,
    query: gatewaysQuery,
    response: gatewaysPage,
  })
  async list(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof gatewaysQuery>,
  ): Promise<z.infer<typeof gatewaysPage>> {
    const rows = await this.gateways.list(scope, { enrolledBy: query.enrolled_by }, gatewaysCursor.keyset(query));
    return withLegacyKey(
      gatewaysCursor.page(rows, query, (g) => ({ createdAt: g.enrolledAt, id: g.id }), toGatewayView),
      'gateways',
    );
  }

  @Route({
    method: 'PATCH',
    path: '/v1/workspaces/:ws/gateways/:id',
    summary: "Change a gateway's rollout groups",
    tag: 'gateways',
    permission: 'gateway.manage',
    tenancy: 'workspace',
    params: gatewayParams,
    body: updateGatewayBody,
    response: gatewayView,
    example: { params: { id: '{gateway}' }, body: { groups: ['canary'] } },
  })
  async update(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof gatewayParams>,
    @Body() body: z.infer<typeof updateGatewayBody>,
  ): Promise<z.infer<typeof gatewayView>> {
    return toGatewayView(await this.gateways.setGroups(caller, scope, params.id, body.groups));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/gateways/:id',
    summary: 'Revoke a gateway: its token stops working on every replica at once',
    tag: 'gateways',
    permission: 'gateway.manage',
    tenancy: 'workspace',
    params: gatewayParams,
    response: gatewayView,
    example: { params: { id: '{gateway}' } },
  })
  async revoke(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof gatewayParams>,
  ): Promise<z.infer<typeof gatewayView>> {
    return toGatewayView(await this.gateways.revoke(caller, scope, params.id));
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/gateways/revoke',
    summary: "Revoke a person's gateways in the workspace: those enrolled with codes they, or their API tokens, made",
    description:
      'For a laptop lost or a person moving on without leaving the organisation: every gateway of the workspace that `GET …/gateways?enrolled_by=` lists for the person is revoked in one transaction, each a `gateway.revoked` audit record with `reason: "revoked_by_person"`, and refused by every replica at once (`401 GATEWAY_REVOKED`). The person, their tokens and their gateways in other workspaces stay; offboarding (`POST /v1/users/{id}/deactivate`) ends all of it.',
    tag: 'gateways',
    permission: 'gateway.manage',
    tenancy: 'workspace',
    params: wsParams,
    body: revokeByPersonBody,
    response: revokedByPersonView,
    example: { body: { enrolled_by: '{user}' } },
  })
  async revokeByPerson(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof revokeByPersonBody>,
  ): Promise<z.infer<typeof revokedByPersonView>> {
    const revoked = await this.gateways.revokeEnrolledBy(caller, scope, body.enrolled_by);
    return { revoked: revoked.map(toGatewayView) };
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/gateways/:id/rotate',
    summary: "Rotate a gateway's token: a new one, shown once; the old one works until its grace period ends",
    description:
      'Every replica forgets the old token at once and refuses it from the end of the grace period (`401 GATEWAY_TOKEN_ROTATED`); a new token with `expires_in_seconds` is refused after that (`401 TOKEN_EXPIRED`). A `gateway.token_rotated` audit record names both tokens by prefix, the grace period and the expiry.',
    tag: 'gateways',
    permission: 'gateway.manage',
    tenancy: 'workspace',
    params: gatewayParams,
    body: rotateBody,
    response: rotatedView,
    status: 201,
    example: { params: { id: '{gateway}' }, body: { grace_seconds: 900, expires_in_seconds: 7776000 } },
  })
  async rotateToken(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof gatewayParams>,
    @Body() body: z.infer<typeof rotateBody>,
  ): Promise<z.infer<typeof rotatedView>> {
    const { gateway, token } = await this.gateways.rotateToken(caller, scope, params.id, {
      graceSeconds: body.grace_seconds,
      expiresInSeconds: body.expires_in_seconds ?? null,
    });
    return { ...toGatewayView(gateway), token };
  }

  @Route({
    method: 'GET',
    path: '/v1/organization/gateway-settings',
    summary: "The organisation's gateway settings: local servers, offline mode, bundle lifetime",
    tag: 'gateways',
    permission: 'organization.read',
    tenancy: 'organization',
    response: settingsView,
  })
  async settings(@TenantScope() scope: OrgScope): Promise<z.infer<typeof settingsView>> {
    return toSettingsView(await this.gateways.settings(scope));
  }

  @Route({
    method: 'PUT',
    path: '/v1/organization/gateway-settings',
    summary: "Change the organisation's gateway settings",
    tag: 'gateways',
    permission: 'gateway.settings',
    tenancy: 'organization',
    body: settingsBody,
    response: settingsView,
    example: { body: { allow_local_servers: false, offline_mode: 'fail_closed', max_stale_seconds: 900 } },
  })
  async saveSettings(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: z.infer<typeof settingsBody>,
  ): Promise<z.infer<typeof settingsView>> {
    return toSettingsView(
      await this.gateways.saveSettings(caller, scope, {
        allowLocalServers: body.allow_local_servers,
        offlineMode: body.offline_mode,
        maxStaleSeconds: body.max_stale_seconds,
      }),
    );
  }

  @Route({
    method: 'GET',
    path: '/.well-known/aileron/policy-keys',
    summary: 'The public keys that sign policy bundles (JWKS, Ed25519)',
    description:
      'The newest key signs; after a rotation the previous one stays listed until bundles signed with it are replaced.',
    tag: 'gateway',
    auth: 'public',
    tenancy: 'none',
    response: keysView,
  })
  async publicKeys(): Promise<z.infer<typeof keysView>> {
    const ring = await this.keys.ring('policy-bundle');
    return {
      keys: ring.published.map((k) => ({
        kty: 'OKP',
        crv: 'Ed25519',
        alg: 'EdDSA',
        use: 'sig',
        kid: k.kid,
        x: k.x,
        created_at: k.created_at,
      })),
    };
  }

  @Route({
    method: 'POST',
    path: '/v1/platform/signing-keys/rotate',
    summary: 'Rotate the policy-bundle signing key (platform operators)',
    tag: 'platform',
    tenancy: 'platform',
    response: z.object({ kid: z.string(), retired: z.array(z.string()) }),
    status: 201,
  })
  async rotate(): Promise<{ kid: string; retired: string[] }> {
    return this.keys.rotate('policy-bundle');
  }
}
