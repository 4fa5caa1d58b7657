import { Injectable } from '@nestjs/common';

/**
 * What a 401 answer says about how to authenticate (`WWW-Authenticate`), by
 * path: the domain that owns a protected resource registers how its paths are
 * challenged (the MCP endpoints point at their OAuth resource metadata, RFC
 * 9728 § 5.1), and every 401 the app renders, behind the routes or in front of
 * them, carries it.
 */
export type Challenge = (path: string, tokenSent: boolean) => string | undefined;

@Injectable()
export class AuthChallenges {
  private readonly challenges: Challenge[] = [];

  add(challenge: Challenge): void {
    this.challenges.push(challenge);
  }

  /** The challenge for a 401 on `path` (the request target, query included), if any owner names one. */
  for(path: string, tokenSent: boolean): string | undefined {
    for (const challenge of this.challenges) {
      const value = challenge(path, tokenSent);
      if (value !== undefined) return value;
    }
    return undefined;
  }
}
