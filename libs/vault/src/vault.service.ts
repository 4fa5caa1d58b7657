import { Inject, Injectable } from '@nestjs/common';
import type { Principal, WorkspaceScope } from '@aileron/auth';
import { actorOf, AuditService } from '@aileron/audit';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService, isDatabaseUnavailable, isUniqueViolation, Keyset, Transaction } from '@aileron/database';
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
import { SecretChanges } from './secret-changes';
import { SecretMetadata, StoredVersion, VaultKeyRecord, VaultRepository } from './vault.repository';
import { SystemScopes } from '@aileron/auth/scope-issuer';

/** Why the pool reads a secret: named in the `secret.read` audit record. */
export interface ReadReason {
  /** `pool:<instance id>` */
  actor: string;
  server: string;
  instance: string;
  sessionId?: string | null;
}

/** Why a gateway reads secrets: the local server (at the version its catalog gives it) they are for. */
export interface GatewayRead {
  gatewayId: string;
  server: string;
  serverVersion: string;
}

export class SecretUnavailableError extends DomainError {
  constructor(ref: string) {
    super('SECRET_UNAVAILABLE', `${ref} names no secret in this workspace`);
  }
}

export class SecretNotDeliverableError extends DomainError {
  constructor(readonly path: string) {
    super(
      'SECRET_NOT_DELIVERABLE',
      `The secret ${path} is not marked deliverable to gateways; its writer can set deliver_to_gateways`,
      { extensions: { path } },
    );
  }
}

/** A read whose audit record could not be written: no value leaves. */
export class AuditUnavailableError extends DomainError {
  constructor(cause: unknown) {
    super('AUDIT_UNAVAILABLE', 'The secret.read audit record could not be written, so no value is given; try again', {
      cause,
      extensions: { retry_after_seconds: 5 },
    });
  }
}

/** One value read, with who read it: what its `secret.read` record and event say. */
interface Read {
  path: string;
  version: number;
}
interface Reader {
  source: 'pool' | 'gateway';
  actor: string;
  server: string;
  sessionId: string | null;
  /** what the record and the event name besides path and version (never a value) */
  details: Record<string, string>;
}

/**
 * The vault: per-workspace secrets under envelope encryption (value ← data
 * key ← workspace key ← root key). Values go in through the API and come out
 * only through `resolve`, for the pool's instances, and `deliverToGateway`, for
 * a gateway's local servers and only where the writer said so; each read is
 * audited first.
 */
@Injectable()
export class VaultService {
  constructor(
    private readonly db: DatabaseService,
    private readonly repository: VaultRepository,
    private readonly audit: AuditService,
    private readonly signingKeys: SigningKeysService,
    private readonly outbox: OutboxService,
    private readonly changes: SecretChanges,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Writes a new version; older ones beyond the kept number are removed.
   * `deliverToGateways` left out keeps what the secret had (false for a new
   * one). A change of it is a `secret.delivery_changed` record of its own, so
   * an auditor finds every moment a secret became deliverable by one search.
   */
  async put(
    principal: Principal,
    scope: WorkspaceScope,
    path: string,
    value: string,
    options: { deliverToGateways?: boolean } = {},
  ): Promise<SecretMetadata> {
    const problem = pathProblem(path);
    if (problem) throw new ValidationError([{ path: 'params.path', message: problem }]);
    if (Buffer.byteLength(value, 'utf8') > MAX_VALUE_BYTES)
      throw new ValidationError([{ path: 'body.value', message: `must be at most ${MAX_VALUE_BYTES} bytes` }]);
    const actor = actorOf(principal);
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const written = await this.db.transaction(async (tx) => {
          const key = await this.currentKey(scope, tx);
          const existing = await this.repository.metadata(scope, path, tx);
          const version = (existing?.latestVersion ?? 0) + 1;
          const was = existing?.deliverToGateways ?? false;
          const deliver = options.deliverToGateways ?? was;
          const ctx: SecretContext = {
            organizationId: scope.organizationId,
            workspaceId: scope.workspaceId,
            path,
            version,
          };
          await this.repository.writeVersion(
            scope,
            {
              path,
              version,
              sealed: encryptSecret(key.key, value, ctx),
              keyVersion: key.version,
              actor,
              deliverToGateways: deliver,
            },
            tx,
          );
          const pruned = await this.repository.pruneVersions(scope, path, this.config.vaultKeepVersions, tx);
          // announced through the outbox, which also audits it in this transaction
          await this.announce(tx, scope, 'secret.written', actor, {
            path,
            version,
            removed_versions: pruned,
            deliver_to_gateways: deliver,
          });
          if (deliver !== was) await this.announceDelivery(tx, scope, actor, path, was, deliver);
          return (await this.repository.metadata(scope, path, tx))!;
        });
        // running instances that hold an older value are replaced on every replica
        await this.changes.publish({ ...tenantOf(scope), path, version: written.latestVersion });
        return written;
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

  /** Marks a secret deliverable to gateways or not, without a new value; unchanged is no record. */
  async setDelivery(
    principal: Principal,
    scope: WorkspaceScope,
    path: string,
    deliver: boolean,
  ): Promise<SecretMetadata> {
    return this.db.transaction(async (tx) => {
      const existing = await this.repository.metadata(scope, path, tx);
      if (!existing) throw new NotFoundError('secret', path, 'SECRET_NOT_FOUND');
      if (existing.deliverToGateways === deliver) return existing;
      await this.repository.setDelivery(scope, path, deliver, tx);
      await this.announceDelivery(tx, scope, actorOf(principal), path, existing.deliverToGateways, deliver);
      return (await this.repository.metadata(scope, path, tx))!;
    });
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
    // an instance holding the value of a deleted secret does not keep it
    await this.changes.publish({ ...tenantOf(scope), path, version: null });
  }

  /** The newest version of each of `paths` that exists (a deleted one is missing). */
  latestVersions(scope: WorkspaceScope, paths: string[]): Promise<Map<string, number>> {
    return this.repository.latestVersions(scope, paths);
  }

  /**
   * For the pool only (no route reaches it): the value behind a `vault://`
   * reference. The `secret.read` record commits before the value is returned;
   * if it cannot be written, there is no value.
   */
  async resolve(scope: WorkspaceScope, ref: string, reason: ReadReason): Promise<string> {
    return (await this.resolveRead(scope, ref, reason)).value;
  }

  /**
   * Resolves every `vault://` value of an environment (or header set); other
   * values pass through. `used` is told the version read of each reference
   * that follows the newest one (not pinned with `#n`), so its holder can tell
   * when a newer one is written.
   */
  async resolveAll(
    scope: WorkspaceScope,
    env: Record<string, string>,
    reason: ReadReason,
    used?: Map<string, number>,
  ): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(env)) {
      if (!value.startsWith('vault://')) {
        out[name] = value;
        continue;
      }
      const read = await this.resolveRead(scope, value, reason);
      out[name] = read.value;
      if (read.follows) used?.set(read.path, read.version);
    }
    return out;
  }

