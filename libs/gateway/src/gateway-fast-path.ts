import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable } from '@nestjs/common';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { FastPaths, RequestLog, requestIdFor } from '@aileron/http';
import { GATEWAY_TOKEN_PREFIX } from './domain/credentials';
import { ifNoneMatchHits } from './domain/etag';
import { BundlesService } from './bundles.service';
import { GatewayCredentials } from './gateway-credentials.service';

const CATALOG = '/v1/gateway/catalog';
const POLICY = '/v1/gateway/policy';
const BEARER = `Bearer ${GATEWAY_TOKEN_PREFIX}`;
const CACHE_CONTROL = 'private, no-cache';

/**
 * Gateways poll catalog and policy, and almost every poll ends in 304. This
 * answers those from memory, in front of the framework: the credential this
 * replica checked recently and the body it prepared for the current inputs.
 * When anything is not in memory or does not match (first poll, a change, a
 * bad or unknown token) it steps aside and the routes answer in full, filling
 * the caches for the next poll. It keeps the routes' contract: same headers,
 * request id, and the same request log and metrics (RequestLog).
 */
@Injectable()
export class GatewayFastPath {
  private readonly catalogAnswered: (request: IncomingMessage, requestId: string) => void;
  private readonly policyAnswered: (request: IncomingMessage, requestId: string) => void;

  constructor(
    fastPaths: FastPaths,
    private readonly credentials: GatewayCredentials,
    private readonly bundles: BundlesService,
    requests: RequestLog,
  ) {
    this.catalogAnswered = requests.atOnce('GET', CATALOG, 304);
    this.policyAnswered = requests.atOnce('GET', POLICY, 304);
    fastPaths.add((request, response) => this.answer(request, response));
  }

  private answer(request: IncomingMessage, response: ServerResponse): boolean {
    if (request.method !== 'GET') return false;
    const path = request.url;
    if (path !== CATALOG && path !== POLICY) return false;
    // The three headers a poll needs, from the raw list: building
    // `request.headers` would cost more than the rest of the answer. A header
    // given twice is left to the route, which knows how each one combines.
    let ifNoneMatch: string | undefined;
    let authorization: string | undefined;
    let given: string | undefined;
    const raw = request.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === 13) {
        if (isHeader(name, 'if-none-match')) {
          if (ifNoneMatch !== undefined) return false;
          ifNoneMatch = raw[i + 1]!;
        } else if (isHeader(name, 'authorization')) {
          if (authorization !== undefined) return false;
          authorization = raw[i + 1]!;
        }
      } else if (name.length === 12 && isHeader(name, 'x-request-id')) {
        if (given !== undefined) return false;
        given = raw[i + 1]!;
      }
    }
    if (ifNoneMatch === undefined || authorization === undefined || !authorization.startsWith(BEARER)) return false;
    const principal = this.credentials.peek(authorization.slice(7).trim());
    const gateway = principal?.gateway;
    if (!principal || !gateway) return false;
    const scope = SystemScopes.workspace(
      principal.organizationId,
      { id: gateway.workspaceId, slug: gateway.workspaceSlug },
      'member',
    );
    const prepared =
      path === CATALOG ? this.bundles.peekCatalog(principal, scope) : this.bundles.peekPolicyBundle(scope);
    if (!prepared || !ifNoneMatchHits(ifNoneMatch, prepared.etag)) return false;
    const requestId = requestIdFor(given);
    // the flat form skips enumerating an object's keys
    response.writeHead(304, ['x-request-id', requestId, 'etag', prepared.etag, 'cache-control', CACHE_CONTROL]);
    response.end();
    (path === CATALOG ? this.catalogAnswered : this.policyAnswered)(request, requestId);
    return true;
  }
}

/** Header names are case-insensitive; clients mostly send them in lower case already. */
function isHeader(name: string, lower: string): boolean {
  return name === lower || name.toLowerCase() === lower;
}
