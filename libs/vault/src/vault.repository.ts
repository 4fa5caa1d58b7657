import { Injectable } from '@nestjs/common';
import type { SystemScope, WorkspaceScope } from '@aileron/auth';
import { DatabaseService, Keyset, Repository, Transaction } from '@aileron/database';
import { Clock } from '@aileron/clock';

export interface SecretMetadata {
  path: string;
  latestVersion: number;
  versions: number[];
  createdBy: string | null;
  createdAt: Date;
  updatedBy: string | null;
  updatedAt: Date;
  lastReadBy: string | null;
  lastReadAt: Date | null;
  /** the writer's say-so that gateways may receive the value for local servers */
  deliverToGateways: boolean;
}

export interface StoredVersion {
  version: number;
  ciphertext: string;
  wrappedDataKey: string;
  keyVersion: number;
}

/** A kept value as stored: its ciphertext opens only as this id and generation, in this workspace. */
export interface SealedRecord {
  id: string;
  generation: number;
  ciphertext: string;
  wrappedDataKey: string;
  keyVersion: number;
}

export interface VaultKeyRecord {
  version: number;
  wrappedKey: string;
  retiredAt: Date | null;
}

const metadataSelect = {
  path: true,
  latestVersion: true,
  createdBy: true,
  createdAt: true,
  updatedBy: true,
  updatedAt: true,
  lastReadBy: true,
  lastReadAt: true,
  deliverToGateways: true,
  versions: { select: { version: true }, orderBy: { version: 'asc' } },
} as const;

/** Secrets and vault keys of one workspace; values leave here only sealed. */
@Injectable()
export class VaultRepository extends Repository {
  constructor(
    db: DatabaseService,
    private readonly clock: Clock,
  ) {
    super(db);
  }

