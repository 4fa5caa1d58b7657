import { Inject, Injectable, Logger } from '@nestjs/common';
import { InstallationKeysRepository } from './installation-keys.repository';
import { ROOT_KEYS } from './root-keys';
import type { KeyProvider } from './root-keyring';

/** `rk-<id>.<sealed>`: what KeyProvider.wrap makes. A value before sealing existed has no `.` (base64url). */
const WRAPPED = /^rk-[0-9a-f]{16}\./;

function aad(name: string): string {
  return `aileron/${name}`;
}

/**
 * Installation-wide symmetric keys (the HS256 key of our own JWTs, the
 * browser sign-in key), made once and shared by every replica. Stored sealed
 * by the root key, bound to their name: a database dump alone opens none of
 * them. A key stored in the clear by an older version keeps its value and is
 * sealed the first time it is read.
 */
@Injectable()
export class InstallationKeys {
  private readonly logger = new Logger('InstallationKeys');

  constructor(
    private readonly repository: InstallationKeysRepository,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
  ) {}

  /** The key named `name`, made with `make` on first use. */
  async get(name: string, make: () => Buffer): Promise<Buffer> {
    const stored = await this.repository.getOrCreate(name, () => this.root.wrap(make(), aad(name)));
    if (WRAPPED.test(stored)) return this.root.unwrap(stored, aad(name));
    // the older form: the secret's text itself, used as the key's bytes
    const plain = Buffer.from(stored, 'utf8');
    if (await this.repository.replace(name, stored, this.root.wrap(plain, aad(name)))) {
      this.logger.log(
        `sealed the installation key "${name}" under the root key (it was stored in the clear by an older version)`,
      );
    }
    return plain;
  }

  /** After a root key rotation, and for keys still in the clear: seal every key under the current root key. */
  async resealAll(): Promise<number> {
    let count = 0;
    for (const { name, value } of await this.repository.all()) {
      const wrapped = WRAPPED.test(value);
      if (wrapped && this.root.keyIdOf(value) === this.root.currentKeyId) continue;
      const plain = wrapped ? this.root.unwrap(value, aad(name)) : Buffer.from(value, 'utf8');
      if (await this.repository.replace(name, value, this.root.wrap(plain, aad(name)))) count++;
      plain.fill(0);
    }
    return count;
  }
}
