import { randomBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { isDatabaseUnavailable } from '@aileron/database';
import { Clock } from '@aileron/clock';
import { generateEd25519, privateKeyFromPem, signEd25519 } from '@aileron/crypto';
import { InstallationKeys } from './installation-keys.service';
import { ROOT_KEYS } from './root-keys';
import type { KeyProvider } from './root-keyring';
import { SigningKeyRecord, SigningKeysRepository } from './signing-keys.repository';

export interface PublishedSigningKey {
  kid: string;
  /** raw Ed25519 public key, base64url (a JWK's `x`) */
  x: string;
  created_at: string;
}

export interface SigningKeyRing {
  active: { kid: string; key: KeyObject };
  published: PublishedSigningKey[];
}

/** What a signing key may be for; each purpose has its own keys and rotation. */
export type SigningPurpose = 'policy-bundle' | 'audit-checkpoint';

const KID_PREFIX: Record<SigningPurpose, string> = { 'policy-bundle': 'pb', 'audit-checkpoint': 'ac' };

/**
 * Installation-wide Ed25519 keys, one ring per purpose. The newest key signs;
 * the one before it stays published after a rotation so what it signed keeps
 * verifying. Private keys are sealed by the root key: a database dump alone
 * cannot forge a policy bundle or an audit checkpoint.
 */
@Injectable()
export class SigningKeysService implements OnModuleDestroy {
  private readonly cache: SharedCache<SigningKeyRing>;

  constructor(
    private readonly repository: SigningKeysRepository,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    private readonly installationKeys: InstallationKeys,
    private readonly clock: Clock,
  ) {
    this.cache = new SharedCache(bus, 'signing-keys', 60_000, clock, { staleIfError: isDatabaseUnavailable });
  }

  onModuleDestroy(): void {
    this.cache.close();
  }

  ring(purpose: SigningPurpose): Promise<SigningKeyRing> {
    return this.cache.getOrLoad(purpose, async () => {
      let keys = (await this.repository.list(purpose)).filter((k) => !k.retiredAt);
      if (keys.length === 0) {
        // first use: replicas racing here each add one; the newest signs and all are published
        await this.create(purpose);
        keys = (await this.repository.list(purpose)).filter((k) => !k.retiredAt);
      }
      const newest = keys[0]!;
      return {
        active: { kid: newest.id, key: privateKeyFromPem(this.openPrivateKey(purpose, newest)) },
        published: keys.map((k) => ({ kid: k.id, x: k.publicKey, created_at: k.createdAt.toISOString() })),
      };
    });
  }

  peekRing(purpose: SigningPurpose): SigningKeyRing | undefined {
    return this.cache.get(purpose);
  }

  async sign(purpose: SigningPurpose, message: string): Promise<{ kid: string; value: string }> {
    const { active } = await this.ring(purpose);
    return { kid: active.kid, value: signEd25519(active.key, message) };
  }

  /** Every key of the purpose ever made, retired ones too: old signatures stay checkable. */
  async publicKeys(purpose: SigningPurpose): Promise<Map<string, string>> {
    return new Map((await this.repository.list(purpose)).map((k) => [k.id, k.publicKey]));
  }

  /** A new signing key; the previous one stays published, older ones are retired. */
  async rotate(purpose: SigningPurpose): Promise<{ kid: string; retired: string[] }> {
    const before = (await this.repository.list(purpose)).filter((k) => !k.retiredAt);
    const kid = await this.create(purpose);
    const keep = [kid, ...(before[0] ? [before[0].id] : [])];
    await this.repository.retireAllBut(purpose, keep, this.clock.date());
    await this.cache.invalidate(purpose);
    return { kid, retired: before.slice(1).map((k) => k.id) };
  }

  /**
   * After a root key rotation: seal every private key again under the current
   * root key, and the installation keys with them (the HS256 key of our own
   * JWTs, the browser sign-in key), which rotation must move too. The count is
   * of Ed25519 keys only, as the rewrap answer's `signing_keys` promises.
   */
  async resealAll(): Promise<number> {
    await this.installationKeys.resealAll();
    let count = 0;
    for (const key of await this.repository.all()) {
      const purpose = key.purpose as SigningPurpose;
      const pem = this.openPrivateKey(purpose, key);
      if (!key.privateKey.startsWith('-----') && this.root.keyIdOf(key.privateKey) === this.root.currentKeyId) continue;
      await this.repository.replacePrivateKey(key.id, this.sealPrivateKey(purpose, key.id, pem));
      count++;
    }
    return count;
  }

  private async create(purpose: SigningPurpose): Promise<string> {
    const pair = generateEd25519();
    const kid = `${KID_PREFIX[purpose]}-${this.clock.date().toISOString().slice(0, 10).replace(/-/g, '')}-${randomBytes(4).toString('hex')}`;
    await this.repository.create(purpose, {
      id: kid,
      publicKey: pair.publicKeyX,
      privateKey: this.sealPrivateKey(purpose, kid, pair.privateKeyPem),
    });
    return kid;
  }

  private sealPrivateKey(purpose: SigningPurpose, kid: string, pem: string): string {
    return this.root.wrap(Buffer.from(pem, 'utf8'), aad(purpose, kid));
  }

  private openPrivateKey(purpose: SigningPurpose, key: SigningKeyRecord): string {
    // keys made before sealing existed are plain PEM; resealAll() upgrades them
    if (key.privateKey.startsWith('-----')) return key.privateKey;
    return this.root.unwrap(key.privateKey, aad(purpose, key.id)).toString('utf8');
  }
}

function aad(purpose: string, kid: string): string {
  return `aileron/signing-key/${purpose}/${kid}`;
}
