import {
  CanActivate,
  ExecutionContext,
  Injectable,
  OnApplicationBootstrap,
  UnauthorizedException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard as PassportAuthGuard } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { DomainError, ForbiddenError, UnauthenticatedError } from '@aileron/errors';
import { ROUTE_METADATA, RouteCatalog, RouteDefinition } from '@aileron/http';
import { oauthTokenElsewhere, type Principal } from './domain/principal';
import { PERMISSIONS, Permission } from './domain/roles';
import { AccessService } from './access.service';
import { JWT_STRATEGY } from './jwt.strategy';
import { BearerCredentials } from './bearer-credentials';
import { BrowserSessions } from './browser-sessions.service';
import { SystemScopes } from './scope-issuer';
import type { OrgScope, WorkspaceScope } from './scope';

export interface AuthenticatedRequest extends FastifyRequest {
  principal?: Principal;
  scope?: OrgScope | WorkspaceScope;
  /** the credential the principal came from (a bearer token or the browser session's), for streams that judge it again later */
  credential?: string;
}

/** a browser session's request that changes nothing; any other carries the CSRF token */
const SAFE_METHODS = new Set(['GET', 'HEAD']);

const JwtGuard = PassportAuthGuard(JWT_STRATEGY);

/**
 * Global: every route is authenticated unless its @Route says `auth: 'public'`,
 * and the permission the route declares is checked here, once, before the
 * handler or validation runs. The app refuses to start if a protected route
 * names no permission.
 */
@Injectable()
export class AuthGuard implements CanActivate, OnApplicationBootstrap {
  private readonly jwt = new JwtGuard();

  constructor(
    private readonly reflector: Reflector,
    private readonly bearer: BearerCredentials,
    private readonly access: AccessService,
    private readonly routes: RouteCatalog,
    private readonly browserSessions: BrowserSessions,
  ) {}

  onApplicationBootstrap(): void {
    for (const route of this.routes.all()) {
      if (
        route.auth === 'public' ||
        route.tenancy === 'caller' ||
        route.tenancy === 'platform' ||
        route.tenancy === 'gateway'
      )
        continue;
      if (!route.permission || !(route.permission in PERMISSIONS)) {
        throw new Error(`${route.method} ${route.path} is protected but names no known permission`);
      }
      if (route.tenancy === 'workspace' && !route.path.includes(':ws')) {
        throw new Error(`${route.method} ${route.path} is workspace-scoped but has no :ws parameter`);
      }
    }
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const route = this.reflector.get<RouteDefinition | undefined>(ROUTE_METADATA, context.getHandler());
    if (route?.auth === 'public') return true;
    if (!route) throw new ForbiddenError('This endpoint is not declared with @Route');
    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const principal = await this.authenticate(context, request);
    request.principal = principal;
    // an OAuth access token's audience is one workspace's MCP endpoint: the REST API is another resource (RFC 8707)
    if (principal.oauthClient && !route.oauth) throw oauthTokenElsewhere(principal.oauthClient.resource);
    // a sandboxed agent's token reaches only what a route declares for its caps, whatever its creator may do
    if (principal.agentSession && (!route.capability || !principal.agentSession.caps.has(route.capability))) {
      throw new ForbiddenError(
        route.capability
          ? `This session token lacks the "${route.capability}" capability`
          : 'A session token may not call this endpoint',
        'CAPABILITY_REQUIRED',
      );
    }
    if (route.tenancy === 'platform' && !principal.platformOperator) {
      throw new ForbiddenError('Only platform operators may do this', 'PLATFORM_OPERATOR_REQUIRED');
    }
    // a gateway is a machine on a developer's laptop: it reaches only what is declared for it, never a decision or a grant
    if (principal.kind === 'gateway' && route.tenancy !== 'gateway' && !route.gateways) {
      throw new ForbiddenError('A gateway token may not call this endpoint', 'GATEWAY_TOKEN_NOT_ALLOWED');
    }
    if (route.tenancy === 'gateway') {
      // the gateway API acts in the one workspace the gateway enrolled into, and only for gateways
      if (principal.kind !== 'gateway' || !principal.gateway)
        throw new ForbiddenError('This endpoint takes a gateway token', 'GATEWAY_TOKEN_REQUIRED');
      request.scope = SystemScopes.workspace(
        principal.organizationId,
        { id: principal.gateway.workspaceId, slug: principal.gateway.workspaceSlug },
        'member',
      );
      return true;
    }
    if (route.permission) {
      const permission = route.permission as Permission;
      if (route.tenancy === 'workspace') {
        const slug = (request.params as Record<string, unknown>).ws;
        request.scope = await this.access.workspace(principal, typeof slug === 'string' ? slug : '', permission);
      } else {
        request.scope = this.access.organization(principal, permission);
      }
    }
    return true;
  }

  private async authenticate(context: ExecutionContext, request: AuthenticatedRequest): Promise<Principal> {
    const browserSession =
      request.headers.authorization === undefined ? this.browserSessions.token(request) : undefined;
    if (browserSession !== undefined) {
      // the web console: the browser session's cookie, with the page's CSRF token on every change
      request.credential = browserSession;
      return SAFE_METHODS.has(request.method)
        ? this.browserSessions.principal(request)
        : this.browserSessions.principalForChange(request);
    }
    const token = this.bearer.tokenOf(request.headers.authorization);
    if (token === undefined) throw new UnauthenticatedError('Send "Authorization: Bearer <token>"');
    request.credential = token;
    const principal = this.bearer.resolve(token);
    if (principal) return principal;
    if (token.split('.').length !== 3) throw new UnauthenticatedError('The token is malformed', 'TOKEN_INVALID');
    try {
      await this.jwt.canActivate(context);
    } catch (error) {
      if (error instanceof DomainError) throw error;
      if (error instanceof UnauthorizedException)
        throw new UnauthenticatedError('The JWT is not valid or has expired', 'TOKEN_INVALID');
      throw error;
    }
    return (request as unknown as { user: Principal }).user;
  }
}
