import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { ExtractJwt, Strategy } from 'passport-jwt';
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
      secretOrKeyProvider: (_request: unknown, rawJwt: string, done: (error: unknown, key?: string) => void) => {
        keys.keyFor(rawJwt).then(
          (key) => done(null, key),
          (error: unknown) => done(error),
        );
      },
      algorithms: ['HS256', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512'],
      ignoreExpiration: false,
    });
  }

  validate(payload: Record<string, unknown>): Promise<Principal> {
    return this.principals.fromJwt(payload);
  }
}
