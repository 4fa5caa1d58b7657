import { Injectable } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { Keyset, Repository, Prisma, Transaction } from '@aileron/database';
import type { PolicyDocument } from './domain/policy-document';

export interface PolicyVersionRecord {
  version: number;
  document: PolicyDocument;
  digest: string;
  restoredFrom: number | null;
  createdBy: string | null;
  createdAt: Date;
}

export type PolicyVersionSummary = Omit<PolicyVersionRecord, 'document'> & { rules: number };

const summarySelect = { version: true, digest: true, restoredFrom: true, createdBy: true, createdAt: true } as const;

/** A workspace's policy versions; the newest is the one in force. */
@Injectable()
export class PolicyRepository extends Repository {
  async latest(scope: WorkspaceScope, tx?: Transaction): Promise<PolicyVersionRecord | null> {
    const row = await this.use(tx).policyVersion.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId },
      orderBy: { version: 'desc' },
    });
    return row ? toRecord(row) : null;
  }

  async get(scope: WorkspaceScope, version: number): Promise<PolicyVersionRecord | null> {
    const row = await this.client.policyVersion.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, version },
    });
    return row ? toRecord(row) : null;
  }

  /** Newest first, by version (unique in the workspace). */
  async list(scope: WorkspaceScope, page: Keyset<number>): Promise<PolicyVersionSummary[]> {
    const rows = await this.client.policyVersion.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        ...(page.after !== undefined ? { version: { lt: page.after } } : {}),
      },
      orderBy: { version: 'desc' },
      take: page.take,
      select: { ...summarySelect, document: true },
    });
    return rows.map((row) => ({
      ...toSummary(row),
      rules: ((row.document as unknown as PolicyDocument).rules ?? []).length,
    }));
  }

  /** Fails with a unique violation when another writer took the version first. */
  async create(
    scope: WorkspaceScope,
    data: { version: number; document: PolicyDocument; digest: string; restoredFrom: number | null; createdBy: string },
    tx: Transaction,
  ): Promise<PolicyVersionRecord> {
    const row = await tx.policyVersion.create({
      data: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        version: data.version,
        document: data.document as unknown as Prisma.InputJsonValue,
        digest: data.digest,
        restoredFrom: data.restoredFrom,
        createdBy: data.createdBy,
      },
    });
    return toRecord(row);
  }
}

function toSummary(row: {
  version: number;
  digest: string;
  restoredFrom: number | null;
  createdBy: string | null;
  createdAt: Date;
}): Omit<PolicyVersionRecord, 'document'> {
  return {
    version: row.version,
    digest: row.digest,
    restoredFrom: row.restoredFrom,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
  };
}

function toRecord(row: {
  version: number;
  document: Prisma.JsonValue;
  digest: string;
  restoredFrom: number | null;
  createdBy: string | null;
  createdAt: Date;
}): PolicyVersionRecord {
  return { ...toSummary(row), document: row.document as unknown as PolicyDocument };
}
