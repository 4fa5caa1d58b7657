import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope, WorkspaceScope } from '@aileron/auth';
import { Keyset, keysetAfter, keysetOrder, Prisma, Repository, Transaction } from '@aileron/database';

/** One record of oidc-provider's, as its adapter reads it back. */
export interface EntryRecord {
  payload: Record<string, unknown>;
  consumedAt: Date | null;
}

export interface NewEntry {
  payload: Record<string, unknown>;
  grantId: string | null;
  uid: string | null;
  expiresAt: Date | null;
}

export interface GrantRecord {
  id: string;
  organizationId: string;
  organizationSlug: string;
  workspaceId: string;
  workspaceSlug: string;
  userId: string;
  user: { email: string | null; name: string | null };
  grantId: string;
  clientId: string;
  clientName: string | null;
  registration: 'metadata_document' | 'dynamic';
  resource: string;
  scope: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface NewGrant {
  userId: string;
  grantId: string;
  clientId: string;
  clientName: string | null;
  registration: GrantRecord['registration'];
  resource: string;
  scope: string;
}

export interface OauthSettingsRecord {
  allowDynamicRegistration: boolean;
  updatedAt: Date | null;
}

const grantSelect = {
  id: true,
  organizationId: true,
  workspaceId: true,
  userId: true,
  grantId: true,
  clientId: true,
  clientName: true,
  registration: true,
  resource: true,
  scope: true,
  createdAt: true,
  lastUsedAt: true,
  user: { select: { email: true, name: true } },
  workspace: { select: { slug: true, organization: { select: { slug: true } } } },
} as const;

type GrantRow = Prisma.OAuthGrantGetPayload<{ select: typeof grantSelect }>;

function toGrant({ workspace, ...row }: GrantRow): GrantRecord {
  return {
    ...row,
    registration: row.registration === 'dynamic' ? 'dynamic' : 'metadata_document',
    workspaceSlug: workspace.slug,
    organizationSlug: workspace.organization.slug,
  };
}

/**
 * oidc-provider's records (oauth_entries, installation-wide protocol state
 * with no tenant of its own, addressed by the provider with a SystemScope),
 * and the consents people gave (oauth_grants, tenant-owned).
 */
@Injectable()
export class OauthRepository extends Repository {
  async upsertEntry(_system: SystemScope, model: string, id: string, entry: NewEntry): Promise<void> {
    const data = {
      payload: entry.payload as Prisma.InputJsonValue,
      grantId: entry.grantId,
      uid: entry.uid,
      expiresAt: entry.expiresAt,
    };
    await this.client.oAuthEntry.upsert({
      where: { model_id: { model, id } },
      create: { model, id, ...data },
      update: data,
    });
  }

  /** The record unless it has expired. */
  async findEntry(_system: SystemScope, model: string, id: string, now: Date): Promise<EntryRecord | null> {
    const row = await this.client.oAuthEntry.findFirst({
      where: { model, id, OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] },
      select: { payload: true, consumedAt: true },
    });
    return row && { payload: row.payload as Record<string, unknown>, consumedAt: row.consumedAt };
  }

