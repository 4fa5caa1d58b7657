import { Body, Controller, Param, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BrowserSessions, CSRF_HEADER } from '@aileron/auth';
import { Route } from '@aileron/http';
import { ApprovalsService } from './approvals.service';
import { approvalView, idParams, linkDecisionBody, linkQuery, sessionDecisionBody, toView } from './approvals.schemas';

const reviewQuery = linkQuery.partial();

/**
 * The review link (`review_url`) and what may be done from it without a
 * bearer token: with a one-time link (the link is the credential), or with
 * the browser-session cookie a sign-in through the organisation's identity
 * provider left (changes also carry the session's CSRF token). The link opens
 * the request in the web console, the view its Approvals inbox shows.
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
    summary: "An approval request's review link: opens the request in the web console",
    description:
      "Redirects to the console's view of the request, `/approvals/{id}`. With `?link=` (a one-time link) to `/approvals/{id}#link=…`: the console shows and decides with the link, which the fragment keeps out of every later request. With a browser session straight there; without one, with `?organization=<slug>` when the organisation's identity provider signs people in, which the page offers (beside a pasted token).",
    tag: 'approvals',
    auth: 'public',
    tenancy: 'none',
    params: idParams,
    query: reviewQuery,
    status: 302,
    produces: 'text/plain',
  })
  async page(
    @Param() params: z.infer<typeof idParams>,
    @Query() query: z.infer<typeof reviewQuery>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    void reply
      .header('cache-control', 'no-store')
      .header('referrer-policy', 'no-referrer')
      .redirect(await this.consoleView(params.id, query.link, request), 302);
  }

  /** Where the console shows the request, with what the page needs to know how its reader may authenticate. */
  private async consoleView(id: string, link: string | undefined, request: FastifyRequest): Promise<string> {
    const view = `/approvals/${id}`;
    if (link) return `${view}#${new URLSearchParams({ link })}`;
    const [browserSession, signIn] = await Promise.all([
      this.browserSessions.peek(request),
      this.approvals.signInOption(id),
    ]);
    return browserSession || !signIn ? view : `${view}?${new URLSearchParams({ organization: signIn.organization })}`;
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
