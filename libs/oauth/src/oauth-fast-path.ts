import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable } from '@nestjs/common';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { DomainError } from '@aileron/errors';
import { FastPaths, RequestLog, requestIdFor, writeProblem } from '@aileron/http';
import { OAUTH_PREFIX, OauthProvider } from './oauth-provider.service';
import { OauthRepository } from './oauth.repository';

/** RFC 8414 (and OpenID Connect discovery, which it extends) for an issuer without a path */
const METADATA = new Set(['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']);
/** the provider's discovery route, below its mount */
const DISCOVERY = '/.well-known/openid-configuration';
const INTERACTION = `${OAUTH_PREFIX}/interaction/`;
/** the pool's own side as an OAuth client of upstream servers (libs/connections): routes, not the provider's */
const CONNECTIONS = `${OAUTH_PREFIX}/connections/`;
const REGISTRATION = `${OAUTH_PREFIX}/reg`;
// registration comes before any tenant: whether any organisation takes such clients at all
const REGISTRATIONS = SystemScopes.system('oauth client registration');

/**
 * oidc-provider's endpoints, in front of the framework: it is a Koa app that
 * reads its own bodies (form posts, JSON registrations) and writes its own
 * answers in OAuth's terms, so Fastify's routing and body parsing would only
 * be in the way. The authorization server's metadata at the root's well-known
 * paths is its discovery document. The interaction pages (sign-in and consent)
 * are routes, since they need the browser session and the route catalogue.
 */
@Injectable()
export class OauthFastPath {
  constructor(
    fastPaths: FastPaths,
    private readonly provider: OauthProvider,
    private readonly repository: OauthRepository,
    private readonly requests: RequestLog,
  ) {
    fastPaths.add((request, response) => this.take(request, response));
  }

  private take(request: IncomingMessage, response: ServerResponse): boolean {
    const url = request.url ?? '/';
    const path = url.split('?', 1)[0]!;
    if (METADATA.has(path) && (request.method === 'GET' || request.method === 'OPTIONS')) {
      void this.serve(request, response, path, DISCOVERY, `${OAUTH_PREFIX}${DISCOVERY}`);
      return true;
    }
    if (!url.startsWith(`${OAUTH_PREFIX}/`) || url.startsWith(INTERACTION) || url.startsWith(CONNECTIONS)) return false;
    void this.serve(request, response, routeOf(path), url.slice(OAUTH_PREFIX.length), url);
    return true;
  }

  private async serve(
    request: IncomingMessage,
    response: ServerResponse,
    route: string,
    path: string,
    original: string,
  ): Promise<void> {
    const requestId = requestIdFor(request.headers['x-request-id']);
    // the provider routes on its own path (below /oauth); the log names the one the client asked for
    const asked = request.url;
    response.once('close', () => void (request.url = asked));
    this.requests.follow(request, response, route, requestId);
    try {
      if (
        request.method === 'POST' &&
        original.split('?', 1)[0] === REGISTRATION &&
        !(await this.repository.anyAllowsDynamicRegistration(REGISTRATIONS))
      )
        throw new RegistrationDisabledError();
      await this.provider.handle(request, response, path, original);
    } catch (error) {
      writeProblem(response, error, requestId);
    }
  }
}

/** The endpoint, as the log and metrics name it: never the query (codes and states ride in it) nor an interaction's id. */
function routeOf(path: string): string {
  const rest = path.slice(OAUTH_PREFIX.length);
  const known = ['/auth', '/token/revocation', '/token', '/reg', '/jwks'].find(
    (endpoint) => rest === endpoint || rest.startsWith(`${endpoint}/`),
  );
  return `${OAUTH_PREFIX}${known ?? '/*'}`;
}

/** In OAuth's terms too (RFC 7591 § 3.2.2), for a client that reads only `error`. */
class RegistrationDisabledError extends DomainError {
  constructor() {
    const detail =
      'Dynamic client registration is not accepted here: no organisation allows it. Use a Client ID Metadata Document (an https client_id), or ask an admin to allow dynamic registration (PUT /v1/organization/oauth-settings).';
    super('OAUTH_REGISTRATION_DISABLED', detail, {
      extensions: { error: 'invalid_client_metadata', error_description: detail },
    });
  }
}
