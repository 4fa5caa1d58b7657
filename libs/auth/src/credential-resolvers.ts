import { Injectable } from '@nestjs/common';
import type { Principal } from './domain/principal';

/** Turns one kind of bearer credential, recognised by its prefix, into a Principal. */
export interface CredentialResolver {
  prefix: string;
  resolve(token: string): Promise<Principal>;
}

/**
 * Domains above auth (gateways, agent sessions) own their credentials;
 * they register here so the one global guard still authenticates every route.
 */
@Injectable()
export class CredentialResolvers {
  private readonly resolvers: CredentialResolver[] = [];

  register(resolver: CredentialResolver): void {
    if (this.resolvers.some((r) => r.prefix.startsWith(resolver.prefix) || resolver.prefix.startsWith(r.prefix))) {
      throw new Error(`credential prefix ${resolver.prefix} overlaps another`);
    }
    this.resolvers.push(resolver);
  }

  find(token: string): CredentialResolver | undefined {
    return this.resolvers.find((r) => token.startsWith(r.prefix));
  }
}
