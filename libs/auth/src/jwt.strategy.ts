import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { DomainError } from '@aileron/errors';
import type { Principal } from './domain/principal';
import { JwtKeys } from './jwt-keys.service';
import { PrincipalResolver } from './principal.resolver';

export const JWT_STRATEGY = 'aileron-jwt';

/** Admin JWTs: ours and the organisations' identity providers'. */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, JWT_STRATEGY) {
  constructor(
    keys: JwtKeys,
    private readonly principals: PrincipalResolver,
  ) {
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      secretOrKeyProvider: (
        _request: unknown,
        rawJwt: string,
        done: (error: unknown, key?: string | Buffer) => void,
      ) => {
        keys.keyFor(rawJwt).then(
          (key) => done(null, key),
          (error: unknown) => done(error),
        );
      },
      algorithms: ['HS256', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512'],
      ignoreExpiration: false,
    });
  }

  /**
   * passport-jwt reports the key provider's refusal as a bare failure, which
   * the guard can only answer with a generic 401; a DomainError from JwtKeys
   * says precisely why (no audience configured, the IdP's keys unreadable), so
   * it is passed on as the error it is.
   */
  override authenticate(request: unknown, options?: unknown): void {
    const fail = this.fail.bind(this) as (...args: unknown[]) => void;
    this.fail = ((...args: unknown[]) =>
      args[0] instanceof DomainError ? this.error(args[0]) : fail(...args)) as typeof this.fail;
    super.authenticate(request as never, options);
  }

  validate(payload: Record<string, unknown>): Promise<Principal> {
    return this.principals.fromJwt(payload);
  }
}
