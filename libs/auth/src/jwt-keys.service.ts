import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { decode, sign } from 'jsonwebtoken';
import { JwksClient } from 'jwks-rsa';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { UnauthenticatedError } from '@aileron/errors';
import { AuthRepository, IdentityProviderRecord } from './auth.repository';

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
export class JwtKeys {
  private ownKey: Promise<string> | undefined;
  private readonly jwks = new Map<string, JwksClient>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repository: AuthRepository,
  ) {}

  get issuer(): string {
    return this.config.publicUrl;
  }

  private signingKey(): Promise<string> {
    this.ownKey ??= this.repository.systemSecret(SIGNING_KEY, () => randomBytes(32).toString('base64url'));
    return this.ownKey;
  }

  async issue(claims: OwnClaims): Promise<{ token: string; expiresAt: Date }> {
    const ttl = this.config.jwtTtlSeconds;
    const token = sign({ org: claims.org }, await this.signingKey(), {
      algorithm: 'HS256',
      subject: claims.sub,
      issuer: this.issuer,
      audience: OWN_AUDIENCE,
      expiresIn: ttl,
    });
    return { token, expiresAt: new Date(Date.now() + ttl * 1000) };
  }

  /** What passport-jwt's secretOrKeyProvider asks for. */
  async keyFor(rawJwt: string): Promise<string> {
    const decoded = decode(rawJwt, { complete: true });
    if (!decoded || typeof decoded.payload === 'string') throw new UnauthenticatedError('The token is not a JWT', 'TOKEN_INVALID');
    const { alg, kid } = decoded.header;
    const issuer = decoded.payload.iss;
    if (issuer === this.issuer) {
      if (alg !== 'HS256') throw new UnauthenticatedError('Unexpected JWT algorithm', 'TOKEN_INVALID');
      return this.signingKey();
    }
    const provider = issuer ? await this.repository.findIdentityProviderByIssuer(issuer) : null;
    if (!provider) throw new UnauthenticatedError('The JWT issuer is not a known identity provider', 'TOKEN_INVALID');
    if (!ASYMMETRIC.test(alg)) throw new UnauthenticatedError('Unexpected JWT algorithm', 'TOKEN_INVALID');
    try {
      const key = await this.client(provider).getSigningKey(kid);
      return key.getPublicKey();
    } catch {
      throw new UnauthenticatedError('The JWT signing key is not in the identity provider JWKS', 'TOKEN_INVALID');
    }
  }

  private client(provider: IdentityProviderRecord): JwksClient {
    let client = this.jwks.get(provider.jwksUrl);
    if (!client) {
      client = new JwksClient({ jwksUri: provider.jwksUrl, cache: true, cacheMaxAge: 10 * 60_000, rateLimit: true, jwksRequestsPerMinute: 10, timeout: 5_000 });
      this.jwks.set(provider.jwksUrl, client);
    }
    return client;
  }

  /** After an IdP's settings change its JWKS may be elsewhere. */
  forget(jwksUrl: string): void {
    this.jwks.delete(jwksUrl);
  }
}
