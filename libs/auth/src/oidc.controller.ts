import { Controller, Inject, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { Route } from '@aileron/http';
import { LOGIN_COOKIE, parseCookies } from './domain/browser-session';
import { OidcSignIn } from './oidc-sign-in.service';
import { slug } from './tokens.schemas';

const loginQuery = z.object({
  organization: slug.describe("the organisation's slug: its identity provider signs the person in"),
  return_to: z.string().min(1).max(200).describe('the review page to return to, as a path (`/review/<id>`)'),
});
const callbackQuery = z.object({
  code: z.string().max(4096).optional(),
  state: z.string().max(512).optional(),
  error: z.string().max(256).optional(),
  iss: z.string().max(2048).optional(),
});

/** Browser sign-in through the organisation's identity provider (OpenID Connect, authorization code + PKCE). */
@Controller()
export class OidcController {
  constructor(
    private readonly signIn: OidcSignIn,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/auth/oidc/login',
    summary: "Start a browser sign-in at the organisation's identity provider",
    description:
      "Redirects to the IdP's authorization endpoint (from its discovery document) with state, nonce and a PKCE challenge; a sealed cookie remembers them for the callback. The review page links here.",
    tag: 'auth',
    auth: 'public',
    tenancy: 'none',
    query: loginQuery,
    status: 302,
    produces: 'text/plain',
  })
  async login(
    @Query() query: z.infer<typeof loginQuery>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const { location, cookie } = await this.signIn.begin(query.organization, query.return_to, this.secure(request));
    void reply
      .header('set-cookie', cookie)
      .header('cache-control', 'no-store')
      .header('referrer-policy', 'no-referrer')
      .redirect(location, 302);
  }

  @Route({
    method: 'GET',
    path: '/v1/auth/oidc/callback',
    summary: 'Where the identity provider sends the browser back',
    description:
      "Register this URL (under AILERON_PUBLIC_URL) as the client's redirect URI. Checks state, exchanges the code with the PKCE verifier, verifies the ID token (JWKS signature, issuer, audience = client id, nonce, expiry), then sets a one-hour session cookie for the review page and returns there.",
    tag: 'auth',
    auth: 'public',
    tenancy: 'none',
    query: callbackQuery,
    status: 302,
    produces: 'text/plain',
  })
  async callback(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    // the raw query: every parameter the IdP sent goes to the protocol checks, not only the documented ones
    const query = new URL(request.url, 'http://callback.invalid').searchParams;
    const { location, cookies } = await this.signIn.complete(
      query,
      parseCookies(request.headers.cookie).get(LOGIN_COOKIE),
      this.secure(request),
    );
    void reply
      .header('set-cookie', cookies)
      .header('cache-control', 'no-store')
      .header('referrer-policy', 'no-referrer')
      .redirect(location, 302);
  }

  /** Secure cookies when the browser talks https to us (directly, or to the public URL in front of us). */
  private secure(request: FastifyRequest): boolean {
    return request.protocol === 'https' || this.config.publicUrl.startsWith('https:');
  }
}
