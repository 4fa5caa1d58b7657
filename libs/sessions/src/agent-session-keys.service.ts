import { randomBytes } from 'node:crypto';
import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import type { OrgScope } from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { isDatabaseUnavailable } from '@aileron/database';
import { Clock } from '@aileron/clock';
import type { Keyset } from '@aileron/database';
import { NotFoundError } from '@aileron/errors';
import { KeyProvider, ROOT_KEYS } from '@aileron/keys';
import { deriveKey } from './domain/macaroon';
import { RootKeyRecord, AgentSessionsRepository } from './agent-sessions.repository';

/** Bound to the organisation and key id: a sealed key copied to another row or organisation does not open. */
function aad(organizationId: string, keyId: string): string {
  return `aileron/session-root-key/${organizationId}/${keyId}`;
}

/** The shape SESSION_KEY_ID checks in every token before its key is looked up. */
function newKeyId(): string {
  return `sk-${randomBytes(6).toString('hex')}`;
}

export interface SessionKey {
  keyId: string;
  /** the macaroon signing key derived from the root key (libmacaroons' key generator) */
  derived: Buffer;
}

/** how long a replica keeps an opened key, should the message of its removal be lost */
const KEY_CACHE_MS = 10 * 60_000;

/**
 * Each organisation's root keys for session caveat tokens, sealed under the
 * installation's root keyring. The newest key mints; older ones verify until
 * an owner removes them, so a rotation never cuts off a running agent. Opened
 * keys stay in memory (verification is on every request); a rotation or
 * removal drops the organisation's keys on every replica.
 */
@Injectable()
export class AgentSessionKeys implements OnModuleDestroy {
  private readonly opened: SharedCache<SessionKey | null>;
  private readonly removed = new Set<(organizationId: string, keyId: string) => void>();

  constructor(
    private readonly repository: AgentSessionsRepository,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    private readonly clock: Clock,
  ) {
    this.opened = new SharedCache(bus, 'session-keys', KEY_CACHE_MS, clock, { staleIfError: isDatabaseUnavailable });
    // a removal drops the organisation's prefix on every replica; what verified tokens with a removed key must forget too
    this.opened.onEvict((prefix) => {
      const [organizationId, keyId] = prefix.split(':');
      if (organizationId && keyId) for (const listener of this.removed) listener(organizationId, keyId);
    });
  }

  /** Called on every replica when a key is removed, here or elsewhere. */
  onRemoved(listener: (organizationId: string, keyId: string) => void): void {
    this.removed.add(listener);
  }

  onModuleDestroy(): void {
    this.opened.close();
  }

  /** The key new tokens are chained on, made on the organisation's first session. */
  async current(scope: OrgScope): Promise<SessionKey> {
    let keys = await this.repository.rootKeys(scope);
    if (keys.length === 0) {
      const keyId = newKeyId();
      await this.repository.firstRootKey(scope, { keyId, sealed: this.seal(scope.organizationId, keyId) });
      keys = await this.repository.rootKeys(scope);
    }
    const current = keys.find((k) => k.retiredAt === null) ?? keys[0]!;
    const key = await this.byId(scope, current.keyId);
    if (!key) throw new Error(`session root key ${current.keyId} vanished while in use`);
    return key;
  }

  /** A key that still verifies, or null when it was removed (its tokens are refused). */
  byId(scope: OrgScope, keyId: string): Promise<SessionKey | null> {
    return this.opened.getOrLoad(`${scope.organizationId}:${keyId}`, () => this.open(scope, keyId));
  }

  /** Starts minting with a new key; tokens chained on the old ones keep verifying. */
  async rotate(scope: OrgScope): Promise<{ key_id: string }> {
    const keyId = newKeyId();
    await this.repository.addRootKey(
      scope,
      { keyId, sealed: this.seal(scope.organizationId, keyId) },
      this.clock.date(),
    );
    await this.opened.invalidate(scope.organizationId);
    return { key_id: keyId };
  }

  /** Removes a retired key: every token chained on it is refused from now on (each replica within its cache). */
  async remove(scope: OrgScope, keyId: string): Promise<void> {
    if (!(await this.repository.removeRootKey(scope, keyId)))
      throw new NotFoundError('retired session key', keyId, 'SESSION_KEY_NOT_FOUND');
    await this.opened.invalidate(`${scope.organizationId}:${keyId}`);
  }

  list(scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<RootKeyRecord[]> {
    return this.repository.rootKeys(scope, page);
  }

  /** After a root keyring rotation: seal every session root key under the current root key. */
  async reseal(scope: OrgScope): Promise<number> {
    let count = 0;
    for (const key of await this.repository.rootKeys(scope)) {
      if (this.root.keyIdOf(key.sealed) === this.root.currentKeyId) continue;
      const plain = this.root.unwrap(key.sealed, aad(scope.organizationId, key.keyId));
      if (
        await this.repository.replaceSealed(
          scope,
          key.keyId,
          key.sealed,
          this.root.wrap(plain, aad(scope.organizationId, key.keyId)),
        )
      )
        count++;
      plain.fill(0);
    }
    return count;
  }

  private seal(organizationId: string, keyId: string): string {
    const plain = randomBytes(32);
    try {
      return this.root.wrap(plain, aad(organizationId, keyId));
    } finally {
      plain.fill(0);
    }
  }

  private async open(scope: OrgScope, keyId: string): Promise<SessionKey | null> {
    const stored = (await this.repository.rootKeys(scope)).find((k) => k.keyId === keyId);
    if (!stored) return null;
    const plain = this.root.unwrap(stored.sealed, aad(scope.organizationId, keyId));
    try {
      return { keyId, derived: deriveKey(plain) };
    } finally {
      plain.fill(0);
    }
  }
}
