import { randomBytes } from 'node:crypto';
import { Body, Controller, Param, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { Route } from '@aileron/http';
import { ApprovalsService } from './approvals.service';
import { approvalView, idParams, linkDecisionBody, linkQuery, toView } from './approvals.schemas';
import { reviewPage } from './review-page';

/** The review page and what a one-time link may do (the link is the credential). */
@Controller()
export class ReviewController {
  constructor(private readonly approvals: ApprovalsService) {}

  @Route({
    method: 'GET',
    path: '/review/:id',
    summary: 'The review page of an approval request (HTML)',
    description: 'For a signed-in approver, or with `?link=` a one-time link. The page shows the exact call and decides through the API.',
    tag: 'approvals',
    auth: 'public',
    tenancy: 'none',
    params: idParams,
    produces: 'text/html',
  })
  page(@Param() params: z.infer<typeof idParams>, @Res() reply: FastifyReply): void {
    const nonce = randomBytes(16).toString('base64');
    void reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'`)
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .send(reviewPage(params.id, nonce));
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
  async request(@Param() params: z.infer<typeof idParams>, @Query() query: z.infer<typeof linkQuery>): Promise<z.infer<typeof approvalView>> {
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
  async decide(@Param() params: z.infer<typeof idParams>, @Body() body: z.infer<typeof linkDecisionBody>): Promise<z.infer<typeof approvalView>> {
    return toView(await this.approvals.decideWithLink(body.link, params.id, body.decision, body.reason ?? null), this.approvals.reviewUrl(params.id));
  }
}
