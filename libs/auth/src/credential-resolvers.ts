import { Injectable } from '@nestjs/common';
import type { Principal } from './domain/principal';

/**
 * Turns one kind of bearer credential into a Principal. Our own credentials
 * are recognised by their prefix; a kind whose values a library makes (an
 * OAuth access token is oidc-provider's opaque value) by its exact shape,
 * which must not fit any prefixed kind.
 */
export type CredentialResolver = { resolve(token: string): Promise<Principal> } & (
  | { prefix: string; shape?: never }
  | { shape: RegExp; prefix?: never }
);

/**
 * Domains above auth (gateways, agent sessions) own their credentials;
 * they register here so the one global guard still authenticates every route.
 */
@Injectable()
export class CredentialResolvers {
  private readonly resolvers: CredentialResolver[] = [];

  register(resolver: CredentialResolver): void {
    const prefix = resolver.prefix;
    if (
      prefix !== undefined &&
      this.resolvers.some((r) => r.prefix !== undefined && (r.prefix.startsWith(prefix) || prefix.startsWith(r.prefix)))
    ) {
      throw new Error(`credential prefix ${prefix} overlaps another`);
    }
    this.resolvers.push(resolver);
  }

  find(token: string): CredentialResolver | undefined {
    // our prefixes first: a garbled token of ours can have the length of a library's value, and must be refused as what it is
    // (a library's random value begins with one of them once in 64^7 at the most, and is then refused, never misread)
    return (
      this.resolvers.find((r) => r.prefix !== undefined && token.startsWith(r.prefix)) ??
      this.resolvers.find((r) => r.shape?.test(token))
    );
  }
}
