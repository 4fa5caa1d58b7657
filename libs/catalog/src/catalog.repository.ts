import { Injectable } from '@nestjs/common';
import type { OrgScope, WorkspaceScope } from '@aileron/auth';
import { DatabaseService, Keyset, Prisma, Repository, Transaction } from '@aileron/database';
import { Clock } from '@aileron/clock';

/** A published version's definition: the entry input without name and version. */
export type ServerDefinition = Record<string, unknown> & {
  mode: 'local' | 'remote';
  transport: 'stdio' | 'streamable_http';
};

export interface CatalogVersionRecord {
  version: string;
  definition: ServerDefinition;
  createdBy: string | null;
  createdAt: Date;
}

export interface CatalogEntryRecord {
  id: string;
  name: string;
  enabled: boolean;
  disabledReason: string | null;
  disabledAt: Date | null;
  createdAt: Date;
  versions: CatalogVersionRecord[];
}

export interface AssignmentRecord {
  entryId: string;
  name: string;
  enabled: boolean;
  disabledReason: string | null;
  pinned: CatalogVersionRecord;
  rollout: { version: CatalogVersionRecord; gateways: string[]; groups: string[]; percent: number } | null;
  updatedBy: string | null;
  updatedAt: Date;
}

const versionSelect = { version: true, definition: true, createdBy: true, createdAt: true } as const;
const entrySelect = {
  id: true,
  name: true,
  enabled: true,
  disabledReason: true,
  disabledAt: true,
  createdAt: true,
  versions: { select: versionSelect },
} as const;

type VersionRow = { version: string; definition: Prisma.JsonValue; createdBy: string | null; createdAt: Date };

function toVersion(row: VersionRow): CatalogVersionRecord {
  return {
    version: row.version,
    definition: row.definition as ServerDefinition,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
  };
}

/** The organisation's catalog, and which of its servers each workspace uses at which version. */
@Injectable()
export class CatalogRepository extends Repository {
  constructor(
    db: DatabaseService,
    private readonly clock: Clock,
  ) {
    super(db);
  }

  async ensureEntry(scope: OrgScope, name: string, tx: Transaction): Promise<string> {
    const row = await tx.catalogEntry.upsert({
      where: { organizationId_name: { organizationId: scope.organizationId, name } },
      create: { organizationId: scope.organizationId, name },
      update: {},
      select: { id: true },
    });
    return row.id;
  }

  /** Fails with a unique violation when the version exists: versions are immutable. */
  async createVersion(
    scope: OrgScope,
    entryId: string,
    data: { version: string; definition: ServerDefinition; createdBy: string },
    tx: Transaction,
  ): Promise<void> {
    await tx.catalogVersion.create({
      data: {
        organizationId: scope.organizationId,
        entryId,
        version: data.version,
        definition: data.definition as Prisma.InputJsonValue,
        createdBy: data.createdBy,
      },
    });
  }

  /** By name, unique in the organisation. */
  async listEntries(scope: OrgScope, page: Keyset<string>): Promise<CatalogEntryRecord[]> {
    const rows = await this.client.catalogEntry.findMany({
      where: {
        organizationId: scope.organizationId,
        ...(page.after !== undefined ? { name: { gt: page.after } } : {}),
      },
      select: entrySelect,
      orderBy: { name: 'asc' },
      take: page.take,
    });
    return rows.map((row) => ({ ...row, versions: row.versions.map(toVersion) }));
  }

  async findEntry(scope: OrgScope, name: string, tx?: Transaction): Promise<CatalogEntryRecord | null> {
    const row = await this.use(tx).catalogEntry.findUnique({
      where: { organizationId_name: { organizationId: scope.organizationId, name } },
      select: entrySelect,
    });
    return row ? { ...row, versions: row.versions.map(toVersion) } : null;
  }

  async setEnabled(
    scope: OrgScope,
    entryId: string,
    enabled: boolean,
    reason: string | null,
    tx: Transaction,
  ): Promise<void> {
    await tx.catalogEntry.update({
      where: { organizationId_id: { organizationId: scope.organizationId, id: entryId } },
      data: { enabled, disabledReason: enabled ? null : reason, disabledAt: enabled ? null : this.clock.date() },
    });
  }

  async assignments(scope: WorkspaceScope, tx?: Transaction): Promise<AssignmentRecord[]> {
    const rows = await this.use(tx).workspaceServer.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId },
      select: {
        entryId: true,
        rolloutGateways: true,
        rolloutGroups: true,
        rolloutPercent: true,
        updatedBy: true,
        updatedAt: true,
        entry: { select: { name: true, enabled: true, disabledReason: true } },
        pinned: { select: versionSelect },
        rollout: { select: versionSelect },
      },
    });
    return rows
      .map((row) => ({
        entryId: row.entryId,
        name: row.entry.name,
        enabled: row.entry.enabled,
        disabledReason: row.entry.disabledReason,
        pinned: toVersion(row.pinned),
        rollout: row.rollout
          ? {
              version: toVersion(row.rollout),
              gateways: row.rolloutGateways,
              groups: row.rolloutGroups,
              percent: row.rolloutPercent,
            }
          : null,
        updatedBy: row.updatedBy,
        updatedAt: row.updatedAt,
      }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /** Pins a version; a rollout in progress ends, since everyone now gets the pinned one. */
  async assign(
    scope: WorkspaceScope,
    entryId: string,
    version: string,
    updatedBy: string,
    tx: Transaction,
  ): Promise<void> {
    const key = { workspaceId_entryId: { workspaceId: scope.workspaceId, entryId } };
    const values = {
      pinnedVersion: version,
      rolloutVersion: null,
      rolloutGateways: [],
      rolloutGroups: [],
      rolloutPercent: 0,
      updatedBy,
    };
    await tx.workspaceServer.upsert({
      where: key,
      create: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, entryId, ...values },
      update: values,
    });
  }

  async unassign(scope: WorkspaceScope, entryId: string, tx: Transaction): Promise<boolean> {
    const { count } = await tx.workspaceServer.deleteMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, entryId },
    });
    return count > 0;
  }

  async setRollout(
    scope: WorkspaceScope,
    entryId: string,
    rollout: { version: string; gateways: string[]; groups: string[]; percent: number } | null,
    updatedBy: string,
    tx: Transaction,
  ): Promise<void> {
    await tx.workspaceServer.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, entryId },
      data: {
        rolloutVersion: rollout?.version ?? null,
        rolloutGateways: rollout?.gateways ?? [],
        rolloutGroups: rollout?.groups ?? [],
        rolloutPercent: rollout?.percent ?? 0,
        updatedBy,
      },
    });
  }

  /** Workspaces (id, slug) that use an entry, for the events a kill switch sends. */
  async workspacesUsing(scope: OrgScope, entryId: string, tx: Transaction): Promise<{ id: string; slug: string }[]> {
    const rows = await tx.workspaceServer.findMany({
      where: { organizationId: scope.organizationId, entryId },
      select: { workspace: { select: { id: true, slug: true } } },
    });
    return rows.map((r) => r.workspace);
  }
}
