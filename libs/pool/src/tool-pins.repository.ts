import { Injectable } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { DatabaseService, Keyset, keysetAfter, keysetOrder, Prisma, Repository, Transaction } from '@aileron/database';
import { Clock } from '@aileron/clock';

export interface ToolPinRecord {
  server: string;
  version: string;
  tool: string;
  pinnedHash: string;
  changedHash: string | null;
  changedAt: Date | null;
  acceptedBy: string | null;
}

const PIN = {
  server: true,
  version: true,
  tool: true,
  pinnedHash: true,
  changedHash: true,
  changedAt: true,
  acceptedBy: true,
} as const;

/** Pinned tool definitions and the pool's per-workspace settings. */
@Injectable()
export class ToolPinsRepository extends Repository {
  constructor(
    db: DatabaseService,
    private readonly clock: Clock,
  ) {
    super(db);
  }

  async blocksChangedTools(scope: WorkspaceScope): Promise<boolean> {
    const row = await this.client.poolSettings.findUnique({
      where: { organizationId_workspaceId: { organizationId: scope.organizationId, workspaceId: scope.workspaceId } },
    });
    return row?.blockChangedTools ?? false;
  }

  async putSettings(
    scope: WorkspaceScope,
    data: { blockChangedTools: boolean; updatedBy: string },
    tx: Transaction,
  ): Promise<void> {
    await tx.poolSettings.upsert({
      where: { organizationId_workspaceId: { organizationId: scope.organizationId, workspaceId: scope.workspaceId } },
      create: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, ...data },
      update: data,
    });
  }

  /** The pins of the server, all versions (or one; or one tool's), by version then tool; a page of them when `page` is given. */
  pins(
    scope: WorkspaceScope,
    server: string,
    filter: { version?: string; tool?: string } = {},
    page?: Keyset<readonly [string, string]>,
  ): Promise<ToolPinRecord[]> {
    return this.client.toolPin.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        server,
        ...filter,
        ...keysetAfter<Prisma.ToolPinWhereInput>(['version', 'tool'], 'asc', page?.after),
      },
      orderBy: keysetOrder<Prisma.ToolPinOrderByWithRelationInput>(['version', 'tool'], 'asc'),
      ...(page ? { take: page.take } : {}),
      select: PIN,
    });
  }

  /** The tool's pins whose definition changed since it was pinned. */
  changed(scope: WorkspaceScope, server: string, tool: string, tx: Transaction): Promise<ToolPinRecord[]> {
    return tx.toolPin.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        server,
        tool,
        changedHash: { not: null },
      },
      select: PIN,
    });
  }

  async pin(
    scope: WorkspaceScope,
    server: string,
    version: string,
    hashes: [tool: string, hash: string][],
    tx: Transaction,
  ): Promise<void> {
    await tx.toolPin.createMany({
      data: hashes.map(([tool, hash]) => ({
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        server,
        version,
        tool,
        pinnedHash: hash,
      })),
      skipDuplicates: true,
    });
  }

  async markChanged(
    scope: WorkspaceScope,
    key: { server: string; version: string; tool: string },
    hash: string,
    tx: Transaction,
  ): Promise<void> {
    await tx.toolPin.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, ...key },
      data: { changedHash: hash, changedAt: this.clock.date() },
    });
  }

  async accept(
    scope: WorkspaceScope,
    key: { server: string; version: string; tool: string },
    hash: string,
    actor: string,
    tx: Transaction,
  ): Promise<void> {
    await tx.toolPin.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, ...key },
      data: { pinnedHash: hash, changedHash: null, changedAt: null, acceptedBy: actor },
    });
  }
}