  private async resolveRead(
    scope: WorkspaceScope,
    ref: string,
    reason: ReadReason,
  ): Promise<{ value: string; path: string; version: number; follows: boolean }> {
    const parsed = parseVaultRef(ref);
    if (!parsed)
      throw new ValidationError([{ path: 'ref', message: 'must be vault://<path> or vault://<path>#<version>' }]);
    const stored = await this.repository.version(scope, parsed.path, parsed.version);
    if (!stored) throw new SecretUnavailableError(ref);
    const value = this.open(scope, await this.repository.keys(scope), parsed.path, stored);
    const reader: Reader = {
      source: 'pool',
      actor: reason.actor,
      server: reason.server,
      sessionId: reason.sessionId ?? null,
      details: { instance: reason.instance, server: reason.server },
    };
    await this.db.transaction((tx) =>
      this.recordReads(tx, scope, [{ path: parsed.path, version: stored.version }], reader),
    );
    return { value, path: parsed.path, version: stored.version, follows: parsed.version === null };
  }

  /**
   * For a gateway starting a local server: the newest value of each of
   * `paths`, all or none. Every path must name a secret its writer marked
   * deliverable (else SECRET_NOT_DELIVERABLE names the first that is not, and
   * nothing is decrypted); one `secret.read` record per value, naming the
   * gateway, commits with the reads, and if it cannot be written
   * (AUDIT_UNAVAILABLE) no value is returned.
   */
  async deliverToGateway(
    scope: WorkspaceScope,
    paths: readonly string[],
    read: GatewayRead,
  ): Promise<{ path: string; version: number; value: string }[]> {
    const actor = `gateway:${read.gatewayId}`;
    const reader: Reader = {
      source: 'gateway',
      actor,
      server: read.server,
      sessionId: null,
      details: { gateway: read.gatewayId, server: read.server, server_version: read.serverVersion },
    };
    return this.db.transaction(async (tx) => {
      const stored: { path: string; version: StoredVersion }[] = [];
      for (const path of paths) {
        const secret = await this.repository.metadata(scope, path, tx);
        if (!secret) throw new SecretUnavailableError(`vault://${path}`);
        if (!secret.deliverToGateways) throw new SecretNotDeliverableError(path);
        const version = await this.repository.version(scope, path, null, tx);
        if (!version) throw new SecretUnavailableError(`vault://${path}`);
        stored.push({ path, version });
      }
      const keys = stored.length > 0 ? await this.repository.keys(scope, tx) : [];
      const values = stored.map(({ path, version }) => ({
        path,
        version: version.version,
        value: this.open(scope, keys, path, version),
      }));
      await this.recordReads(tx, scope, values, reader);
      return values;
    });
  }

