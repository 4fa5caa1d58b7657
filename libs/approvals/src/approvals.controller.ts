import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, describePrincipal, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import { createdAtKey, legacyPageView, ListCursor, Route, withLegacyKey } from '@aileron/http';
import { routingDocumentSchema } from './domain/routing';
import { ApprovalsService } from './approvals.service';
import {
  approvalView,
  cancelBody,
  consumeBody,
  decideBody,
  gatewayRequestBody,
  idParams,
  linkBody,
  linkView,
  listQuery,
  toView,
  waitQuery,
  wsParams,
} from './approvals.schemas';

const ROUTING_EXAMPLE = {
  default_route: 'security',
  routes: {
    security: {
      approvers: [{ group: 'sre' }, { rotation: 'primary' }, { role: 'admin' }],
      quorum: 2,
      expires_in_seconds: 1800,
    },
  },
  groups: { sre: ['alice@example.com', 'bob@example.com'] },
  rotations: {
    primary: {
      period: 'weekly',
      start: '2026-01-05T09:00:00Z',
      members: ['alice@example.com', 'bob@example.com'],
      overrides: [],
    },
  },
};

const approvalsPage = legacyPageView(approvalView, 'approvals');
const approvalsCursor = new ListCursor('approvals', createdAtKey);
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

@Controller()
export class ApprovalsController {
  constructor(private readonly approvals: ApprovalsService) {}

