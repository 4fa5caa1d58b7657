import { hash } from 'node:crypto';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { CredentialResolvers, Principal, PrincipalCache, PrincipalResolver } from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { Clock } from '@aileron/clock';
import { UnauthenticatedError } from '@aileron/errors';
import { AuthChallenges } from '@aileron/http';
import { mcpChallenge } from './domain/resource';
import { OauthProvider } from './oauth-provider.service';
import { OauthRepository } from './oauth.repository';

/** oidc-provider's opaque tokens: 256 random bits, 43 base64url characters, none of our prefixes' length or shape */
const ACCESS_TOKEN = /^[A-Za-z0-9_-]{43}$/;
const TOUCH_EVERY_MS = 60_000;
// an access token is the credential: it names its tenant once it is found
const AUTHENTICATION = SystemScopes.system('oauth access token');

/**
 * OAuth access tokens on the MCP endpoints: the token is looked up (it is
 * opaque, kept only as a hash), its consent must still stand, and the caller
 * is the person who consented, as they are now (deactivated: refused;
 * membership gone: no access), restricted to the one workspace whose MCP
 * endpoint is the token's audience. Cached like every principal: revocation,
 * offboarding and membership changes drop the cache on every replica.
 */
@Injectable()
export class OauthAccessTokens implements OnModuleInit {
  private readonly logger = new Logger('OauthAccessTokens');

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly resolvers: CredentialResolvers,
    private readonly challenges: AuthChallenges,
    private readonly provider: OauthProvider,
    private readonly repository: OauthRepository,
    private readonly principals: PrincipalResolver,
    private readonly cache: PrincipalCache,
    private readonly clock: Clock,
  ) {}

  onModuleInit(): void {
    this.resolvers.register({ shape: ACCESS_TOKEN, resolve: (token) => this.resolve(token) });
    // every 401 of an MCP endpoint tells the client where to learn how to get a token (RFC 9728 § 5.1)
    this.challenges.add((path, tokenSent) => mcpChallenge(this.config.publicUrl, path, tokenSent));
  }

  async resolve(token: string): Promise<Principal> {
    const cached = await this.cache.principal(`oauth:${hash('sha256', token, 'hex')}`, async () => {
      const provider = await this.provider.provider();
      const accessToken = await provider.AccessToken.find(token);
      if (!accessToken?.exp)
        throw new UnauthenticatedError(
          'The access token is not valid: it has expired or was revoked. Refresh it, or sign in again',
          'TOKEN_INVALID',
        );
      const grant = accessToken.grantId
        ? await this.repository.findGrantByProviderGrant(AUTHENTICATION, accessToken.grantId)
        : null;
      if (!grant) throw new UnauthenticatedError('The access token was revoked; sign in again', 'TOKEN_REVOKED');
      const audience = accessToken.aud === undefined ? [] : [accessToken.aud].flat();
      if (!audience.includes(grant.resource))
        throw new UnauthenticatedError('The access token is not valid', 'TOKEN_INVALID');
      const person = await this.principals.byReference(grant.organizationId, 'user', grant.userId);
      return {
        principal: {
          ...person,
          restrictedToWorkspaceId: grant.workspaceId,
          oauthClient: {
            id: grant.id,
            clientId: grant.clientId,
            clientName: grant.clientName,
            workspaceSlug: grant.workspaceSlug,
            resource: grant.resource,
          },
        },
        expiresAt: new Date(accessToken.exp * 1000),
        lastUsedAt: grant.lastUsedAt,
      };
    });
    const now = this.clock.date();
    if (cached.expiresAt && cached.expiresAt <= now)
      throw new UnauthenticatedError('The access token has expired; refresh it', 'TOKEN_EXPIRED');
    if (!cached.lastUsedAt || now.getTime() - cached.lastUsedAt.getTime() > TOUCH_EVERY_MS) {
      cached.lastUsedAt = now;
      const grant = cached.principal.oauthClient!;
      // off the request path: when a client was last used is for the connected clients' list
      this.repository
        .touchGrant(SystemScopes.organization(cached.principal.organizationId), grant.id, now)
        .catch((error: unknown) => this.logger.warn({ err: error }, 'could not record a connected client’s use'));
    }
    return cached.principal;
  }
}
