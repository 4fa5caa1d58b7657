import { Inject, Injectable } from '@nestjs/common';
import { InstallationKeys, KeyProvider, ROOT_KEYS } from '@aileron/keys';
import { newKey } from '@aileron/crypto';
import type { OrgScope } from './scope';

const KEY_NAME = 'browser-sign-in-key';

function clientSecretAad(organizationId: string): string {
  return `aileron/idp-client-secret/${organizationId}`;
}

/**
 * Keys of the browser sign-in. One installation-wide key seals the pending
 * sign-in cookie and makes CSRF tokens; it is stored wrapped by the root key
 * (a database dump alone forges neither). Client secrets of identity
 * providers are sealed by the root key too, each bound to its organisation.
 */
@Injectable()
export class BrowserKeys {
  private key: Promise<Buffer> | undefined;

  constructor(
    private readonly installationKeys: InstallationKeys,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
  ) {}

  signInKey(): Promise<Buffer> {
    this.key ??= this.installationKeys.get(KEY_NAME, newKey).catch((error: unknown) => {
      this.key = undefined;
      throw error;
    });
    return this.key;
  }

  sealClientSecret(scope: OrgScope, secret: string): string {
    return this.root.wrap(Buffer.from(secret, 'utf8'), clientSecretAad(scope.organizationId));
  }

  openClientSecret(organizationId: string, sealed: string): string {
    return this.root.unwrap(sealed, clientSecretAad(organizationId)).toString('utf8');
  }
}
