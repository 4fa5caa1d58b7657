import { Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { GATEWAY_TOKEN_PREFIX } from './domain/credentials';
import { ifNoneMatchHits } from './domain/etag';
import { BundlesService } from './bundles.service';
import { GatewayCredentials } from './gateway-credentials.service';

const CONDITIONAL_PATHS = new Set(['/v1/gateway/catalog', '/v1/gateway/policy']);

/**
 * Gateways poll catalog and policy; almost every poll ends in 304. This hook
 * answers those before the Nest pipeline, from the same credential cache and
 * prepared bodies the routes use. Anything else (no If-None-Match, a changed
 * body, a bad token) falls through to the routes, which answer it in full.
 */
@Injectable()
export class GatewayFastPath implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly credentials: GatewayCredentials,
    private readonly bundles: BundlesService,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance?.() as FastifyInstance | undefined;
    if (!fastify?.addHook) return; // the worker process serves no HTTP
    fastify.addHook('onRequest', async (request, reply) => {
      const ifNoneMatch = request.headers['if-none-match'];
      if (request.method !== 'GET' || !ifNoneMatch) return;
      const path = request.url.split('?', 1)[0]!;
      if (!CONDITIONAL_PATHS.has(path)) return;
      const header = request.headers.authorization;
      const token = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7).trim() : '';
      if (!token.startsWith(GATEWAY_TOKEN_PREFIX)) return;
      let principal;
      try {
        principal = await this.credentials.resolve(token);
      } catch {
        return; // the route's guard gives the precise 401
      }
      const gateway = principal.gateway!;
      const scope = SystemScopes.workspace(principal.organizationId, { id: gateway.workspaceId, slug: gateway.workspaceSlug }, 'member');
      const prepared = path === '/v1/gateway/catalog' ? await this.bundles.catalogFor(principal, scope) : await this.bundles.policyBundle(scope);
      if (!ifNoneMatchHits(ifNoneMatch, prepared.etag)) return;
      return reply.header('etag', prepared.etag).header('cache-control', 'private, no-cache').code(304).send();
    });
  }
}
