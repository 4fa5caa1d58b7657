import { Injectable, Logger } from '@nestjs/common';
import { UnauthenticatedError } from '@aileron/errors';
import { hashToken, looksLikeApiToken } from './domain/api-token';
import { mapClaims } from './domain/claims';
import type { Principal } from './domain/principal';
import { AuthRepository, TokenRecord, UserRecord } from './auth.repository';
import { JwtKeys, OWN_AUDIENCE } from './jwt-keys.service';
import { SystemScopes } from './scope-issuer';
import { TokensService } from './tokens.service';

const TOUCH_EVERY_MS = 60_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function principalFromToken(token: TokenRecord): Principal {
  return {
    kind: 'api_token',
    id: token.id,
    name: token.name,
    organizationId: token.organizationId,
    organizationSlug: token.organizationSlug,
    orgRole: token.workspaceId ? null : token.role,
    workspaceRoles: new Map(token.workspaceId ? [[token.workspaceId, token.role]] : []),
    restrictedToWorkspaceId: token.workspaceId,
    platformOperator: token.platformOperator,
    tokenId: token.id,
  };
}

function principalFromUser(user: UserRecord): Principal {
  return {
    kind: 'user',
    id: user.id,
    name: user.name ?? user.email ?? user.subject ?? user.id,
    organizationId: user.organizationId,
    organizationSlug: user.organizationSlug,
    orgRole: user.role,
    workspaceRoles: new Map(user.memberships.map((m) => [m.workspaceId, m.role])),
    restrictedToWorkspaceId: null,
    platformOperator: false,
  };
}

/** Turns a credential into a Principal, or says precisely why it cannot. */
@Injectable()
export class PrincipalResolver {
  private readonly logger = new Logger('PrincipalResolver');

  constructor(
    private readonly repository: AuthRepository,
    private readonly keys: JwtKeys,
    private readonly tokens: TokensService,
  ) {}

  async fromApiToken(token: string): Promise<Principal> {
    if (!looksLikeApiToken(token)) throw new UnauthenticatedError('The token is malformed', 'TOKEN_INVALID');
    const record = await this.repository.findTokenByHash(hashToken(token));
    const now = new Date();
    this.assertActive(record, now);
    if (!record.lastUsedAt || now.getTime() - record.lastUsedAt.getTime() > TOUCH_EVERY_MS) {
      // off the request path: last-used is informational, and a write per request would cost
      this.repository.touchToken(record.id, now).catch((error: unknown) => this.logger.warn({ err: error }, 'could not record token use'));
    }
    return principalFromToken(record);
  }

  private assertActive(record: TokenRecord | null, now: Date): asserts record is TokenRecord {
    if (!record) throw new UnauthenticatedError('The token is not valid', 'TOKEN_INVALID');
    if (record.revokedAt) throw new UnauthenticatedError('The token has been revoked', 'TOKEN_REVOKED');
    if (record.expiresAt && record.expiresAt <= now) throw new UnauthenticatedError('The token has expired', 'TOKEN_EXPIRED');
  }

  /** A verified JWT payload (passport-jwt checked signature, expiry and algorithm). */
  async fromJwt(payload: Record<string, unknown>): Promise<Principal> {
    if (payload.iss === this.keys.issuer) return this.fromOwnJwt(payload);
    const issuer = typeof payload.iss === 'string' ? payload.iss : '';
    const provider = await this.repository.findIdentityProviderByIssuer(issuer);
    if (!provider) throw new UnauthenticatedError('The JWT issuer is not a known identity provider', 'TOKEN_INVALID');
    if (provider.audience) {
      const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
      if (!aud.includes(provider.audience)) throw new UnauthenticatedError('The JWT is meant for another audience', 'TOKEN_INVALID');
    }
    const identity = mapClaims(payload, provider);
    if (!identity) throw new UnauthenticatedError(`The JWT has no "${provider.subjectClaim}" claim`, 'TOKEN_INVALID');
    const scope = SystemScopes.organization(provider.organizationId);
    const { id: userId, previousLoginAt } = await this.repository.upsertUserFromIdentity(scope, identity, provider.defaultRole, new Date());
    const user = await this.repository.findUser(scope, userId);
    if (!user) throw new UnauthenticatedError('The user no longer exists', 'TOKEN_INVALID');
    const principal = principalFromUser(user);
    // a JWT the IdP issued after this user's last request is a new sign-in; later requests with it are not
    const issuedAt = typeof payload.iat === 'number' ? payload.iat * 1000 : Date.now();
    if (!previousLoginAt || issuedAt > previousLoginAt.getTime()) await this.tokens.recordLogin(principal, 'oidc', { issuer });
    return principal;
  }

  private async fromOwnJwt(payload: Record<string, unknown>): Promise<Principal> {
    const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (!aud.includes(OWN_AUDIENCE) || typeof payload.sub !== 'string' || typeof payload.org !== 'string') {
      throw new UnauthenticatedError('The JWT is not valid', 'TOKEN_INVALID');
    }
    const scope = SystemScopes.organization(payload.org);
    const [kind, id] = payload.sub.split(':', 2);
    if (!id || !UUID.test(id) || !UUID.test(payload.org)) throw new UnauthenticatedError('The JWT is not valid', 'TOKEN_INVALID');
    if (kind === 'token' && id) {
      // a JWT minted from an API token dies with the token
      const record = await this.repository.findTokenById(scope, id);
      this.assertActive(record, new Date());
      return principalFromToken(record);
    }
    if (kind === 'user' && id) {
      const user = await this.repository.findUser(scope, id);
      if (!user) throw new UnauthenticatedError('The user no longer exists', 'TOKEN_INVALID');
      return principalFromUser(user);
    }
    throw new UnauthenticatedError('The JWT is not valid', 'TOKEN_INVALID');
  }
}
