import { Injectable } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { DatabaseService, Keyset, keysetAfter, keysetOrder, Prisma, Repository, Transaction } from '@aileron/database';
import { Clock } from '@aileron/clock';
import type { RunnerLimits } from './runner-protocol';

export interface SandboxRecord {
  id: string;
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
  name: string;
  network: 'none' | 'egress';
  limits: RunnerLimits;
  source: 'empty' | 'git-bundle' | 'tar.gz';
  createdBy: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface SnapshotRecord {
  id: string;
  sha: string;
  trigger: string;
  message: string;
  files: { path: string; status: string }[];
  agentSessionId: string | null;
  author: string;
  createdAt: Date;
}

export interface ShellRulesRecord {
  rules: unknown[];
  elicitation: boolean;
  version: number;
  updatedBy: string | null;
  updatedAt: Date;
}

const include = { workspace: { select: { slug: true } } } as const;
type Row = Prisma.SandboxGetPayload<{ include: typeof include }>;

function toRecord(row: Row): SandboxRecord {
  const { workspace, ...rest } = row;
  return {
    ...rest,
    workspaceSlug: workspace.slug,
    network: rest.network as SandboxRecord['network'],
    limits: rest.limits as RunnerLimits,
    source: rest.source as SandboxRecord['source'],
  };
}

function toSnapshot(row: Prisma.SandboxSnapshotGetPayload<object>): SnapshotRecord {
  return {
    id: row.id,
    sha: row.sha,
    trigger: row.trigger,
    message: row.message,
    files: row.files as SnapshotRecord['files'],
    agentSessionId: row.agentSessionId,
    author: row.author,
    createdAt: row.createdAt,
  };
}

/** Sandboxes, their snapshots and the workspaces' shell rules. */
@Injectable()
export class SandboxesRepository extends Repository {
  constructor(
    db: DatabaseService,
    private readonly clock: Clock,
  ) {
    super(db);
  }

  async create(
    scope: WorkspaceScope,
    data: Pick<SandboxRecord, 'name' | 'network' | 'limits' | 'createdBy'>,
    tx: Transaction,
  ): Promise<SandboxRecord> {
    const row = await tx.sandbox.create({
      data: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        name: data.name,
        network: data.network,
        limits: data.limits as Prisma.InputJsonValue,
        createdBy: data.createdBy,
      },
      include,
    });
    return toRecord(row);
  }

  /** How many sandboxes the workspace has, its row locked until `tx` ends: creates of one workspace count in turn. */
  async countLocked(scope: WorkspaceScope, tx: Transaction): Promise<number> {
    await tx.$queryRaw`SELECT id FROM workspaces WHERE id = ${scope.workspaceId}::uuid AND organization_id = ${scope.organizationId}::uuid FOR UPDATE`;
    return tx.sandbox.count({ where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId } });
  }

  async byName(scope: WorkspaceScope, name: string): Promise<SandboxRecord | null> {
    const row = await this.client.sandbox.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, name },
      include,
    });
    return row ? toRecord(row) : null;
  }

  /** By name (unique in the workspace). */
  async list(scope: WorkspaceScope, page: Keyset<string>): Promise<SandboxRecord[]> {
    const rows = await this.client.sandbox.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        ...(page.after !== undefined ? { name: { gt: page.after } } : {}),
      },
      include,
      orderBy: { name: 'asc' },
      take: page.take,
    });
    return rows.map(toRecord);
  }

  async any(scope: WorkspaceScope): Promise<boolean> {
    return (
      (await this.client.sandbox.count({
        where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId },
        take: 1,
      })) > 0
    );
  }

  async remove(scope: WorkspaceScope, id: string, tx: Transaction): Promise<boolean> {
    return (
      (
        await tx.sandbox.deleteMany({
          where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
        })
      ).count === 1
    );
  }

  async setSource(scope: WorkspaceScope, id: string, source: SandboxRecord['source']): Promise<void> {
    await this.client.sandbox.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      data: { source },
    });
  }

  async touch(scope: WorkspaceScope, id: string, at: Date): Promise<void> {
    await this.client.sandbox.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      data: { lastUsedAt: at },
    });
  }

  async addSnapshot(
    scope: WorkspaceScope,
    sandboxId: string,
    snapshot: Omit<SnapshotRecord, 'id'>,
    tx: Transaction,
  ): Promise<void> {
    await tx.sandboxSnapshot.create({
      data: {
        organizationId: scope.organizationId,
        sandboxId,
        sha: snapshot.sha,
        trigger: snapshot.trigger,
        message: snapshot.message,
        files: snapshot.files as unknown as Prisma.InputJsonValue,
        agentSessionId: snapshot.agentSessionId,
        author: snapshot.author,
        createdAt: snapshot.createdAt,
      },
    });
  }

  /** Newest first, the id breaking ties. */
  async snapshots(
    scope: WorkspaceScope,
    sandboxId: string,
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<SnapshotRecord[]> {
    const rows = await this.client.sandboxSnapshot.findMany({
      where: {
        organizationId: scope.organizationId,
        sandboxId,
        ...keysetAfter<Prisma.SandboxSnapshotWhereInput>(
          ['createdAt', 'id'],
          'desc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      orderBy: keysetOrder<Prisma.SandboxSnapshotOrderByWithRelationInput>(['createdAt', 'id'], 'desc'),
      take: page.take,
    });
    return rows.map(toSnapshot);
  }

  async snapshot(scope: WorkspaceScope, sandboxId: string, sha: string): Promise<SnapshotRecord | null> {
    const row = await this.client.sandboxSnapshot.findFirst({
      where: { organizationId: scope.organizationId, sandboxId, sha },
    });
    return row ? toSnapshot(row) : null;
  }

  async shellRules(scope: WorkspaceScope): Promise<ShellRulesRecord | null> {
    const row = await this.client.shellRules.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId },
    });
    return row
      ? {
          rules: row.rules as unknown[],
          elicitation: row.elicitation,
          version: row.version,
          updatedBy: row.updatedBy,
          updatedAt: row.updatedAt,
        }
      : null;
  }

  async putShellRules(
    scope: WorkspaceScope,
    data: { rules: unknown[]; elicitation: boolean; updatedBy: string },
    tx: Transaction,
  ): Promise<ShellRulesRecord> {
    const json = data.rules as Prisma.InputJsonValue;
    const row = await tx.shellRules.upsert({
      where: { organizationId_workspaceId: { organizationId: scope.organizationId, workspaceId: scope.workspaceId } },
      create: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        rules: json,
        elicitation: data.elicitation,
        updatedBy: data.updatedBy,
      },
      update: {
        rules: json,
        elicitation: data.elicitation,
        updatedBy: data.updatedBy,
        updatedAt: this.clock.date(),
        version: { increment: 1 },
      },
    });
    return {
      rules: row.rules as unknown[],
      elicitation: row.elicitation,
      version: row.version,
      updatedBy: row.updatedBy,
      updatedAt: row.updatedAt,
    };
  }
}
