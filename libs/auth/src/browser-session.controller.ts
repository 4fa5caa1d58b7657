import { Body, Controller, Inject, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { ForbiddenError, UnauthenticatedError } from '@aileron/errors';
import { Route } from '@aileron/http';
import { hashToken } from './domain/api-token';
import { clearCookie, CSRF_HEADER, BROWSER_SESSION_COOKIE, BROWSER_SESSION_PATH } from './domain/browser-session';
import type { Principal } from './domain/principal';
import { Caller } from './auth.decorators';
import { AccessService } from './access.service';
import { AuthRepository } from './auth.repository';
import { BrowserSessions } from './browser-sessions.service';
import { SIGN_IN_LINK_TTL_SECONDS, SignInLinks } from './sign-in-links.service';

const sessionView = z.object({
  principal: z.object({ kind: z.enum(['api_token', 'user', 'gateway', 'session']), id: z.string(), name: z.string() }),
  organization: z.object({ id: z.string(), slug: z.string() }),
  csrf: z.string().describe(`the token every change made with this session carries in \`${CSRF_HEADER}\``),
});
const optionsView = z.object({
  sign_in_link: z.boolean().describe('embedded mode: `npm start` prints a one-time sign-in link'),
});
const linkBody = z.object({ code: z.string().min(1).max(200) });
const newLink = z.object({ url: z.string(), expires_at: z.string() });
const signedOut = z.object({ sessions_ended: z.number().int() });

/**
 * The web console's browser session: what the page needs to know about it
 * (who, and the CSRF token its changes carry), the embedded mode's one-time
 * sign-in link, and signing out. The session itself is the one the
 * organisation's identity provider opens (OidcSignIn); the API accepts its
 * cookie (AuthGuard), with the CSRF token on every change.
 */
@Controller()
export class BrowserSessionController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly browserSessions: BrowserSessions,
    private readonly links: SignInLinks,
    private readonly repository: AuthRepository,
    private readonly access: AccessService,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/auth/session',
    summary: "The browser session: who is signed in, and the CSRF token the console's changes carry",
    description:
      'Authenticated by the session cookie only. Another site cannot read the answer (no CORS), so the CSRF token stays with pages of this origin.',
    tag: 'auth',
    auth: 'public',
    tenancy: 'none',
    response: sessionView,
  })
  async session(
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<z.infer<typeof sessionView>> {
    const session = await this.browserSessions.peek(request);
    if (!session) throw new UnauthenticatedError('No browser session: sign in', 'SESSION_REQUIRED');
    void reply.header('cache-control', 'no-store');
    const { principal } = session;
    return {
      principal: { kind: principal.kind, id: principal.id, name: principal.name },
      organization: { id: principal.organizationId, slug: principal.organizationSlug },
      csrf: session.csrf,
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/auth/sign-in-options',
    summary: 'How a person may sign in to the console here',
    tag: 'auth',
    auth: 'public',
    tenancy: 'none',
    response: optionsView,
  })
  options(): z.infer<typeof optionsView> {
    return { sign_in_link: this.links.available };
  }

  @Route({
    method: 'POST',
    path: '/v1/auth/sign-in-link',
    summary: 'Exchange the code of a one-time sign-in link for a browser session (embedded mode)',
    description: `The code works once and for ${SIGN_IN_LINK_TTL_SECONDS / 60} minutes; the answer sets the session cookie (HttpOnly, SameSite=Lax) of the machine's owner.`,
    tag: 'auth',
    auth: 'public',
    tenancy: 'none',
    body: linkBody,
    status: 204,
  })
  async redeem(
    @Body() body: z.infer<typeof linkBody>,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<void> {
    // another site must not sign this browser in to a session of its choosing
    this.sameOrigin(request);
    const cookie = await this.links.redeem(body.code, this.secure(request));
    void reply.header('set-cookie', cookie).header('cache-control', 'no-store');
  }

  @Route({
    method: 'POST',
    path: '/v1/auth/sign-in-links',
    summary: 'A new one-time sign-in link for the console (embedded mode, the owner)',
    description:
      'For when the link `npm start` printed has expired: `curl -X POST -H "Authorization: Bearer $(cat .aileron/admin-token)" …/v1/auth/sign-in-links`.',
    tag: 'auth',
    permission: 'organization.manage',
    tenancy: 'organization',
    response: newLink,
    status: 201,
  })
  mint(@Caller() caller: Principal): z.infer<typeof newLink> {
    const { url, expiresAt } = this.links.mint(caller.organizationId, this.config.publicUrl);
    return { url, expires_at: expiresAt.toISOString() };
  }

  @Route({
    method: 'POST',
    path: '/v1/auth/sign-out',
    summary: "End this browser's session",
    description: `The session cookie and the \`${CSRF_HEADER}\` header; the cookie is cleared.`,
    tag: 'auth',
    auth: 'public',
    tenancy: 'none',
    response: signedOut,
  })
  async signOut(
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<z.infer<typeof signedOut>> {
    const principal = await this.browserSessions.principalForChange(request);
    await this.repository.deleteBrowserSession(
      this.access.callerOrganization(principal),
      hashToken(this.browserSessions.token(request)!),
    );
    void reply.header('set-cookie', clearCookie(BROWSER_SESSION_COOKIE, BROWSER_SESSION_PATH, this.secure(request)));
    return { sessions_ended: 1 };
  }

  @Route({
    method: 'POST',
    path: '/v1/auth/sign-out-everywhere',
    summary: 'End every browser session of the signed-in person, on every device',
    tag: 'auth',
    auth: 'public',
    tenancy: 'none',
    response: signedOut,
  })
  async signOutEverywhere(
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<z.infer<typeof signedOut>> {
    const principal = await this.browserSessions.principalForChange(request);
    const ended = await this.repository.deleteBrowserSessionsOfUser(
      this.access.callerOrganization(principal),
      principal.id,
    );
    void reply.header('set-cookie', clearCookie(BROWSER_SESSION_COOKIE, BROWSER_SESSION_PATH, this.secure(request)));
    return { sessions_ended: ended };
  }

  private sameOrigin(request: FastifyRequest): void {
    const origin = request.headers.origin;
    if (
      origin !== undefined &&
      origin !== new URL(this.config.publicUrl).origin &&
      origin !== `${request.protocol}://${request.host}`
    ) {
      throw new ForbiddenError('The request comes from another site', 'CSRF_ORIGIN_MISMATCH');
    }
  }

  private secure(request: FastifyRequest): boolean {
    return request.protocol === 'https' || this.config.publicUrl.startsWith('https:');
  }
}
