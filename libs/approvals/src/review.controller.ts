import { randomBytes } from 'node:crypto';
import { Body, Controller, Param, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BrowserSessions, CSRF_HEADER } from '@aileron/auth';
import { Route } from '@aileron/http';
import { ApprovalsService } from './approvals.service';
import { approvalView, idParams, linkDecisionBody, linkQuery, sessionDecisionBody, toView } from './approvals.schemas';
import { reviewPage } from './review-page';

/**
 * The review page and what may be done from it without a bearer token: with
 * a one-time link (the link is the credential), or with the browser-session cookie
 * a sign-in through the organisation's identity provider left (changes also
 * carry the page's CSRF token).
 */
@Controller()
export class ReviewController {
  constructor(
    private readonly approvals: ApprovalsService,
    private readonly browserSessions: BrowserSessions,
  ) {}

  @Route({
    method: 'GET',
    path: '/review/:id',
    summary: 'The review page of an approval request (HTML)',
    description:
      "For a person signed in through the organisation's identity provider (the page offers the sign-in), with `?link=` a one-time link, or with a pasted token. The page shows the exact call and decides through the API.",
    tag: 'approvals',
    auth: 'public',
    tenancy: 'none',
    params: idParams,
    produces: 'text/html',
  })
  async page(
    @Param() params: z.infer<typeof idParams>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const [signIn, browserSession] = await Promise.all([
      this.approvals.signInOption(params.id),
      this.browserSessions.peek(request),
    ]);
    const nonce = randomBytes(16).toString('base64');
    void reply
      .header('content-type', 'text/html; charset=utf-8')
      .header(
        'content-security-policy',
        `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'`,
      )
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .send(
        reviewPage(params.id, nonce, {
          signIn: signIn
            ? {
                href: `/v1/auth/oidc/login?${new URLSearchParams({ organization: signIn.organization, return_to: `/review/${params.id}` })}`,
                label: signIn.label,
              }
            : null,
          browserSession: browserSession ? { name: browserSession.principal.name, csrf: browserSession.csrf } : null,
        }),
      );
  }

  @Route({
    method: 'GET',
    path: '/review/:id/request',
    summary: 'The request, for the holder of a one-time link',
    tag: 'approvals',
    auth: 'public',
    tenancy: 'none',
    params: idParams,
    query: linkQuery,
    response: approvalView,
  })
  async request(
    @Param() params: z.infer<typeof idParams>,
    @Query() query: z.infer<typeof linkQuery>,
  ): Promise<z.infer<typeof approvalView>> {
    return toView(await this.approvals.viewWithLink(query.link, params.id), this.approvals.reviewUrl(params.id));
  }

  @Route({
    method: 'POST',
    path: '/review/:id/decision',
    summary: 'Decide with a one-time link',
    tag: 'approvals',
    auth: 'public',
    tenancy: 'none',
    params: idParams,
    body: linkDecisionBody,
    response: approvalView,
  })
  async decide(
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof linkDecisionBody>,
  ): Promise<z.infer<typeof approvalView>> {
    return toView(
      await this.approvals.decideWithLink(body.link, params.id, body.decision, body.reason ?? null),
      this.approvals.reviewUrl(params.id),
    );
  }

  @Route({
    method: 'GET',
    path: '/review/:id/session',
    summary: 'The request, for a person signed in on the review page',
    description:
      'Authenticated by the session cookie of the identity-provider sign-in (not a bearer token); the same visibility as `GET /v1/approvals/{id}`.',
    tag: 'approvals',
    auth: 'public',
    tenancy: 'none',
    params: idParams,
    response: approvalView,
  })
  async sessionRequest(
    @Param() params: z.infer<typeof idParams>,
    @Req() request: FastifyRequest,
  ): Promise<z.infer<typeof approvalView>> {
    const caller = await this.browserSessions.principal(request);
    return toView(await this.approvals.get(caller, params.id), this.approvals.reviewUrl(params.id));
  }

  @Route({
    method: 'POST',
    path: '/review/:id/session/decision',
    summary: 'Decide as the person signed in on the review page',
    description: `Authenticated by the session cookie; the \`${CSRF_HEADER}\` header must carry the token the page was served with. The same rules as \`POST /v1/approvals/{id}/approve\`: only the route's approvers, never the requester.`,
    tag: 'approvals',
    auth: 'public',
    tenancy: 'none',
    params: idParams,
    body: sessionDecisionBody,
    response: approvalView,
  })
  async sessionDecide(
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof sessionDecisionBody>,
    @Req() request: FastifyRequest,
  ): Promise<z.infer<typeof approvalView>> {
    const caller = await this.browserSessions.principalForChange(request);
    return toView(
      await this.approvals.decide(caller, params.id, body.decision, body.reason ?? null, 'page'),
      this.approvals.reviewUrl(params.id),
    );
  }
}
