import { Inject, Injectable } from '@nestjs/common';
import type { Principal, WorkspaceScope } from '@aileron/auth';
import { actorOf, AuditService } from '@aileron/audit';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService, isUniqueViolation, Keyset, Transaction } from '@aileron/database';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '@aileron/errors';
import { KeyProvider, ROOT_KEYS, SigningKeysService } from '@aileron/keys';
import { newKey } from '@aileron/crypto';
import { OutboxService } from '@aileron/outbox';
import {
  decryptSecret,
  encryptSecret,
  MAX_VALUE_BYTES,
  parseVaultRef,
  pathProblem,
  rewrapDataKey,
  SecretContext,
  workspaceKeyAad,
} from './domain/envelope';
import { SecretMetadata, VaultKeyRecord, VaultRepository } from './vault.repository';
import { SystemScopes } from '@aileron/auth/scope-issuer';

/** Why the pool reads a secret: named in the `secret.read` audit record. */
export interface ReadReason {
  /** `pool:<instance id>` */
  actor: string;
  server: string;
  instance: string;
  sessionId?: string | null;
}

export class SecretUnavailableError extends DomainError {
  constructor(ref: string) {
    super('SECRET_UNAVAILABLE', `${ref} names no secret in this workspace`);
  }
}

/**
 * The vault: per-workspace secrets under envelope encryption (value ← data
 * key ← workspace key ← root key). Values go in through the API and come out
 * only through `resolve`, for the pool's instances, each read audited first.
 */
