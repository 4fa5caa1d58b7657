import { randomBytes } from 'node:crypto';
import { Body, Controller, Param, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BrowserSessions } from '@aileron/auth';
import { Route } from '@aileron/http';
import { consentPage, pageHeaders, refusalPage } from './domain/pages';
import { OauthConsent } from './oauth-consent.service';

const interactionParams = z.object({
  uid: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'an interaction id'),
});
const confirmBody = z.object({
  csrf: z.string().max(200),
  decision: z.enum(['allow', 'deny']),
});

const EXPIRED = {
  title: 'This sign-in request is over',
  message:
    'It expired, was already answered, or was started in another browser. Start again from your MCP client: it opens a new one.',
};

/**
 * The person's side of an MCP client's authorization request: the console
 * sign-in (the organisation's identity provider, or the embedded mode's
 * link) if the browser has no session, then the consent page naming the
 * client, the workspace and what the client may do. Plain server-rendered
 * HTML, no script, its own strict Content-Security-Policy.
 */
@Controller()
export class OauthInteractionController {
  constructor(
    private readonly consent: OauthConsent,
    private readonly browserSessions: BrowserSessions,
  ) {}

  @Route({
    method: 'GET',
    path: '/oauth/interaction/:uid',
    summary: 'The consent page of an MCP client’s authorization request',
    description:
      'Where the authorization endpoint sends the browser. Without a console session it redirects to the console’s sign-in, which returns here; with one, it shows the client, the workspace and what the client may do, with Allow and Deny.',
    tag: 'oauth',
    auth: 'public',
    tenancy: 'none',
    params: interactionParams,
    produces: 'text/html',
    example: { params: { uid: 'interaction-id' } },
  })
  async page(
    @Param() params: z.infer<typeof interactionParams>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const interaction = await this.consent.interaction({ req: request.raw, res: reply.raw }, params.uid);
    if (!interaction)
      return this.send(reply, 400, (nonce) => refusalPage({ ...EXPIRED, uid: null, csrf: null }, nonce));
    const session = await this.browserSessions.peek(request);
    if (!session) {
      const back = `/oauth/interaction/${params.uid}`;
      void reply
        .header('cache-control', 'no-store')
        .redirect(`/sign-in?${new URLSearchParams({ return_to: back })}`, 303);
      return;
    }
    const prepared = await this.consent.prepare(session.principal, interaction);
    if ('refused' in prepared)
      return this.send(reply, 403, (nonce) =>
        refusalPage(
          { title: 'Access cannot be given', message: prepared.refused, uid: params.uid, csrf: session.csrf },
          nonce,
        ),
      );
    return this.send(reply, 200, (nonce) => consentPage({ ...prepared.view, csrf: session.csrf }, nonce));
  }

  @Route({
    method: 'POST',
    path: '/oauth/interaction/:uid/confirm',
    summary: 'Allow or deny an MCP client’s authorization request',
    description:
      'The consent page’s form: the browser session with its CSRF token (the `csrf` field). Redirects (303) back to the authorization endpoint, which sends the browser to the client with a code, or with `error=access_denied`.',
    tag: 'oauth',
    auth: 'public',
    tenancy: 'none',
    params: interactionParams,
    body: confirmBody,
    accepts: ['form'],
    status: 303,
    produces: 'text/html',
    example: { params: { uid: 'interaction-id' }, body: { csrf: 'csrf-token', decision: 'allow' } },
  })
  async confirm(
    @Param() params: z.infer<typeof interactionParams>,
    @Body() body: z.infer<typeof confirmBody>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // another site can make a browser post this form; only our page has the token
    const principal = await this.browserSessions.principalForChange(request, body.csrf);
    const exchange = { req: request.raw, res: reply.raw };
    const interaction = await this.consent.interaction(exchange, params.uid);
    if (!interaction)
      return this.send(reply, 400, (nonce) => refusalPage({ ...EXPIRED, uid: null, csrf: null }, nonce));
    let location: string;
    if (body.decision === 'deny') {
      location = await this.consent.deny(exchange, 'The person did not allow access');
    } else {
      const prepared = await this.consent.prepare(principal, interaction);
      location =
        'refused' in prepared
          ? await this.consent.deny(exchange, prepared.refused)
          : await this.consent.allow(principal, prepared, exchange);
    }
    void reply.header('cache-control', 'no-store').redirect(location, 303);
  }

  private send(reply: FastifyReply, status: number, render: (nonce: string) => string): void {
    const nonce = randomBytes(16).toString('base64');
    void reply.status(status).headers(pageHeaders(nonce)).send(render(nonce));
  }
}
