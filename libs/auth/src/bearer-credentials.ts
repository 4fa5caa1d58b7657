import { Injectable } from '@nestjs/common';
import { API_TOKEN_PREFIX } from './domain/api-token';
import type { Principal } from './domain/principal';
import { CredentialResolvers } from './credential-resolvers';
import { PrincipalResolver } from './principal.resolver';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The bearer credentials checked from the token alone: API tokens and the
 * kinds domains register (gateways, agent sessions' caveat tokens). JWTs need passport,
 * which only the guard runs. One place, so the guard and the paths in front of
 * the framework (the MCP fast path) can never accept different things.
 */
@Injectable()
export class BearerCredentials {
  constructor(
    private readonly principals: PrincipalResolver,
    private readonly resolvers: CredentialResolvers,
  ) {}

  /** The token of an `Authorization: Bearer <token>` header, or undefined. */
  tokenOf(header: string | undefined): string | undefined {
    return header === undefined ? undefined : BEARER.exec(header)?.[1];
  }

  /**
   * The caller a token names when it is of these kinds (rejecting with a
   * DomainError when it is not valid); undefined, at once, when the token is
   * not of these kinds and only the JWT check can judge it.
   */
  resolve(token: string): Promise<Principal> | undefined {
    if (token.startsWith(API_TOKEN_PREFIX)) return this.principals.fromApiToken(token);
    return this.resolvers.find(token)?.resolve(token);
  }
}