@Injectable()
export class VaultService {
  constructor(
    private readonly db: DatabaseService,
    private readonly repository: VaultRepository,
    private readonly audit: AuditService,
    private readonly signingKeys: SigningKeysService,
    private readonly outbox: OutboxService,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Writes a new version; older ones beyond the kept number are removed. */
  async put(principal: Principal, scope: WorkspaceScope, path: string, value: string): Promise<SecretMetadata> {
    const problem = pathProblem(path);
    if (problem) throw new ValidationError([{ path: 'params.path', message: problem }]);
    if (Buffer.byteLength(value, 'utf8') > MAX_VALUE_BYTES)
      throw new ValidationError([{ path: 'body.value', message: `must be at most ${MAX_VALUE_BYTES} bytes` }]);
    const actor = actorOf(principal);
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        return await this.db.transaction(async (tx) => {
          const key = await this.currentKey(scope, tx);
          const existing = await this.repository.metadata(scope, path, tx);
          const version = (existing?.latestVersion ?? 0) + 1;
          const ctx: SecretContext = {
            organizationId: scope.organizationId,
            workspaceId: scope.workspaceId,
            path,
            version,
          };
          await this.repository.writeVersion(
            scope,
            { path, version, sealed: encryptSecret(key.key, value, ctx), keyVersion: key.version, actor },
            tx,
          );
          const pruned = await this.repository.pruneVersions(scope, path, this.config.vaultKeepVersions, tx);
          // announced through the outbox, which also audits it in this transaction
          await this.announce(tx, scope, 'secret.written', actor, { path, version, removed_versions: pruned });
          return (await this.repository.metadata(scope, path, tx))!;
        });
      } catch (error) {
        // two writers took the same version number: the later one goes on top
        if (!isUniqueViolation(error)) throw error;
      }
    }
    throw new ConflictError(
      'SECRET_WRITE_CONFLICT',
      'The secret is being written by others at the same time; try again',
    );
  }

  list(scope: WorkspaceScope, filter: { prefix?: string }, page: Keyset<string>): Promise<SecretMetadata[]> {
    return this.repository.list(scope, filter, page);
  }

  async metadata(scope: WorkspaceScope, path: string): Promise<SecretMetadata> {
    const found = await this.repository.metadata(scope, path);
    if (!found) throw new NotFoundError('secret', path, 'SECRET_NOT_FOUND');
    return found;
  }

  /** Removes the secret and every version; the audit log keeps that it existed and who removed it. */
  async remove(principal: Principal, scope: WorkspaceScope, path: string): Promise<void> {
    const removed = await this.db.transaction(async (tx) => {
      const existing = await this.repository.metadata(scope, path, tx);
      if (!existing || !(await this.repository.delete(scope, path, tx))) return false;
      await this.announce(tx, scope, 'secret.deleted', actorOf(principal), { path, versions: existing.versions });
      return true;
    });
    if (!removed) throw new NotFoundError('secret', path, 'SECRET_NOT_FOUND');
  }

  /**
   * For the pool only (no route reaches it): the value behind a `vault://`
   * reference. The `secret.read` record commits before the value is returned;
   * if it cannot be written, there is no value.
   */
  async resolve(scope: WorkspaceScope, ref: string, reason: ReadReason): Promise<string> {
    const parsed = parseVaultRef(ref);
    if (!parsed)
      throw new ValidationError([{ path: 'ref', message: 'must be vault://<path> or vault://<path>#<version>' }]);
    const stored = await this.repository.version(scope, parsed.path, parsed.version);
    if (!stored) throw new SecretUnavailableError(ref);
    const keys = await this.repository.keys(scope);
    const key = this.unwrapKey(scope, keys, stored.keyVersion);
    const value = decryptSecret(key, stored, {
      organizationId: scope.organizationId,
      workspaceId: scope.workspaceId,
      path: parsed.path,
      version: stored.version,
    });
    key.fill(0);
    await this.db.transaction(async (tx) => {
      await this.audit.record(tx, scope, {
        type: 'secret.read',
        source: 'pool',
        actor: reason.actor,
        server: reason.server,
        sessionId: reason.sessionId ?? null,
        data: { path: parsed.path, version: stored.version, instance: reason.instance, server: reason.server },
      });
      await this.repository.markRead(scope, parsed.path, reason.actor, tx);
      // the event for subscribers; the audit record above is the richer one
      await this.outbox.record(tx, {
        topic: 'secret.read',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        audited: false,
        payload: {
          workspace: scope.workspaceSlug,
          session: reason.sessionId ?? null,
          path: parsed.path,
          version: stored.version,
          server: reason.server,
          instance: reason.instance,
          actor: reason.actor,
        },
      });
    });
    return value;
  }

  /** Resolves every `vault://` value of an environment (or header set); other values pass through. */
  async resolveAll(
    scope: WorkspaceScope,
    env: Record<string, string>,
    reason: ReadReason,
  ): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(env))
      out[name] = value.startsWith('vault://') ? await this.resolve(scope, value, reason) : value;
    return out;
  }

  /**
   * A new workspace key; every data key is re-wrapped under it and the old
   * keys retired. Values are not re-encrypted, and readers never wait: each
   * version names the key that wraps it, and the swap is one transaction.
   */
  async rotateWorkspaceKey(
    principal: Principal,
    scope: WorkspaceScope,
  ): Promise<{ key_version: number; rewrapped: number }> {
    return this.db.transaction(async (tx) => {
      const keys = await this.repository.keys(scope, tx, true);
      const version = (keys[0]?.version ?? 0) + 1;
      const fresh = newKey();
      await this.repository.addKey(
        scope,
        version,
        this.root.wrap(fresh, workspaceKeyAad(scope.organizationId, scope.workspaceId, version)),
        tx,
      );
      const opened = new Map<number, Buffer>();
      let rewrapped = 0;
      for (const stored of await this.repository.versionsNotUnder(scope, version, tx)) {
        let from = opened.get(stored.keyVersion);
        if (!from) opened.set(stored.keyVersion, (from = this.unwrapKey(scope, keys, stored.keyVersion)));
        const ctx = {
          organizationId: scope.organizationId,
          workspaceId: scope.workspaceId,
          path: stored.path,
          version: stored.version,
        };
        await this.repository.rewrap(
          scope,
          stored.path,
          stored.version,
          rewrapDataKey(from, fresh, stored.wrappedDataKey, ctx),
          version,
          tx,
        );
        rewrapped++;
      }
      for (const key of opened.values()) key.fill(0);
      fresh.fill(0);
      await this.repository.retireKeysBefore(scope, version, tx);
      await this.announce(tx, scope, 'vault.key_rotated', actorOf(principal), { key_version: version, rewrapped });
      return { key_version: version, rewrapped };
    });
  }

  /**
   * After the root key changed (a new first key in AILERON_ROOT_KEY, the old
   * one kept after it): seal every workspace key and signing key under the new
   * root key. Then the old root key can be dropped from the configuration.
   */
  async rewrapUnderCurrentRoot(): Promise<{ root_key_id: string; workspace_keys: number; signing_keys: number }> {
    let workspaceKeys = 0;
    const rewrap = SystemScopes.system('root key rewrap');
    for (const key of await this.repository.allKeys(rewrap)) {
      if (this.root.keyIdOf(key.wrappedKey) === this.root.currentKeyId) continue;
      const aad = workspaceKeyAad(key.organizationId, key.workspaceId, key.version);
      const plain = this.root.unwrap(key.wrappedKey, aad);
      await this.repository.replaceWrappedKeySystem(rewrap, key, this.root.wrap(plain, aad));
      plain.fill(0);
      workspaceKeys++;
    }
    const signingKeys = await this.signingKeys.resealAll();
    return { root_key_id: this.root.currentKeyId, workspace_keys: workspaceKeys, signing_keys: signingKeys };
  }

  private announce(
    tx: Transaction,
    scope: WorkspaceScope,
    topic: string,
    actor: string,
    data: Record<string, unknown>,
  ): Promise<void> {
    return this.outbox.record(tx, {
      topic,
      organizationId: scope.organizationId,
      workspaceId: scope.workspaceId,
      payload: { workspace: scope.workspaceSlug, ...data, actor },
    });
  }

  /** The workspace key new versions use, made on first use. */
  private async currentKey(scope: WorkspaceScope, tx: Transaction): Promise<{ version: number; key: Buffer }> {
    const keys = await this.repository.keys(scope, tx, true);
    const current = keys.find((k) => !k.retiredAt);
    if (current) return { version: current.version, key: this.unwrapKey(scope, keys, current.version) };
    const version = (keys[0]?.version ?? 0) + 1;
    const key = newKey();
    await this.repository.addKey(
      scope,
      version,
      this.root.wrap(key, workspaceKeyAad(scope.organizationId, scope.workspaceId, version)),
      tx,
    );
    return { version, key };
  }

  private unwrapKey(scope: WorkspaceScope, keys: VaultKeyRecord[], version: number): Buffer {
    const record = keys.find((k) => k.version === version);
    if (!record) throw new Error(`vault key ${version} of the workspace is missing`);
    return this.root.unwrap(record.wrappedKey, workspaceKeyAad(scope.organizationId, scope.workspaceId, version));
  }
}
