import { Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError, ForbiddenError, UnauthenticatedError } from '@aileron/errors';
import { CSRF_HEADER, csrfMatches, csrfToken, parseCookies, BROWSER_SESSION_COOKIE } from './domain/browser-session';
import type { Principal } from './domain/principal';
import { BrowserKeys } from './browser-keys.service';
import { PrincipalResolver } from './principal.resolver';

/**
 * The review page's browser session, for the routes that accept it (and only
 * those: the cookie is scoped to `/review`). Reads need the cookie; changes
 * also need the page's CSRF token and, when the browser names one, our own
 * origin: another site can make a browser send the cookie, never the token.
 */
@Injectable()
export class BrowserSessions {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly principals: PrincipalResolver,
    private readonly keys: BrowserKeys,
  ) {}

  /** For rendering a page: the signed-in person and the CSRF token to embed, or null (a bad cookie is no session). */
  async peek(request: FastifyRequest): Promise<{ principal: Principal; csrf: string } | null> {
    const token = this.cookie(request);
    if (!token) return null;
    try {
      const principal = await this.principals.fromBrowserSession(token);
      return { principal, csrf: csrfToken(await this.keys.signInKey(), token) };
    } catch (error) {
      if (error instanceof DomainError) return null;
      throw error;
    }
  }

  async principal(request: FastifyRequest): Promise<Principal> {
    const token = this.cookie(request);
    if (!token)
      throw new UnauthenticatedError(
        'Sign in first: this endpoint takes the session of the review page',
        'SESSION_REQUIRED',
      );
    return this.principals.fromBrowserSession(token);
  }

  /** A change a page's form makes: the CSRF token comes as a form field rather than the header. */
  async principalForChange(request: FastifyRequest, formCsrf?: string): Promise<Principal> {
    const principal = await this.principal(request);
    const origin = request.headers.origin;
    if (
      origin !== undefined &&
      origin !== new URL(this.config.publicUrl).origin &&
      origin !== `${request.protocol}://${request.host}`
    ) {
      throw new ForbiddenError('The request comes from another site', 'CSRF_ORIGIN_MISMATCH');
    }
    const given = formCsrf ?? request.headers[CSRF_HEADER];
    if (
      !csrfMatches(await this.keys.signInKey(), this.cookie(request)!, typeof given === 'string' ? given : undefined)
    ) {
      throw new ForbiddenError(
        `The request lacks the page's CSRF token (${CSRF_HEADER}); reload the review page`,
        'CSRF_TOKEN_INVALID',
      );
    }
    return principal;
  }

  /** The session cookie's value, for ending that session. */
  token(request: FastifyRequest): string | undefined {
    return this.cookie(request);
  }

  private cookie(request: FastifyRequest): string | undefined {
    return parseCookies(request.headers.cookie).get(BROWSER_SESSION_COOKIE) || undefined;
  }
}
