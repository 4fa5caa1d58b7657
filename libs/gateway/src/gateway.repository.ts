import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope, WorkspaceScope } from '@aileron/auth';
import { Keyset, keysetAfter, keysetOrder, Prisma, Repository, Transaction } from '@aileron/database';
import type { OfflineMode } from './domain/policy-bundle';

export interface GatewayRecord {
  id: string;
  organizationId: string;
  organizationSlug: string;
  workspaceId: string;
  workspaceSlug: string;
  name: string;
  groups: string[];
  prefix: string;
  enrolledAt: Date;
  lastSeenAt: Date | null;
  revokedAt: Date | null;
  /** who made the enrolment code it used (`user:<id>`, `token:<id>`) */
  enrolledBy: string | null;
  /** when its current token stops working; null: until rotated or revoked */
  tokenExpiresAt: Date | null;
  /** the end of the grace period of the token a rotation replaced; null: there is none */
  previousTokenValidUntil: Date | null;
}

/** A gateway with the hashes of its tokens, for what must forget or replace them. */
export type GatewayWithTokens = GatewayRecord & { tokenHash: string; previousTokenHash: string | null };

export interface GatewaySettingsRecord {
  allowLocalServers: boolean;
  offlineMode: OfflineMode;
  maxStaleSeconds: number;
  updatedAt: Date | null;
}

const gatewaySelect = {
  id: true,
  organizationId: true,
  workspaceId: true,
  name: true,
  groups: true,
  prefix: true,
  enrolledAt: true,
  lastSeenAt: true,
  revokedAt: true,
  enrolledBy: true,
  tokenExpiresAt: true,
  previousTokenValidUntil: true,
  workspace: { select: { slug: true, organization: { select: { slug: true } } } },
} as const;
const withTokens = { ...gatewaySelect, tokenHash: true, previousTokenHash: true } as const;

type GatewayRow = {
  id: string;
  organizationId: string;
  workspaceId: string;
  name: string;
  groups: string[];
  prefix: string;
  enrolledAt: Date;
  lastSeenAt: Date | null;
  revokedAt: Date | null;
  enrolledBy: string | null;
  tokenExpiresAt: Date | null;
  previousTokenValidUntil: Date | null;
  workspace: { slug: string; organization: { slug: string } };
};

function toGateway({ workspace, ...row }: GatewayRow): GatewayRecord {
  return { ...row, workspaceSlug: workspace.slug, organizationSlug: workspace.organization.slug };
}

function toGatewayWithTokens({
  tokenHash,
  previousTokenHash,
  ...row
}: GatewayRow & { tokenHash: string; previousTokenHash: string | null }): GatewayWithTokens {
  return { ...toGateway(row), tokenHash, previousTokenHash };
}

export const DEFAULT_SETTINGS: GatewaySettingsRecord = {
  allowLocalServers: true,
  // ADR-0001: fail closed is the enterprise default; an organisation opts into the cache or failing open
  offlineMode: 'fail_closed',
  maxStaleSeconds: 3600,
  updatedAt: null,
};

