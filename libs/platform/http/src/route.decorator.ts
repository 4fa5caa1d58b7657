import { applyDecorators, HttpCode, RequestMethod, RequestMapping, SetMetadata } from '@nestjs/common';
import type { z } from 'zod';

/**
 * Which tenant a route acts in. The tenancy matrix test reads this to know
 * what to attack: `workspace` routes take `:ws`, `organization` routes act on
 * the caller's organisation (and resources by id inside it), `gateway` routes
 * act in the one workspace an enrolled gateway's token belongs to.
 */
export type RouteTenancy = 'workspace' | 'organization' | 'platform' | 'caller' | 'gateway' | 'none';

/**
 * What an agent session's caveat token needs to use a route. A route that
 * names none is closed to session tokens: vault, policy, audit, catalog,
 * tokens, members, webhooks and other sessions stay out of a sandbox's reach.
 */
export type RouteCapability = 'actions:list' | 'actions:run' | 'approvals:poll' | 'comms' | 'sandbox:use';

export interface RouteDefinition {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Nest path syntax: `/v1/workspaces/:ws` */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  /** `public` routes skip authentication; everything else requires a bearer token */
  auth?: 'public' | 'bearer';
  /** the action the caller must be allowed, checked by the auth layer's AccessService */
  permission?: string;
  /**
   * An enrolled gateway's token may call this route too (it always may call
   * `tenancy: 'gateway'` routes, and nothing else unless this says so); the
   * permission is still checked against what gateways may do.
   */
  gateways?: true;
  /**
   * An OAuth access token may call this route: the MCP endpoints its audience
   * names (docs/oauth.md). Every other route refuses one (401 OAUTH_TOKEN_WRONG_RESOURCE).
   */
  oauth?: true;
  /** the capability a session caveat token needs here; none: session tokens are refused (403 CAPABILITY_REQUIRED) */
  capability?: RouteCapability;
  tenancy: RouteTenancy;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  /**
   * body formats besides JSON; a YAML body is parsed to the same value JSON
   * would give; `form` (application/x-www-form-urlencoded) is for the forms of
   * server-rendered pages, whose fields are strings
   */
  accepts?: ('yaml' | 'form')[];
  /**
   * `handler`: the body schema documents the shape, but the handler validates
   * it itself (documents with richer errors than zod's, e.g. a policy's
   * problems naming the rule). The body must still be present and an object.
   */
  bodyValidation?: 'schema' | 'handler';
  response?: z.ZodType;
  /** success status; default 200 (201 for POST that creates, set explicitly) */
  status?: number;
  /** a valid request, used by the docs and by the cross-tenant test */
  example?: { params?: Record<string, string>; query?: Record<string, string>; body?: unknown };
  /** response is not JSON (e.g. text/plain metrics, HTML docs) */
  produces?: string;
}

export const ROUTE_METADATA = 'aileron:route';

const METHODS: Record<RouteDefinition['method'], RequestMethod> = {
  GET: RequestMethod.GET,
  POST: RequestMethod.POST,
  PUT: RequestMethod.PUT,
  PATCH: RequestMethod.PATCH,
  DELETE: RequestMethod.DELETE,
};

/**
 * Declares an endpoint once: routing, validation (RouteValidationInterceptor),
 * authentication (the auth guard) and the OpenAPI document all read this.
 */
export function Route(definition: RouteDefinition): MethodDecorator {
  return applyDecorators(
    RequestMapping({ path: definition.path, method: METHODS[definition.method] }),
    HttpCode(definition.status ?? 200),
    SetMetadata(ROUTE_METADATA, definition),
  );
}

export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\/\*$/, '/{path}');
}
