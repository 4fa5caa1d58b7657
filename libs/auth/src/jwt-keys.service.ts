import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { decode, sign } from 'jsonwebtoken';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { UnauthenticatedError } from '@aileron/errors';
import { InstallationKeys } from '@aileron/keys';
import { newKey } from '@aileron/crypto';
import { outboundPolicyOf } from '@aileron/net';
import { audienceRefusal } from './domain/identity-provider';
import { AuthRepository } from './auth.repository';
import { idpFetch, IdpFetchError } from './idp-http';
import {
  JWKS_CACHE_DEFAULTS,
  JwksCache,
  JwksKey,
  JwksUnavailableError,
  parseJwks,
  UnknownSigningKeyError,
} from './jwks-cache';
import { SystemScopes } from './scope-issuer';

const SIGNING_KEY = 'jwt-signing-key';
export const OWN_AUDIENCE = 'aileron-control-plane';
const ASYMMETRIC = /^(RS|PS|ES)(256|384|512)$/;

export interface OwnClaims {
  sub: string;
  org: string;
}

/**
 * Picks the key a JWT must verify against: our own HS256 key for tokens we
 * issued, the organisation IdP's JWKS for theirs. The algorithm is tied to the
 * issuer so an HS256 token can never be "signed" with an IdP's public key.
 */
@Injectable()
export class JwtKeys implements OnApplicationBootstrap {
  private readonly logger = new Logger('JwtKeys');
  private ownKey: Promise<Buffer> | undefined;
  private readonly jwks: JwksCache;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repository: AuthRepository,
    private readonly installationKeys: InstallationKeys,
    private readonly clock: Clock,
  ) {
    this.jwks = new JwksCache(
      (url) => this.fetchJwks(url),
      JWKS_CACHE_DEFAULTS,
      () => clock.now(),
    );
  }

  /** A key an older version stored in the clear is sealed at start, not at the first JWT. */
  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.signingKey();
    } catch (error) {
      // not fatal here: the first JWT tries again, and fails with the same reason where a caller sees it
      this.logger.error({ err: error }, 'could not load the JWT signing key');
    }
  }

  get issuer(): string {
    return this.config.publicUrl;
  }

  private signingKey(): Promise<Buffer> {
    this.ownKey ??= this.installationKeys.get(SIGNING_KEY, newKey).catch((error: unknown) => {
      this.ownKey = undefined;
      throw error;
    });
    return this.ownKey;
  }

  async issue(claims: OwnClaims): Promise<{ token: string; expiresAt: Date }> {
    const ttl = this.config.jwtTtlSeconds;
    // iat from the Clock, so the token's exp (iat + ttl) is the expiresAt we report
    const issuedAt = Math.floor(this.clock.now() / 1000);
    const token = sign({ org: claims.org, iat: issuedAt }, await this.signingKey(), {
      algorithm: 'HS256',
      subject: claims.sub,
      issuer: this.issuer,
      audience: OWN_AUDIENCE,
      expiresIn: ttl,
    });
    return { token, expiresAt: new Date((issuedAt + ttl) * 1000) };
  }

  /**
   * What passport-jwt's secretOrKeyProvider asks for. Nothing in the token is
   * verified yet: everything that can refuse it without a fetch comes first.
   */
  async keyFor(rawJwt: string): Promise<string | Buffer> {
    const decoded = decode(rawJwt, { complete: true });
    if (!decoded || typeof decoded.payload === 'string')
      throw new UnauthenticatedError('The token is not a JWT', 'TOKEN_INVALID');
    const { alg, kid } = decoded.header;
    const issuer = decoded.payload.iss;
    if (issuer === this.issuer) {
      if (alg !== 'HS256') throw new UnauthenticatedError('Unexpected JWT algorithm', 'TOKEN_INVALID');
      return this.signingKey();
    }
    const provider = issuer
      ? await this.repository.findIdentityProviderByIssuer(SystemScopes.system('authentication'), issuer)
      : null;
    if (!provider) throw new UnauthenticatedError('The JWT issuer is not a known identity provider', 'TOKEN_INVALID');
    if (!ASYMMETRIC.test(alg)) throw new UnauthenticatedError('Unexpected JWT algorithm', 'TOKEN_INVALID');
    // checked again once the signature is (PrincipalResolver); here it spares a fetch for a token that cannot pass
    const refusal = audienceRefusal(provider, decoded.payload.aud);
    if (refusal) throw new UnauthenticatedError(refusal.detail, refusal.code);
    try {
      const key = await this.jwks.key(provider.jwksUrl, kid);
      if (key.alg !== undefined && key.alg !== alg)
        throw new UnauthenticatedError('The JWT algorithm is not the one its key is for', 'TOKEN_INVALID');
      return key.pem;
    } catch (error) {
      if (error instanceof UnknownSigningKeyError)
        throw new UnauthenticatedError('The JWT signing key is not in the identity provider JWKS', 'TOKEN_INVALID');
      if (error instanceof JwksUnavailableError) {
        // the reason (an address, a size) is for the operator: the log has it, the caller does not
        throw new UnauthenticatedError(
          "The identity provider's signing keys (its jwks_url) could not be read, so its tokens cannot be checked; an owner can see why in the control plane's log",
          'IDP_JWKS_UNAVAILABLE',
        );
      }
      throw error;
    }
  }

  private async fetchJwks(url: string): Promise<JwksKey[]> {
    try {
      const answer = await idpFetch(url, { headers: { accept: 'application/json' } }, outboundPolicyOf(this.config));
      if (answer.status !== 200) throw new IdpFetchError(`${new URL(url).host} answered HTTP ${answer.status}`);
      try {
        return parseJwks(JSON.parse(answer.body.toString('utf8')));
      } catch (error) {
        if (error instanceof JwksUnavailableError) throw new IdpFetchError(`${new URL(url).host}: ${error.reason}`);
        throw new IdpFetchError(`${new URL(url).host} answered with something that is not JSON`);
      }
    } catch (error) {
      const known = error instanceof IdpFetchError;
      const reason = known ? error.reason : 'unexpected failure';
      this.logger.warn(
        { host: URL.canParse(url) ? new URL(url).host : null, reason, ...(known ? {} : { err: error }) },
        `could not read an identity provider's JWKS: ${reason}`,
      );
      throw new JwksUnavailableError(reason);
    }
  }

  /** After an IdP's settings change its JWKS may be elsewhere. */
  forget(jwksUrl: string): void {
    this.jwks.forget(jwksUrl);
  }
}