  private view = (record: Parameters<typeof toView>[0]) => toView(record, this.approvals.reviewUrl(record.id));

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/approvals',
    summary: "The workspace's approval inbox",
    description: '`?status=pending` for what waits on a decision; newest first.',
    tag: 'approvals',
    permission: 'approval.read',
    tenancy: 'workspace',
    params: wsParams,
    query: listQuery,
    response: approvalsPage,
  })
  async list(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof listQuery>,
  ): Promise<z.infer<typeof approvalsPage>> {
    // the deprecated `before` is an instant: every request of that millisecond or later is behind it (no id is below the nil UUID)
    const legacy = query.before !== undefined ? { createdAt: new Date(query.before), id: NIL_UUID } : undefined;
    const rows = await this.approvals.list(scope, { status: query.status }, approvalsCursor.keyset(query, legacy));
    return withLegacyKey(
      approvalsCursor.page(rows, query, (r) => r, this.view),
      'approvals',
    );
  }

  @Route({
    method: 'GET',
    path: '/v1/approvals/:id',
    summary: 'One approval request; with `wait`, answers when it is decided or the wait ends',
    description:
      'Long-poll: `?wait=60` returns as soon as the request is decided on any replica. Gateways read the requests they made, agent sessions the requests their calls made.',
    tag: 'approvals',
    tenancy: 'caller',
    gateways: true,
    capability: 'approvals:poll',
    params: idParams,
    query: waitQuery,
    response: approvalView,
    example: { params: { id: '{approval}' } },
  })
  async get(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof idParams>,
    @Query() query: z.infer<typeof waitQuery>,
  ): Promise<z.infer<typeof approvalView>> {
    return this.view(
      query.wait
        ? await this.approvals.wait(caller, params.id, query.wait)
        : await this.approvals.get(caller, params.id),
    );
  }

  @Route({
    method: 'POST',
    path: '/v1/approvals/:id/approve',
    summary: 'Approve: with the quorum reached, the exact call may run once',
    tag: 'approvals',
    tenancy: 'caller',
    params: idParams,
    body: decideBody,
    response: approvalView,
    example: { params: { id: '{approval}' }, body: { reason: 'checked with the on-call' } },
  })
  async approve(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof decideBody>,
  ): Promise<z.infer<typeof approvalView>> {
    return this.view(await this.approvals.decide(caller, params.id, 'approve', body.reason ?? null, body.channel));
  }

  @Route({
    method: 'POST',
    path: '/v1/approvals/:id/deny',
    summary: 'Deny: final, whatever others decided',
    tag: 'approvals',
    tenancy: 'caller',
    params: idParams,
    body: decideBody,
    response: approvalView,
    example: { params: { id: '{approval}' }, body: { reason: 'not during the freeze' } },
  })
  async deny(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof decideBody>,
  ): Promise<z.infer<typeof approvalView>> {
    return this.view(await this.approvals.decide(caller, params.id, 'deny', body.reason ?? null, body.channel));
  }

  @Route({
    method: 'POST',
    path: '/v1/approvals/:id/links',
    summary: 'Send one approver a one-time review link',
    description:
      'The link goes to that person through the webhook endpoints that subscribe to `approval.link` exactly (json format), never to the caller: it decides once, as that approver (separation of duties still applies), until the request expires. Only its hash is stored. 409 LINK_CHANNEL_MISSING when no endpoint carries it.',
    tag: 'approvals',
    tenancy: 'caller',
    params: idParams,
    body: linkBody,
    response: linkView,
    status: 202,
    example: { params: { id: '{approval}' }, body: { user: '{user}' } },
  })
  sendLink(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof linkBody>,
  ): Promise<z.infer<typeof linkView>> {
    return this.approvals.sendLink(caller, params.id, body.user);
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/approval-routes',
    summary: "The workspace's approval routes, groups and on-call rotations",
    tag: 'approvals',
    permission: 'approval.read',
    tenancy: 'workspace',
    params: wsParams,
    response: z.object({ version: z.number().int(), document: routingDocumentSchema }),
  })
  getRouting(
    @TenantScope() scope: WorkspaceScope,
  ): Promise<{ version: number; document: z.infer<typeof routingDocumentSchema> }> {
    return this.approvals.routing(scope);
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/approval-routes',
    summary: "Replace the workspace's approval routing",
    description:
      "A policy rule with effect `approval` names a route (`approval_route`); without one `default_route` applies; without a document the workspace's owners, admins and approvers decide, one enough. Approvers: `{user}` (id or e-mail), `{role}`, `{group}` (the people listed under `groups`, and anyone whose identity-provider groups include its name), `{rotation}` (daily or weekly shifts with overrides). A route's `channels` (`[{webhook: <endpoint name>}]`, endpoints of the organisation for this workspace or all of them) are also sent each request it gets, as `approval.routed` with its review link (a Slack endpoint posts it as a message); they decide nothing.",
    tag: 'approvals',
    permission: 'approval.routes',
    tenancy: 'workspace',
    params: wsParams,
    body: routingDocumentSchema,
    bodyValidation: 'handler',
    response: z.object({ version: z.number().int(), document: routingDocumentSchema }),
    example: { body: ROUTING_EXAMPLE },
  })
  putRouting(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: unknown,
  ): Promise<{ version: number; document: z.infer<typeof routingDocumentSchema> }> {
    return this.approvals.putRouting(caller, scope, body);
  }

  @Route({
    method: 'POST',
    path: '/v1/gateway/approvals',
    summary: 'Ask for a human decision on a local call the policy says needs approval',
    description:
      'Answers at once with the request and its `review_url`; wait with `GET /v1/approvals/{id}?wait=60`, then run the call only after `POST /v1/gateway/approvals/{id}/consume` with the identical call succeeds.',
    tag: 'gateway',
    tenancy: 'gateway',
    body: gatewayRequestBody,
    response: approvalView,
    status: 201,
    example: {
      body: {
        server: 'github',
        tool: 'merge_pull_request',
        arguments: { repo: 'payments', number: 42 },
        session: 's-1',
        principal: 'alice@example.com',
      },
    },
  })
  async gatewayRequest(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Body() body: z.infer<typeof gatewayRequestBody>,
  ): Promise<z.infer<typeof approvalView>> {
    const record = await this.approvals.request(
      scope,
      describePrincipal(caller),
      {
        server: body.server,
        tool: body.tool,
        arguments: body.arguments,
        requester: body.principal,
        session: body.session ?? null,
        executionMode: 'local',
        roles: body.roles,
        groups: body.groups,
      },
      caller.id,
    );
    return this.view(record);
  }

  @Route({
    method: 'POST',
    path: '/v1/gateway/approvals/:id/consume',
    summary: 'Use an approval for the identical call, once',
    description:
      'Succeeds only for the approved request, before it expires, once, with the same server, tool, arguments (by canonical digest), principal and session. Anything else is 409 APPROVAL_NOT_USABLE with the reason.',
    tag: 'gateway',
    tenancy: 'gateway',
    params: idParams,
    body: consumeBody,
    response: approvalView,
    example: {
      params: { id: '{approval}' },
      body: {
        server: 'github',
        tool: 'merge_pull_request',
        arguments: { repo: 'payments', number: 42 },
        session: 's-1',
        principal: 'alice@example.com',
      },
    },
  })
  async gatewayConsume(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof consumeBody>,
  ): Promise<z.infer<typeof approvalView>> {
    const record = await this.approvals.consume(
      scope,
      describePrincipal(caller),
      params.id,
      {
        server: body.server,
        tool: body.tool,
        arguments: body.arguments,
        requester: body.principal,
        session: body.session ?? null,
      },
      // only the gateway that asked may use the approval, as only it may read it
      caller.id,
    );
    return this.view(record);
  }

  @Route({
    method: 'POST',
    path: '/v1/gateway/approvals/:id/cancel',
    summary: 'Withdraw a pending request the gateway made (the call will not be made)',
    description:
      'Final like any decision: waiters learn `cancelled` at once; the request can no longer be approved or used.',
    tag: 'gateway',
    tenancy: 'gateway',
    params: idParams,
    body: cancelBody,
    response: approvalView,
    example: { params: { id: '{approval}' }, body: { reason: 'the developer stopped the agent' } },
  })
  async gatewayCancel(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof cancelBody>,
  ): Promise<z.infer<typeof approvalView>> {
    return this.view(
      await this.approvals.cancel(scope, describePrincipal(caller), params.id, caller.id, body.reason ?? null),
    );
  }
}