  /** Decrypts one stored version; the workspace key is wiped after use. */
  private open(scope: WorkspaceScope, keys: VaultKeyRecord[], path: string, stored: StoredVersion): string {
    const key = this.unwrapKey(scope, keys, stored.keyVersion);
    try {
      return decryptSecret(key, stored, {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        path,
        version: stored.version,
      });
    } finally {
      key.fill(0);
    }
  }

  /**
   * The `secret.read` audit record of each value, the secret's last-read
   * metadata and the event for subscribers, in the caller's transaction. A
   * failure is AUDIT_UNAVAILABLE (the database being away keeps its own code),
   * which rolls the transaction back: the caller returns no value.
   */
  private async recordReads(tx: Transaction, scope: WorkspaceScope, reads: Read[], reader: Reader): Promise<void> {
    try {
      for (const { path, version } of reads) {
        await this.audit.record(tx, scope, {
          type: 'secret.read',
          source: reader.source,
          actor: reader.actor,
          server: reader.server,
          sessionId: reader.sessionId,
          data: { path, version, ...reader.details },
        });
        await this.repository.markRead(scope, path, reader.actor, tx);
        // the event for subscribers; the audit record above is the richer one
        await this.outbox.record(tx, {
          topic: 'secret.read',
          organizationId: scope.organizationId,
          workspaceId: scope.workspaceId,
          audited: false,
          payload: {
            workspace: scope.workspaceSlug,
            session: reader.sessionId,
            path,
            version,
            ...reader.details,
            actor: reader.actor,
          },
        });
      }
    } catch (error) {
      if (isDatabaseUnavailable(error)) throw error;
      throw new AuditUnavailableError(error);
    }
  }

  /**
   * Keeps `value` for the control plane itself, sealed under the workspace's
   * envelope as secrets are, in the caller's transaction: what no person wrote
   * and nobody may read back (an upstream connection's tokens, a pending
   * authorization's PKCE verifier). A kept value is never listed, never named
   * by a `vault://` reference and never returned by a route; each write is a
   * new generation, bound into the ciphertext with the workspace and the id.
   */
  async keep(scope: WorkspaceScope, id: string, value: string, tx: Transaction): Promise<void> {
    const key = await this.currentKey(scope, tx);
    try {
      const generation = ((await this.repository.sealed(scope, id, tx))?.generation ?? 0) + 1;
      const sealed = encryptSecret(key.key, value, keptContext(scope, id, generation));
      await this.repository.writeSealed(scope, { id, generation, ...sealed, keyVersion: key.version }, tx);
    } finally {
      key.key.fill(0);
    }
  }

  /** The value kept as `id`, or null when there is none. */
  async kept(scope: WorkspaceScope, id: string, tx?: Transaction): Promise<string | null> {
    const record = await this.repository.sealed(scope, id, tx);
    if (!record) return null;
    const key = this.unwrapKey(scope, await this.repository.keys(scope, tx), record.keyVersion);
    try {
      return decryptSecret(key, record, keptContext(scope, id, record.generation));
    } finally {
      key.fill(0);
    }
  }

  /** Forgets kept values: those named, or every one whose id starts with `prefix`. */
  forget(scope: WorkspaceScope, ids: { in: string[] } | { prefix: string }, tx: Transaction): Promise<number> {
    return this.repository.deleteSealed(scope, ids, tx);
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
      for (const kept of await this.repository.sealedNotUnder(scope, version, tx)) {
        let from = opened.get(kept.keyVersion);
        if (!from) opened.set(kept.keyVersion, (from = this.unwrapKey(scope, keys, kept.keyVersion)));
        const ctx = keptContext(scope, kept.id, kept.generation);
        await this.repository.rewrapSealed(
          scope,
          kept.id,
          rewrapDataKey(from, fresh, kept.wrappedDataKey, ctx),
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

  private announceDelivery(
    tx: Transaction,
    scope: WorkspaceScope,
    actor: string,
    path: string,
    was: boolean,
    now: boolean,
  ): Promise<void> {
    return this.announce(tx, scope, 'secret.delivery_changed', actor, {
      path,
      deliver_to_gateways: now,
      previous: was,
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

/**
 * A kept value's place in the envelope: `kept:` cannot begin a secret's path (no `:` in
 * one), so neither kind of ciphertext opens as the other.
 */
function keptContext(scope: WorkspaceScope, id: string, generation: number): SecretContext {
  return {
    organizationId: scope.organizationId,
    workspaceId: scope.workspaceId,
    path: `kept:${id}`,
    version: generation,
  };
}

function tenantOf(scope: WorkspaceScope): { organizationId: string; workspaceId: string } {
  return { organizationId: scope.organizationId, workspaceId: scope.workspaceId };
}
