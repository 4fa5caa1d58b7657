import { Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { FastPaths } from '@aileron/http';
import { GATEWAY_TOKEN_PREFIX } from './domain/credentials';
import { ifNoneMatchHits } from './domain/etag';
import { BundlesService } from './bundles.service';
import { GatewayCredentials } from './gateway-credentials.service';

const CATALOG = '/v1/gateway/catalog';
const POLICY = '/v1/gateway/policy';

/**
 * Gateways poll catalog and policy, and almost every poll ends in 304. This
 * answers those from memory, before the rest of the pipeline: the credential
 * this replica checked recently and the body it prepared for the current
 * inputs. When anything is not in memory or does not match (first poll, a
 * change, a bad or unknown token) it steps aside and the routes answer in full,
 * filling the caches for the next poll.
 */
@Injectable()
export class GatewayFastPath {
  constructor(
    fastPaths: FastPaths,
    private readonly credentials: GatewayCredentials,
    private readonly bundles: BundlesService,
  ) {
    fastPaths.add((request, reply) => this.answer(request, reply));
  }

  private answer(request: FastifyRequest, reply: FastifyReply): boolean {
    const ifNoneMatch = request.headers['if-none-match'];
    if (ifNoneMatch === undefined || request.method !== 'GET') return false;
    const url = request.url;
    const path = url === CATALOG || url === POLICY ? url : url.split('?', 1)[0]!;
    if (path !== CATALOG && path !== POLICY) return false;
    const header = request.headers.authorization;
    if (typeof header !== 'string' || !header.startsWith(`Bearer ${GATEWAY_TOKEN_PREFIX}`)) return false;
    const principal = this.credentials.peek(header.slice(7).trim());
    const gateway = principal?.gateway;
    if (!principal || !gateway) return false;
    const scope = SystemScopes.workspace(principal.organizationId, { id: gateway.workspaceId, slug: gateway.workspaceSlug }, 'member');
    const prepared = path === CATALOG ? this.bundles.peekCatalog(principal, scope) : this.bundles.peekPolicyBundle(scope);
    if (!prepared || !ifNoneMatchHits(ifNoneMatch, prepared.etag)) return false;
    void reply.header('x-request-id', request.id).header('etag', prepared.etag).header('cache-control', 'private, no-cache').code(304).send();
    return true;
  }
}
