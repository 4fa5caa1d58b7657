import { randomBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { generateEd25519, privateKeyFromPem, signEd25519 } from '@aileron/crypto';
import { GatewayRepository } from './gateway.repository';
import type { PublishedKey } from './domain/policy-bundle';

const PURPOSE = 'policy-bundle';

interface KeyRing {
  active: { kid: string; key: KeyObject };
  published: (PublishedKey & { created_at: string })[];
}

/**
 * Installation-wide Ed25519 keys for policy bundles. The newest key signs;
 * the one before it stays published after a rotation so bundles already in
 * gateways keep verifying until they are replaced.
 */
@Injectable()
export class SigningKeysService implements OnModuleDestroy {
  private readonly cache: SharedCache<KeyRing>;

  constructor(
    private readonly repository: GatewayRepository,
    @Inject(MESSAGE_BUS) bus: MessageBus,
  ) {
    this.cache = new SharedCache(bus, 'signing-keys', 60_000);
  }

  onModuleDestroy(): void {
    this.cache.close();
  }

  ring(): Promise<KeyRing> {
    return this.cache.getOrLoad(PURPOSE, async () => {
      let keys = (await this.repository.signingKeys(PURPOSE)).filter((k) => !k.retiredAt);
      if (keys.length === 0) {
        // first use: replicas racing here each add one; the newest signs and all are published
        await this.create();
        keys = (await this.repository.signingKeys(PURPOSE)).filter((k) => !k.retiredAt);
      }
      const newest = keys[0]!;
      return {
        active: { kid: newest.id, key: privateKeyFromPem(newest.privateKey) },
        published: keys.map((k) => ({ kid: k.id, x: k.publicKey, created_at: k.createdAt.toISOString() })),
      };
    });
  }

  peekRing(): KeyRing | undefined {
    return this.cache.get(PURPOSE);
  }

  async sign(message: string): Promise<{ kid: string; value: string }> {
    const { active } = await this.ring();
    return { kid: active.kid, value: signEd25519(active.key, message) };
  }

  /** A new signing key; the previous one stays published, older ones are retired. */
  async rotate(): Promise<{ kid: string; retired: string[] }> {
    const before = (await this.repository.signingKeys(PURPOSE)).filter((k) => !k.retiredAt);
    const kid = await this.create();
    const keep = [kid, ...(before[0] ? [before[0].id] : [])];
    await this.repository.retireSigningKeys(PURPOSE, keep, new Date());
    await this.cache.invalidate(PURPOSE);
    return { kid, retired: before.slice(1).map((k) => k.id) };
  }

  private async create(): Promise<string> {
    const pair = generateEd25519();
    const kid = `pb-${new Date().toISOString().slice(0, 10).replace(/-/g, '')}-${randomBytes(4).toString('hex')}`;
    await this.repository.createSigningKey(PURPOSE, { id: kid, publicKey: pair.publicKeyX, privateKey: pair.privateKeyPem });
    return kid;
  }
}