  /** The workspace's keys, newest first; locked when a transaction is given (writes and rotation take turns). */
  async keys(scope: WorkspaceScope, tx?: Transaction, lock = false): Promise<VaultKeyRecord[]> {
    if (tx && lock) {
      await tx.$queryRaw`SELECT id FROM workspaces WHERE id = ${scope.workspaceId}::uuid AND organization_id = ${scope.organizationId}::uuid FOR UPDATE`;
    }
    return this.use(tx).vaultKey.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId },
      orderBy: { version: 'desc' },
      select: { version: true, wrappedKey: true, retiredAt: true },
    });
  }

  async addKey(scope: WorkspaceScope, version: number, wrappedKey: string, tx: Transaction): Promise<void> {
    await tx.vaultKey.create({
      data: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, version, wrappedKey },
    });
  }

  async retireKeysBefore(scope: WorkspaceScope, version: number, tx: Transaction): Promise<void> {
    await tx.vaultKey.updateMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        version: { lt: version },
        retiredAt: null,
      },
      data: { retiredAt: this.clock.date() },
    });
  }

  async replaceWrappedKey(scope: WorkspaceScope, version: number, wrappedKey: string, tx: Transaction): Promise<void> {
    await tx.vaultKey.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, version },
      data: { wrappedKey },
    });
  }

  async metadata(scope: WorkspaceScope, path: string, tx?: Transaction): Promise<SecretMetadata | null> {
    const row = await this.use(tx).secret.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path },
      select: metadataSelect,
    });
    return row ? toMetadata(row) : null;
  }

  /** By path (unique in the workspace); `prefix` keeps those under it. */
  async list(scope: WorkspaceScope, filter: { prefix?: string }, page: Keyset<string>): Promise<SecretMetadata[]> {
    const rows = await this.client.secret.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        ...(filter.prefix || page.after !== undefined
          ? {
              path: {
                ...(filter.prefix ? { startsWith: filter.prefix } : {}),
                ...(page.after !== undefined ? { gt: page.after } : {}),
              },
            }
          : {}),
      },
      orderBy: { path: 'asc' },
      take: page.take,
      select: metadataSelect,
    });
    return rows.map(toMetadata);
  }

  async writeVersion(
    scope: WorkspaceScope,
    data: {
      path: string;
      version: number;
      sealed: { ciphertext: string; wrappedDataKey: string };
      keyVersion: number;
      actor: string;
      deliverToGateways: boolean;
    },
    tx: Transaction,
  ): Promise<void> {
    const tenant = { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path: data.path };
    const now = this.clock.date();
    await tx.secret.upsert({
      where: { workspaceId_path: { workspaceId: scope.workspaceId, path: data.path } },
      create: {
        ...tenant,
        latestVersion: data.version,
        createdBy: data.actor,
        updatedBy: data.actor,
        createdAt: now,
        updatedAt: now,
        deliverToGateways: data.deliverToGateways,
      },
      update: {
        latestVersion: data.version,
        updatedBy: data.actor,
        updatedAt: now,
        deliverToGateways: data.deliverToGateways,
      },
    });
    await tx.secretVersion.create({
      data: {
        ...tenant,
        version: data.version,
        ciphertext: data.sealed.ciphertext,
        wrappedDataKey: data.sealed.wrappedDataKey,
        keyVersion: data.keyVersion,
        createdBy: data.actor,
      },
    });
  }

  /** Removes all but the newest `keep` versions; returns the versions removed. */
  async pruneVersions(scope: WorkspaceScope, path: string, keep: number, tx: Transaction): Promise<number[]> {
    const old = await tx.secretVersion.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path },
      orderBy: { version: 'desc' },
      skip: keep,
      select: { version: true },
    });
    if (old.length === 0) return [];
    const versions = old.map((v) => v.version);
    await tx.secretVersion.deleteMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path, version: { in: versions } },
    });
    return versions;
  }

  /** Whether gateways may receive the secret's value; false when there is no such secret. */
  async setDelivery(scope: WorkspaceScope, path: string, deliver: boolean, tx: Transaction): Promise<boolean> {
    const { count } = await tx.secret.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path },
      data: { deliverToGateways: deliver },
    });
    return count > 0;
  }

  /** The newest version of each of `paths` that exists, for instances to tell whether what they hold is still current. */
  async latestVersions(scope: WorkspaceScope, paths: string[]): Promise<Map<string, number>> {
    if (paths.length === 0) return new Map();
    const rows = await this.client.secret.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path: { in: paths } },
      select: { path: true, latestVersion: true },
    });
    return new Map(rows.map((r) => [r.path, r.latestVersion]));
  }

  async version(
    scope: WorkspaceScope,
    path: string,
    version: number | null,
    tx?: Transaction,
  ): Promise<StoredVersion | null> {
    return this.use(tx).secretVersion.findFirst({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        path,
        ...(version === null ? {} : { version }),
      },
      orderBy: { version: 'desc' },
      select: { version: true, ciphertext: true, wrappedDataKey: true, keyVersion: true },
    });
  }

  async markRead(scope: WorkspaceScope, path: string, actor: string, tx: Transaction): Promise<void> {
    await tx.secret.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path },
      data: { lastReadAt: this.clock.date(), lastReadBy: actor },
    });
  }

  async delete(scope: WorkspaceScope, path: string, tx: Transaction): Promise<boolean> {
    return (
      (
        await tx.secret.deleteMany({
          where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path },
        })
      ).count > 0
    );
  }

  /** Every version wrapped by a key other than `keyVersion` (what a rotation must move). */
  async versionsNotUnder(
    scope: WorkspaceScope,
    keyVersion: number,
    tx: Transaction,
  ): Promise<(StoredVersion & { path: string })[]> {
    return tx.secretVersion.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, keyVersion: { not: keyVersion } },
      select: { path: true, version: true, ciphertext: true, wrappedDataKey: true, keyVersion: true },
    });
  }

  async rewrap(
    scope: WorkspaceScope,
    path: string,
    version: number,
    wrappedDataKey: string,
    keyVersion: number,
    tx: Transaction,
  ): Promise<void> {
    await tx.secretVersion.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, path, version },
      data: { wrappedDataKey, keyVersion },
    });
  }

  /** A value the control plane keeps for itself (`VaultService.keep`), sealed. */
  async sealed(scope: WorkspaceScope, id: string, tx?: Transaction): Promise<SealedRecord | null> {
    return this.use(tx).vaultSealedValue.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      select: { id: true, generation: true, ciphertext: true, wrappedDataKey: true, keyVersion: true },
    });
  }

  async writeSealed(scope: WorkspaceScope, record: SealedRecord, tx: Transaction): Promise<void> {
    const data = {
      generation: record.generation,
      ciphertext: record.ciphertext,
      wrappedDataKey: record.wrappedDataKey,
      keyVersion: record.keyVersion,
      updatedAt: this.clock.date(),
    };
    await tx.vaultSealedValue.upsert({
      where: { workspaceId_id: { workspaceId: scope.workspaceId, id: record.id } },
      create: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id: record.id, ...data },
      update: data,
    });
  }

  /** Removes the values named, or every one whose id starts with `prefix`; returns how many went. */
  async deleteSealed(
    scope: WorkspaceScope,
    ids: { in: string[] } | { prefix: string },
    tx: Transaction,
  ): Promise<number> {
    const { count } = await tx.vaultSealedValue.deleteMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        id: 'in' in ids ? { in: ids.in } : { startsWith: ids.prefix },
      },
    });
    return count;
  }

  /** Every kept value wrapped by a key other than `keyVersion` (what a rotation must move). */
  sealedNotUnder(scope: WorkspaceScope, keyVersion: number, tx: Transaction): Promise<SealedRecord[]> {
    return tx.vaultSealedValue.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, keyVersion: { not: keyVersion } },
      select: { id: true, generation: true, ciphertext: true, wrappedDataKey: true, keyVersion: true },
    });
  }

  async rewrapSealed(
    scope: WorkspaceScope,
    id: string,
    wrappedDataKey: string,
    keyVersion: number,
    tx: Transaction,
  ): Promise<void> {
    await tx.vaultSealedValue.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      data: { wrappedDataKey, keyVersion },
    });
  }

  /** Every workspace key of the installation (root rotation is system work). */
  allKeys(
    _system: SystemScope,
  ): Promise<{ organizationId: string; workspaceId: string; version: number; wrappedKey: string }[]> {
    return this.client.vaultKey.findMany({
      select: { organizationId: true, workspaceId: true, version: true, wrappedKey: true },
    });
  }

  async replaceWrappedKeySystem(
    _system: SystemScope,
    key: { organizationId: string; workspaceId: string; version: number },
    wrappedKey: string,
  ): Promise<void> {
    await this.client.vaultKey.updateMany({
      where: { organizationId: key.organizationId, workspaceId: key.workspaceId, version: key.version },
      data: { wrappedKey },
    });
  }
}

function toMetadata(row: {
  path: string;
  latestVersion: number;
  createdBy: string | null;
  createdAt: Date;
  updatedBy: string | null;
  updatedAt: Date;
  lastReadBy: string | null;
  lastReadAt: Date | null;
  deliverToGateways: boolean;
  versions: { version: number }[];
}): SecretMetadata {
  return { ...row, versions: row.versions.map((v) => v.version) };
}
