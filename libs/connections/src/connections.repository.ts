import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope, WorkspaceScope } from '@aileron/auth';
import { Keyset, keysetAfter, keysetOrder, Prisma, Repository, Transaction } from '@aileron/database';
import type { UpstreamAuthorization } from './upstream-oauth';

export interface ConnectionRecord {
  id: string;
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
  server: string;
  /** `user:<id>` or `workspace` */
  subject: string;
  userId: string | null;
  user: { email: string | null; name: string | null } | null;
  /** connected or needs_reconnect, as stored (domain/connection.ts `stateOf` tells expired apart) */
  state: string;
  upstream: UpstreamAuthorization;
  scope: string | null;
  accessExpiresAt: Date | null;
  hasRefreshToken: boolean;
  generation: number;
  refreshLeaseUntil: Date | null;
  refreshLeaseHolder: string | null;
  lastRefreshedAt: Date | null;
  problem: string | null;
  createdBy: string;
  createdAt: Date;
  connectedAt: Date;
  lastUsedAt: Date | null;
}

/** What a successful sign-in or refresh stores beside the sealed tokens. */
export interface TokenFacts {
  scope: string | null;
  accessExpiresAt: Date | null;
  hasRefreshToken: boolean;
}

export interface StartRecord {
  id: string;
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
  server: string;
  subject: string;
  userId: string;
  bindingHash: string;
  upstream: UpstreamAuthorization;
  scope: string | null;
  expiresAt: Date;
}

const connectionSelect = {
  id: true,
  organizationId: true,
  workspaceId: true,
  server: true,
  subject: true,
  userId: true,
  state: true,
  upstream: true,
  scope: true,
  accessExpiresAt: true,
  hasRefreshToken: true,
  generation: true,
  refreshLeaseUntil: true,
  refreshLeaseHolder: true,
  lastRefreshedAt: true,
  problem: true,
  createdBy: true,
  createdAt: true,
  connectedAt: true,
  lastUsedAt: true,
  user: { select: { email: true, name: true } },
  workspace: { select: { slug: true } },
} as const;

type ConnectionRow = Prisma.UpstreamConnectionGetPayload<{ select: typeof connectionSelect }>;

function toConnection({ workspace, ...row }: ConnectionRow): ConnectionRecord {
  return { ...row, upstream: row.upstream as unknown as UpstreamAuthorization, workspaceSlug: workspace.slug };
}

const startSelect = {
  id: true,
  organizationId: true,
  workspaceId: true,
  server: true,
  subject: true,
  userId: true,
  bindingHash: true,
  upstream: true,
  scope: true,
  expiresAt: true,
  workspace: { select: { slug: true } },
} as const;

type StartRow = Prisma.UpstreamConnectionStartGetPayload<{ select: typeof startSelect }>;

function toStart({ workspace, ...row }: StartRow): StartRecord {
  return { ...row, upstream: row.upstream as unknown as UpstreamAuthorization, workspaceSlug: workspace.slug };
}

/**
 * The pool's connections to upstream MCP servers (upstream_connections) and
 * the ones being made (upstream_connection_starts). Their tokens are not
 * here: the vault keeps them sealed.
 */
@Injectable()
export class ConnectionsRepository extends Repository {
  /** Newest first, the id breaking ties; `subjects`: only connections of these subjects. */
  async list(
    scope: WorkspaceScope,
    filter: { subjects?: string[]; server?: string },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<ConnectionRecord[]> {
    const rows = await this.client.upstreamConnection.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        ...(filter.subjects ? { subject: { in: filter.subjects } } : {}),
        ...(filter.server ? { server: filter.server } : {}),
        ...keysetAfter<Prisma.UpstreamConnectionWhereInput>(
          ['createdAt', 'id'],
          'desc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      select: connectionSelect,
      orderBy: keysetOrder<Prisma.UpstreamConnectionOrderByWithRelationInput>(['createdAt', 'id'], 'desc'),
      take: page.take,
    });
    return rows.map(toConnection);
  }

