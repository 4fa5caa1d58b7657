import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '@aileron/clock';
import { ErrorCodeWithStatus, ForbiddenError, UnauthenticatedError } from '@aileron/errors';
import { hashToken, looksLikeApiToken } from './domain/api-token';
import { looksLikeBrowserSessionToken } from './domain/browser-session';
import { mapClaims, MappedIdentity } from './domain/claims';
import { audienceRefusal, trustedEmail } from './domain/identity-provider';
import type { Principal } from './domain/principal';
import { AuthRepository, IdentityProviderRecord, TokenRecord, UserRecord } from './auth.repository';
import { JwtKeys, OWN_AUDIENCE } from './jwt-keys.service';
import { CachedPrincipal, PrincipalCache } from './principal-cache.service';
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

/** A deactivated person's credentials and sign-ins, whichever way they come (docs/auth.md#offboarding). */
export function userDeactivated(): UnauthenticatedError {
  return new UnauthenticatedError(
    'This person has been deactivated in the organisation; an admin may reactivate them',
    'USER_DEACTIVATED',
  );
}

/** Nothing of a deactivated person authenticates: their organisation role would otherwise reach every workspace. */
function principalFromUser(user: UserRecord): Principal {
  if (user.deactivatedAt) throw userDeactivated();
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
// a credential names its tenant only once it is found
const AUTHENTICATION = SystemScopes.system('authentication');

@Injectable()
export class PrincipalResolver {
  private readonly logger = new Logger('PrincipalResolver');

  constructor(
    private readonly repository: AuthRepository,
    private readonly keys: JwtKeys,
    private readonly tokens: TokensService,
    private readonly cache: PrincipalCache,
    private readonly clock: Clock,
  ) {}

  async fromApiToken(token: string): Promise<Principal> {
    if (!looksLikeApiToken(token)) throw new UnauthenticatedError('The token is malformed', 'TOKEN_INVALID');
    const hash = hashToken(token);
    const cached = await this.cache.principal(`token-hash:${hash}`, async () => {
      const record = await this.repository.findTokenByHash(AUTHENTICATION, hash);
      this.assertActive(record, this.clock.date());
      return { principal: principalFromToken(record), expiresAt: record.expiresAt, lastUsedAt: record.lastUsedAt };
    });
    const now = this.clock.date();
    this.assertUnexpired(cached, now);
    if (!cached.lastUsedAt || now.getTime() - cached.lastUsedAt.getTime() > TOUCH_EVERY_MS) {
      // the cached entry remembers the touch, so requests served from memory stay throttled too
      cached.lastUsedAt = now;
      // off the request path: last-used is informational, and a write per request would cost
      this.repository
        .touchToken(SystemScopes.organization(cached.principal.organizationId), cached.principal.id, now)
        .catch((error: unknown) => this.logger.warn({ err: error }, 'could not record token use'));
    }
    return cached.principal;
  }

  private assertActive(record: TokenRecord | null, now: Date): asserts record is TokenRecord {
    if (!record) throw new UnauthenticatedError('The token is not valid', 'TOKEN_INVALID');
    if (record.revokedAt) throw new UnauthenticatedError('The token has been revoked', 'TOKEN_REVOKED');
    this.assertUnexpired(record, now);
  }

  /** On every use: a cached token must not outlive its expiry by the cache's TTL. */
  private assertUnexpired(entry: { expiresAt: Date | null }, now: Date): void {
    if (entry.expiresAt && entry.expiresAt <= now)
      throw new UnauthenticatedError('The token has expired', 'TOKEN_EXPIRED');
  }

  /** A verified JWT payload (passport-jwt checked signature, expiry and algorithm). */
  async fromJwt(payload: Record<string, unknown>): Promise<Principal> {
    if (payload.iss === this.keys.issuer) return this.fromOwnJwt(payload);
    const issuer = typeof payload.iss === 'string' ? payload.iss : '';
    const provider = await this.repository.findIdentityProviderByIssuer(AUTHENTICATION, issuer);
    if (!provider) throw new UnauthenticatedError('The JWT issuer is not a known identity provider', 'TOKEN_INVALID');
    const refusal = audienceRefusal(provider, payload.aud);
    if (refusal) throw new UnauthenticatedError(refusal.detail, refusal.code);
    const issuedAt = typeof payload.iat === 'number' ? new Date(payload.iat * 1000) : this.clock.date();
    const { principal, identity } = await this.signIn(provider, payload, issuedAt, 'TOKEN_INVALID');
    // the JWT itself names the groups: they count for this request whatever was recorded before
    return { ...principal, idpGroups: identity.groups };
  }

  /**
   * The claims of an ID token the browser sign-in verified (signature, issuer,
   * audience = client id, nonce, expiry): the same mapping as an IdP JWT's,
   * and always a new sign-in.
   */
  async fromIdToken(provider: IdentityProviderRecord, claims: Record<string, unknown>): Promise<Principal> {
    return (await this.signIn(provider, claims, null, 'SIGN_IN_ID_TOKEN_INVALID')).principal;
  }

  /** `issuedAt` null: an interactive sign-in happening now. */
  private async signIn(
    provider: IdentityProviderRecord,
    payload: Record<string, unknown>,
    issuedAt: Date | null,
    code: ErrorCodeWithStatus<401>,
  ): Promise<{ principal: Principal; identity: MappedIdentity }> {
    const identity = mapClaims(payload, provider);
    if (!identity)
      throw new UnauthenticatedError(
        `The ${issuedAt ? 'JWT' : 'ID token'} has no "${provider.subjectClaim}" claim`,
        code,
      );
    const scope = SystemScopes.organization(provider.organizationId);
    const now = this.clock.date();
    const upserted = await this.repository.upsertUserFromIdentity(
      scope,
      identity,
      { defaultRole: provider.defaultRole, trustedEmail: trustedEmail(identity, provider.trustUnverifiedEmail) },
      now,
      issuedAt ?? now,
    );
    if ('refused' in upserted) {
      if (upserted.refused === 'deactivated') throw userDeactivated();
      throw new ForbiddenError(
        `The identity provider did not verify the e-mail of this sign-in ("email_verified" is not true), so it is not linked to the user an admin added with that e-mail. ` +
          'Verify the address at the identity provider, or an owner may set `trust_unverified_email` on the identity provider',
        'IDP_EMAIL_NOT_VERIFIED',
      );
    }
    const { id: userId, previousLoginAt, roleChanged } = upserted;
    // the IdP lowered or raised the role: admin JWTs this user holds must follow at once
    if (roleChanged) await this.cache.invalidateAll();
    const user = await this.repository.findUser(scope, userId);
    if (!user) throw new UnauthenticatedError('The user no longer exists', code);
    const principal = principalFromUser(user);
    // a JWT the IdP issued after this user's last request is a new sign-in; later requests with it are not
    if (!issuedAt || !previousLoginAt || issuedAt > previousLoginAt) {
      await this.tokens.recordLogin(principal, 'oidc', {
        issuer: provider.issuer,
        ...(issuedAt ? {} : { via: 'browser' }),
      });
    }
    return { principal, identity };
  }

  /** The cookie of a browser session (the review page's); the groups recorded at its sign-in apply. */
  async fromBrowserSession(token: string): Promise<Principal> {
    const record = looksLikeBrowserSessionToken(token)
      ? await this.repository.findBrowserSession(AUTHENTICATION, hashToken(token))
      : null;
    if (!record) throw new UnauthenticatedError('The sign-in session is not valid; sign in again', 'SESSION_INVALID');
    if (record.expiresAt <= this.clock.date())
      throw new UnauthenticatedError('The sign-in session has expired; sign in again', 'SESSION_EXPIRED');
    const user = await this.repository.findUser(SystemScopes.organization(record.organizationId), record.userId);
    if (!user) throw new UnauthenticatedError('The user no longer exists', 'SESSION_INVALID');
    return principalFromUser(user);
  }

  private async fromOwnJwt(payload: Record<string, unknown>): Promise<Principal> {
    const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (!aud.includes(OWN_AUDIENCE) || typeof payload.sub !== 'string' || typeof payload.org !== 'string') {
      throw new UnauthenticatedError('The JWT is not valid', 'TOKEN_INVALID');
    }
    const scope = SystemScopes.organization(payload.org);
    const [kind, id] = payload.sub.split(':', 2);
    if (!id || !UUID.test(id) || !UUID.test(payload.org))
      throw new UnauthenticatedError('The JWT is not valid', 'TOKEN_INVALID');
    if (kind !== 'token' && kind !== 'user') throw new UnauthenticatedError('The JWT is not valid', 'TOKEN_INVALID');
    return this.byReference(scope.organizationId, kind, id);
  }

  /**
   * The caller a credential derived from a token or user acts as, as they are
   * now: a JWT minted from an API token, an agent session a person or token
   * started. Dies with the token, follows the user's roles.
   */
  async byReference(organizationId: string, kind: 'token' | 'user', id: string): Promise<Principal> {
    const scope = SystemScopes.organization(organizationId);
    const cached = await this.cache.principal(
      `jwt:${organizationId}:${kind}:${id}`,
      async (): Promise<CachedPrincipal> => {
        if (kind === 'token') {
          const record = await this.repository.findTokenById(scope, id);
          this.assertActive(record, this.clock.date());
          return { principal: principalFromToken(record), expiresAt: record.expiresAt };
        }
        const user = await this.repository.findUser(scope, id);
        if (!user) throw new UnauthenticatedError('The user no longer exists', 'TOKEN_INVALID');
        return { principal: principalFromUser(user), expiresAt: null };
      },
    );
    this.assertUnexpired(cached, this.clock.date());
    return cached.principal;
  }
}