/** Enrolment codes, enrolled gateways, the organisation's gateway settings and the bundle signing keys. */
/** The gateways enrolled with a code one of `refs` made, of a workspace or (null) the whole organisation, locked. */
async function lockEnrolled(
  tx: Transaction,
  organizationId: string,
  workspaceId: string | null,
  refs: string[],
): Promise<GatewayWithTokens[]> {
  const ids = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text AS id FROM gateways
     WHERE organization_id = ${organizationId}::uuid AND enrolled_by = ANY(${refs}::text[])
       AND (${workspaceId}::uuid IS NULL OR workspace_id = ${workspaceId}::uuid)
     ORDER BY id FOR UPDATE`;
  const rows = await tx.gateway.findMany({
    where: { organizationId, id: { in: ids.map((r) => r.id) } },
    select: withTokens,
    orderBy: { id: 'asc' },
  });
  return rows.map(toGatewayWithTokens);
}

@Injectable()
export class GatewayRepository extends Repository {
  async createEnrollmentCode(
    scope: WorkspaceScope,
    data: {
      codeHash: string;
      groups: string[];
      expiresAt: Date;
      createdBy: string;
      tokenExpiresInSeconds: number | null;
    },
    tx: Transaction,
  ): Promise<{ id: string }> {
    return tx.enrollmentCode.create({
      data: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, ...data },
      select: { id: true },
    });
  }

  /**
   * Marks the code used if, and only if, it is unused and unexpired: one
   * conditional UPDATE, so two gateways racing with one code cannot both win.
   */
  async consumeEnrollmentCode(
    _system: SystemScope,
    codeHash: string,
    now: Date,
    tx: Transaction,
  ): Promise<{
    id: string;
    organizationId: string;
    workspaceId: string;
    groups: string[];
    createdBy: string | null;
    tokenExpiresInSeconds: number | null;
  } | null> {
    const { count } = await tx.enrollmentCode.updateMany({
      where: { codeHash, usedAt: null, expiresAt: { gt: now } },
      data: { usedAt: now },
    });
    if (count === 0) return null;
    return tx.enrollmentCode.findUnique({
      where: { codeHash },
      select: {
        id: true,
        organizationId: true,
        workspaceId: true,
        groups: true,
        createdBy: true,
        tokenExpiresInSeconds: true,
      },
    });
  }

  /** Why a code did not work, for the error message (never which tenant it belongs to). */
  async enrollmentCodeState(
    _system: SystemScope,
    codeHash: string,
    now: Date,
  ): Promise<'unknown' | 'used' | 'expired'> {
    const row = await this.client.enrollmentCode.findUnique({
      where: { codeHash },
      select: { usedAt: true, expiresAt: true },
    });
    if (!row) return 'unknown';
    if (row.usedAt) return 'used';
    return row.expiresAt <= now ? 'expired' : 'unknown';
  }

  /** The tenant is the enrolment code's, which the caller has just consumed. */
  async createGateway(
    _system: SystemScope,
    scope: { organizationId: string; workspaceId: string },
    data: {
      name: string;
      groups: string[];
      tokenHash: string;
      prefix: string;
      enrollmentCodeId: string;
      enrolledBy: string | null;
      tokenExpiresAt: Date | null;
    },
    tx: Transaction,
  ): Promise<GatewayRecord> {
    const row = await tx.gateway.create({
      data: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        name: data.name,
        groups: data.groups,
        tokenHash: data.tokenHash,
        prefix: data.prefix,
        enrolledBy: data.enrolledBy,
        tokenExpiresAt: data.tokenExpiresAt,
      },
      select: gatewaySelect,
    });
    await tx.enrollmentCode.update({ where: { id: data.enrollmentCodeId }, data: { gatewayId: row.id } });
    return toGateway(row);
  }

  /** The gateway whose current token, or the token a rotation replaced, has this hash; `matched` says which. */
  async findGatewayByTokenHash(
    _system: SystemScope,
    tokenHash: string,
  ): Promise<(GatewayWithTokens & { matched: 'current' | 'previous' }) | null> {
    const row = await this.client.gateway.findFirst({
      where: { OR: [{ tokenHash }, { previousTokenHash: tokenHash }] },
      select: withTokens,
    });
    if (!row) return null;
    return { ...toGatewayWithTokens(row), matched: row.tokenHash === tokenHash ? 'current' : 'previous' };
  }

  async touchGateway(scope: OrgScope, id: string, at: Date): Promise<void> {
    await this.client.gateway.updateMany({
      where: { organizationId: scope.organizationId, id },
      data: { lastSeenAt: at },
    });
  }

  /** Newest enrolment first, the id breaking ties; `enrolledBy`: only those enrolled with codes these refs made. */
  async listGateways(
    scope: WorkspaceScope,
    filter: { enrolledBy?: string[] },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<GatewayRecord[]> {
    const rows = await this.client.gateway.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        ...(filter.enrolledBy ? { enrolledBy: { in: filter.enrolledBy } } : {}),
        ...keysetAfter<Prisma.GatewayWhereInput>(
          ['enrolledAt', 'id'],
          'desc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      select: gatewaySelect,
      orderBy: keysetOrder<Prisma.GatewayOrderByWithRelationInput>(['enrolledAt', 'id'], 'desc'),
      take: page.take,
    });
    return rows.map(toGateway);
  }

  /**
   * The workspace's gateways that are not revoked: how many, how many were
   * seen since `since`, and the `limit` seen most recently.
   */
  async gatewayActivity(
    scope: WorkspaceScope,
    since: Date,
    limit: number,
  ): Promise<{ enrolled: number; seen: number; recent: GatewayRecord[] }> {
    const active = { organizationId: scope.organizationId, workspaceId: scope.workspaceId, revokedAt: null };
    const [enrolled, seen, recent] = await Promise.all([
      this.client.gateway.count({ where: active }),
      this.client.gateway.count({ where: { ...active, lastSeenAt: { gte: since } } }),
      this.client.gateway.findMany({
        where: active,
        select: gatewaySelect,
        orderBy: [{ lastSeenAt: { sort: 'desc', nulls: 'last' } }, { enrolledAt: 'desc' }, { id: 'asc' }],
        take: limit,
      }),
    ]);
    return { enrolled, seen, recent: recent.map(toGateway) };
  }

  async findGateway(scope: WorkspaceScope, id: string, tx?: Transaction): Promise<GatewayWithTokens | null> {
    const row = await this.use(tx).gateway.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      select: withTokens,
    });
    return row ? toGatewayWithTokens(row) : null;
  }

  /** As findGateway, its row locked until the transaction ends: two rotations take turns. */
  async lockGateway(scope: WorkspaceScope, id: string, tx: Transaction): Promise<GatewayWithTokens | null> {
    await tx.$queryRaw`SELECT id FROM gateways WHERE id = ${id}::uuid AND organization_id = ${scope.organizationId}::uuid AND workspace_id = ${scope.workspaceId}::uuid FOR UPDATE`;
    return this.findGateway(scope, id, tx);
  }

  /** A new current token; the one it replaces stays good until `previousTokenValidUntil` when its hash is kept. */
  async replaceToken(
    scope: WorkspaceScope,
    id: string,
    data: {
      tokenHash: string;
      prefix: string;
      tokenExpiresAt: Date | null;
      previousTokenHash: string | null;
      previousTokenValidUntil: Date | null;
    },
    tx: Transaction,
  ): Promise<void> {
    await tx.gateway.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      data,
    });
  }

  /**
   * Offboarding: every gateway of the organisation enrolled with a code one
   * of `refs` made, revoked or not, each locked until the transaction ends.
   */
  lockEnrolledBy(scope: OrgScope, refs: string[], tx: Transaction): Promise<GatewayWithTokens[]> {
    return lockEnrolled(tx, scope.organizationId, null, refs);
  }

  /** As lockEnrolledBy, in the scope's workspace only: a person's gateways there, revoked by person. */
  lockEnrolledByIn(scope: WorkspaceScope, refs: string[], tx: Transaction): Promise<GatewayWithTokens[]> {
    return lockEnrolled(tx, scope.organizationId, scope.workspaceId, refs);
  }

  async updateGateway(
    scope: WorkspaceScope,
    id: string,
    data: { groups?: string[]; revokedAt?: Date },
    tx: Transaction,
  ): Promise<void> {
    await tx.gateway.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      data,
    });
  }

  async settings(scope: OrgScope): Promise<GatewaySettingsRecord> {
    const row = await this.client.gatewaySettings.findUnique({ where: { organizationId: scope.organizationId } });
    return row
      ? {
          allowLocalServers: row.allowLocalServers,
          offlineMode: row.offlineMode as OfflineMode,
          maxStaleSeconds: row.maxStaleSeconds,
          updatedAt: row.updatedAt,
        }
      : DEFAULT_SETTINGS;
  }

  async saveSettings(scope: OrgScope, data: Omit<GatewaySettingsRecord, 'updatedAt'>, tx: Transaction): Promise<void> {
    await tx.gatewaySettings.upsert({
      where: { organizationId: scope.organizationId },
      create: { organizationId: scope.organizationId, ...data },
      update: data,
    });
  }

  async organizationSlug(scope: OrgScope): Promise<string> {
    const row = await this.client.organization.findUniqueOrThrow({
      where: { id: scope.organizationId },
      select: { slug: true },
    });
    return row.slug;
  }
}