  async find(scope: WorkspaceScope, id: string, tx?: Transaction): Promise<ConnectionRecord | null> {
    const row = await this.use(tx).upstreamConnection.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      select: connectionSelect,
    });
    return row && toConnection(row);
  }

  async findBySubject(
    scope: WorkspaceScope,
    server: string,
    subject: string,
    tx?: Transaction,
  ): Promise<ConnectionRecord | null> {
    const row = await this.use(tx).upstreamConnection.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, server, subject },
      select: connectionSelect,
    });
    return row && toConnection(row);
  }

  /**
   * A signed-in connection: new, or the subject's earlier one replaced (a
   * reconnect keeps its id, so what named it still does). A new generation
   * either way, and no refresh in progress.
   */
  async saveConnected(
    scope: WorkspaceScope,
    data: TokenFacts & {
      server: string;
      subject: string;
      userId: string | null;
      upstream: UpstreamAuthorization;
      createdBy: string;
      at: Date;
    },
    tx: Transaction,
  ): Promise<ConnectionRecord> {
    const facts = {
      state: 'connected',
      upstream: data.upstream as unknown as Prisma.InputJsonValue,
      scope: data.scope,
      accessExpiresAt: data.accessExpiresAt,
      hasRefreshToken: data.hasRefreshToken,
      refreshLeaseUntil: null,
      refreshLeaseHolder: null,
      lastRefreshedAt: null,
      problem: null,
      connectedAt: data.at,
    };
    const row = await tx.upstreamConnection.upsert({
      where: {
        organizationId_workspaceId_server_subject: {
          organizationId: scope.organizationId,
          workspaceId: scope.workspaceId,
          server: data.server,
          subject: data.subject,
        },
      },
      create: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        server: data.server,
        subject: data.subject,
        userId: data.userId,
        createdBy: data.createdBy,
        createdAt: data.at,
        generation: 1,
        ...facts,
      },
      update: { ...facts, createdBy: data.createdBy, generation: { increment: 1 } },
      select: connectionSelect,
    });
    return toConnection(row);
  }

  /**
   * Takes the connection's refresh for `holder` until `until`, if its tokens
   * are still those of `generation` and nobody else holds it: only one
   * replica at a time presents a refresh token, so a rotating one is never
   * used twice.
   */
  async takeLease(
    scope: WorkspaceScope,
    id: string,
    generation: number,
    holder: string,
    until: Date,
    now: Date,
  ): Promise<boolean> {
    const { count } = await this.client.upstreamConnection.updateMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        id,
        generation,
        state: 'connected',
        OR: [{ refreshLeaseUntil: null }, { refreshLeaseUntil: { lte: now } }],
      },
      data: { refreshLeaseUntil: until, refreshLeaseHolder: holder },
    });
    return count === 1;
  }

  /** The refreshed tokens' facts, a new generation, the lease let go: only while `holder` still holds it. */
  async saveRefreshed(
    scope: WorkspaceScope,
    id: string,
    holder: string,
    facts: TokenFacts,
    at: Date,
    tx: Transaction,
  ): Promise<boolean> {
    const { count } = await tx.upstreamConnection.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id, refreshLeaseHolder: holder },
      data: {
        ...facts,
        generation: { increment: 1 },
        refreshLeaseUntil: null,
        refreshLeaseHolder: null,
        lastRefreshedAt: at,
      },
    });
    return count === 1;
  }

  /** The upstream no longer takes the connection; its lease (if `holder` has it) goes. Whether it changed. */
  async markNeedsReconnect(
    scope: WorkspaceScope,
    id: string,
    generation: number,
    problem: string,
    tx: Transaction,
    upstream?: UpstreamAuthorization,
  ): Promise<boolean> {
    const { count } = await tx.upstreamConnection.updateMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        id,
        generation,
        state: 'connected',
      },
      data: {
        state: 'needs_reconnect',
        problem,
        refreshLeaseUntil: null,
        refreshLeaseHolder: null,
        ...(upstream ? { upstream: upstream as unknown as Prisma.InputJsonValue } : {}),
      },
    });
    return count === 1;
  }

  async releaseLease(scope: WorkspaceScope, id: string, holder: string): Promise<void> {
    await this.client.upstreamConnection.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id, refreshLeaseHolder: holder },
      data: { refreshLeaseUntil: null, refreshLeaseHolder: null },
    });
  }

  async touch(scope: WorkspaceScope, id: string, at: Date): Promise<void> {
    await this.client.upstreamConnection.updateMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id },
      data: { lastUsedAt: at },
    });
  }

  /** Deletes the connection if it is in the scope (and of `subject`, when given); answers what it deleted. */
  async delete(
    scope: WorkspaceScope,
    id: string,
    filter: { subject?: string },
    tx: Transaction,
  ): Promise<ConnectionRecord | null> {
    const row = await tx.upstreamConnection.findFirst({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        id,
        ...(filter.subject ? { subject: filter.subject } : {}),
      },
      select: connectionSelect,
    });
    if (!row) return null;
    // a concurrent delete may have taken it: only the one that deleted it reports it
    const { count } = await tx.upstreamConnection.deleteMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id: row.id },
    });
    return count === 1 ? toConnection(row) : null;
  }

  /** A person's connections in every workspace, deleted (offboarding); answers what it deleted. */
  async deleteOfUser(scope: OrgScope, userId: string, tx: Transaction): Promise<ConnectionRecord[]> {
    const rows = await tx.upstreamConnection.findMany({
      where: { organizationId: scope.organizationId, userId },
      select: connectionSelect,
    });
    await tx.upstreamConnection.deleteMany({ where: { organizationId: scope.organizationId, userId } });
    return rows.map(toConnection);
  }

  async createStart(
    scope: WorkspaceScope,
    data: Omit<StartRecord, 'id' | 'organizationId' | 'workspaceId' | 'workspaceSlug'> & { stateHash: string },
    tx: Transaction,
  ): Promise<string> {
    const row = await tx.upstreamConnectionStart.create({
      data: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        server: data.server,
        subject: data.subject,
        userId: data.userId,
        stateHash: data.stateHash,
        bindingHash: data.bindingHash,
        upstream: data.upstream as unknown as Prisma.InputJsonValue,
        scope: data.scope,
        expiresAt: data.expiresAt,
      },
      select: { id: true },
    });
    return row.id;
  }

  /**
   * The start a callback's `state` names, taken: deleted as it is read, so a
   * state works once, whichever replica it reaches. The state is the
   * credential here and names the tenant.
   */
  async takeStart(_system: SystemScope, stateHash: string, tx: Transaction): Promise<StartRecord | null> {
    const row = await tx.upstreamConnectionStart.findUnique({ where: { stateHash }, select: startSelect });
    if (!row) return null;
    const { count } = await tx.upstreamConnectionStart.deleteMany({ where: { stateHash } });
    return count === 1 ? toStart(row) : null;
  }

  /** Starts nobody finished in time, taken out (their sealed verifiers go with them, by the caller). */
  async takeExpiredStarts(
    _system: SystemScope,
    now: Date,
    limit: number,
  ): Promise<{ id: string; organizationId: string; workspaceId: string; workspaceSlug: string }[]> {
    const rows = await this.client.upstreamConnectionStart.findMany({
      where: { expiresAt: { lte: now } },
      select: { id: true, organizationId: true, workspaceId: true, workspace: { select: { slug: true } } },
      orderBy: { expiresAt: 'asc' },
      take: limit,
    });
    if (rows.length === 0) return [];
    await this.client.upstreamConnectionStart.deleteMany({ where: { id: { in: rows.map((r) => r.id) } } });
    return rows.map(({ workspace, ...row }) => ({ ...row, workspaceSlug: workspace.slug }));
  }
}