  async findEntryByUid(_system: SystemScope, model: string, uid: string, now: Date): Promise<EntryRecord | null> {
    const row = await this.client.oAuthEntry.findFirst({
      where: { model, uid, OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] },
      select: { payload: true, consumedAt: true },
    });
    return row && { payload: row.payload as Record<string, unknown>, consumedAt: row.consumedAt };
  }

  async consumeEntry(_system: SystemScope, model: string, id: string, at: Date): Promise<void> {
    await this.client.oAuthEntry.updateMany({ where: { model, id }, data: { consumedAt: at } });
  }

  async destroyEntry(_system: SystemScope, model: string, id: string): Promise<void> {
    await this.client.oAuthEntry.deleteMany({ where: { model, id } });
  }

  async destroyEntriesOfGrant(_system: SystemScope, model: string, grantId: string): Promise<void> {
    await this.client.oAuthEntry.deleteMany({ where: { model, grantId } });
  }

  /** Every code, token and grant record issued under these grants, whatever its model. */
  async destroyEverythingOfGrants(_scope: OrgScope, grantIds: string[], tx: Transaction): Promise<number> {
    if (grantIds.length === 0) return 0;
    return (await tx.oAuthEntry.deleteMany({ where: { grantId: { in: grantIds } } })).count;
  }

  /** Expired records: the provider never reads them again. */
  async sweepExpiredEntries(_system: SystemScope, before: Date): Promise<number> {
    return (await this.client.oAuthEntry.deleteMany({ where: { expiresAt: { lte: before } } })).count;
  }

  /**
   * Consents whose provider grant is over (its lifetime ran out): nothing can
   * be issued under them any more, so they are no longer connected clients.
   * Those made in the last hour are left alone (the grant is saved just before the consent).
   */
  async lapsedGrants(_system: SystemScope, now: Date, limit: number): Promise<GrantRecord[]> {
    const ids = await this.client.$queryRaw<{ id: string }[]>`
      SELECT g.id FROM oauth_grants g
      WHERE g.created_at < ${new Date(now.getTime() - 3_600_000)}
        AND NOT EXISTS (SELECT 1 FROM oauth_entries e WHERE e.model = 'Grant' AND e.id = g.grant_id
                        AND (e.expires_at IS NULL OR e.expires_at > ${now}))
      ORDER BY g.created_at LIMIT ${limit}`;
    if (ids.length === 0) return [];
    const rows = await this.client.oAuthGrant.findMany({
      where: { id: { in: ids.map((row) => row.id) } },
      select: grantSelect,
    });
    return rows.map(toGrant);
  }

  async createGrant(scope: WorkspaceScope, grant: NewGrant, tx: Transaction): Promise<GrantRecord> {
    const row = await tx.oAuthGrant.create({
      data: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, ...grant },
      select: grantSelect,
    });
    return toGrant(row);
  }

  /** The consent an access token was issued under, whoever's it is: the token is the credential. */
  async findGrantByProviderGrant(_system: SystemScope, grantId: string): Promise<GrantRecord | null> {
    const row = await this.client.oAuthGrant.findUnique({ where: { grantId }, select: grantSelect });
    return row && toGrant(row);
  }

  async touchGrant(scope: OrgScope, id: string, at: Date): Promise<void> {
    await this.client.oAuthGrant.updateMany({
      where: { organizationId: scope.organizationId, id },
      data: { lastUsedAt: at },
    });
  }

  /** Newest first, the id breaking ties; `userId`: only that person's. */
  async listGrants(
    scope: OrgScope,
    filter: { workspaceId?: string; userId?: string },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<GrantRecord[]> {
    const rows = await this.client.oAuthGrant.findMany({
      where: {
        organizationId: scope.organizationId,
        ...(filter.workspaceId ? { workspaceId: filter.workspaceId } : {}),
        ...(filter.userId ? { userId: filter.userId } : {}),
        ...keysetAfter<Prisma.OAuthGrantWhereInput>(
          ['createdAt', 'id'],
          'desc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      select: grantSelect,
      orderBy: keysetOrder<Prisma.OAuthGrantOrderByWithRelationInput>(['createdAt', 'id'], 'desc'),
      take: page.take,
    });
    return rows.map(toGrant);
  }

  /** Deletes the consent when it is in the scope and matches the filter; answers what it deleted. */
  async deleteGrant(
    scope: OrgScope,
    id: string,
    filter: { workspaceId?: string; userId?: string },
    tx: Transaction,
  ): Promise<GrantRecord | null> {
    const row = await tx.oAuthGrant.findFirst({
      where: {
        organizationId: scope.organizationId,
        id,
        ...(filter.workspaceId ? { workspaceId: filter.workspaceId } : {}),
        ...(filter.userId ? { userId: filter.userId } : {}),
      },
      select: grantSelect,
    });
    if (!row) return null;
    // a concurrent revocation may have taken it: only the one that deleted it reports it
    const { count } = await tx.oAuthGrant.deleteMany({ where: { organizationId: scope.organizationId, id: row.id } });
    return count === 1 ? toGrant(row) : null;
  }

  /** A person's consents, deleted (offboarding); answers what it deleted. */
  async deleteGrantsOfUser(scope: OrgScope, userId: string, tx: Transaction): Promise<GrantRecord[]> {
    const rows = await tx.oAuthGrant.findMany({
      where: { organizationId: scope.organizationId, userId },
      select: grantSelect,
    });
    await tx.oAuthGrant.deleteMany({ where: { organizationId: scope.organizationId, userId } });
    return rows.map(toGrant);
  }

  /** For the consent page: the workspace's and the organisation's names. */
  async workspaceNames(scope: WorkspaceScope): Promise<{ workspace: string; organization: string } | null> {
    const row = await this.client.workspace.findUnique({
      where: { organizationId_id: { organizationId: scope.organizationId, id: scope.workspaceId } },
      select: { name: true, organization: { select: { name: true } } },
    });
    return row && { workspace: row.name, organization: row.organization.name };
  }

  async settings(scope: OrgScope): Promise<OauthSettingsRecord> {
    const row = await this.client.oAuthSettings.findUnique({
      where: { organizationId: scope.organizationId },
      select: { allowDynamicRegistration: true, updatedAt: true },
    });
    return row ?? { allowDynamicRegistration: false, updatedAt: null };
  }

  async putSettings(scope: OrgScope, settings: { allowDynamicRegistration: boolean }, tx: Transaction) {
    const row = await tx.oAuthSettings.upsert({
      where: { organizationId: scope.organizationId },
      create: { organizationId: scope.organizationId, ...settings },
      update: settings,
      select: { allowDynamicRegistration: true, updatedAt: true },
    });
    return row as OauthSettingsRecord;
  }

  /** Whether any organisation accepts dynamically registered clients: else registration is closed to all. */
  async anyAllowsDynamicRegistration(_system: SystemScope): Promise<boolean> {
    return (await this.client.oAuthSettings.count({ where: { allowDynamicRegistration: true } })) > 0;
  }

  /** The person an account id names, as oidc-provider asks at each token it issues. */
  async findUserForAccount(
    _system: SystemScope,
    userId: string,
  ): Promise<{ id: string; organizationId: string; deactivatedAt: Date | null } | null> {
    return this.client.user.findUnique({
      where: { id: userId },
      select: { id: true, organizationId: true, deactivatedAt: true },
    });
  }
}
