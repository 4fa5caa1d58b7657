import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope, WorkspaceScope } from '@aileron/auth';
import { Keyset, keysetAfter, keysetOrder, Prisma, Repository, Transaction } from '@aileron/database';

export type CreatorKind = 'token' | 'user' | 'gateway';

export interface SessionRecord {
  id: string;
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
  name: string | null;
  agent: string | null;
  caps: string[];
  caveats: string[];
  creatorKind: CreatorKind;
  creatorId: string;
  keyId: string;
  createdAt: Date;
  expiresAt: Date;
  endedAt: Date | null;
  endedBy: string | null;
}

/** A session the expiry sweep has just marked announced. */
export interface ExpiredSession {
  id: string;
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
  name: string | null;
}

export type NewSession = Pick<
  SessionRecord,
  'id' | 'name' | 'agent' | 'caps' | 'caveats' | 'creatorKind' | 'creatorId' | 'keyId' | 'expiresAt'
>;

export interface MessageRecord {
  id: string;
  sessionId: string;
  direction: 'agent' | 'people';
  text: string;
  level: string;
  author: string;
  createdAt: Date;
}

export interface RootKeyRecord {
  keyId: string;
  sealed: string;
  createdAt: Date;
  retiredAt: Date | null;
}

const include = { workspace: { select: { slug: true } } } as const;
type Row = Prisma.AgentSessionGetPayload<{ include: typeof include }>;

function toRecord(row: Row): SessionRecord {
  const { workspace, ...rest } = row;
  return { ...rest, workspaceSlug: workspace.slug, creatorKind: rest.creatorKind as CreatorKind };
}

function toMessage(row: Prisma.AgentSessionMessageGetPayload<object>): MessageRecord {
  return {
    id: row.id,
    sessionId: row.sessionId,
    direction: row.direction as MessageRecord['direction'],
    text: row.text,
    level: row.level,
    author: row.author,
    createdAt: row.createdAt,
  };
}

/** Agent sessions, their messages and the organisations' session root keys. */
@Injectable()
export class AgentSessionsRepository extends Repository {
  async create(scope: WorkspaceScope, data: NewSession, tx: Transaction): Promise<SessionRecord> {
    const row = await tx.agentSession.create({
      data: { ...data, organizationId: scope.organizationId, workspaceId: scope.workspaceId },
      include,
    });
    return toRecord(row);
  }

  async get(scope: OrgScope, id: string, tx?: Transaction): Promise<SessionRecord | null> {
    const row = await this.use(tx).agentSession.findFirst({
      where: { organizationId: scope.organizationId, id },
      include,
    });
    return row ? toRecord(row) : null;
  }

  /** Newest first, the id breaking ties. */
  async list(
    scope: WorkspaceScope,
    filter: { live: boolean; creator?: string },
    page: Keyset<{ createdAt: Date; id: string }>,
    now: Date,
  ): Promise<SessionRecord[]> {
    const [creatorKind, creatorId] = filter.creator?.split(':', 2) ?? [];
    const rows = await this.client.agentSession.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        ...(filter.live ? { endedAt: null, expiresAt: { gt: now } } : {}),
        ...(creatorKind && creatorId ? { creatorKind, creatorId } : {}),
        ...keysetAfter<Prisma.AgentSessionWhereInput>(
          ['createdAt', 'id'],
          'desc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      include,
      orderBy: keysetOrder<Prisma.AgentSessionOrderByWithRelationInput>(['createdAt', 'id'], 'desc'),
      take: page.take,
    });
    return rows.map(toRecord);
  }

  /** The sessions not ended nor expired that these creators (`user:<id>`, `token:<id>`, `gateway:<id>`) started, in the organisation. */
  async liveStartedBy(tx: Transaction, scope: OrgScope, creators: string[], now: Date): Promise<SessionRecord[]> {
    const rows = await tx.agentSession.findMany({
      where: {
        organizationId: scope.organizationId,
        endedAt: null,
        expiresAt: { gt: now },
        OR: creators.map((ref) => {
          const [creatorKind, creatorId] = ref.split(':', 2);
          return { creatorKind, creatorId };
        }),
      },
      include,
      orderBy: { id: 'asc' },
    });
    return rows.map(toRecord);
  }

  /**
   * Ends a session; false when it had already ended, or its expiry was
   * announced: either said `session.ended` once already.
   */
  async end(tx: Transaction, scope: OrgScope, id: string, endedBy: string, at: Date): Promise<boolean> {
    const { count } = await tx.agentSession.updateMany({
      where: { organizationId: scope.organizationId, id, endedAt: null, expiryAnnouncedAt: null },
      data: { endedAt: at, endedBy },
    });
    return count === 1;
  }

  /**
   * Marks up to `limit` sessions that expired by `now` without ending, and
   * whose expiry was not announced yet, as announced, in every organisation.
   * Rows another replica's sweep holds are skipped (it announces them), so
   * each is announced once.
   */
  async markExpired(tx: Transaction, _system: SystemScope, now: Date, limit: number): Promise<ExpiredSession[]> {
    const at = now.toISOString();
    const rows = await tx.$queryRaw<
      { id: string; organization_id: string; workspace_id: string; slug: string; name: string | null }[]
    >`
      UPDATE agent_sessions s SET expiry_announced_at = ${at}::timestamptz
        FROM workspaces w
       WHERE w.id = s.workspace_id AND w.organization_id = s.organization_id
         AND s.id IN (SELECT id FROM agent_sessions
                       WHERE expiry_announced_at IS NULL AND ended_at IS NULL AND expires_at <= ${at}::timestamptz
                       ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
      RETURNING s.id, s.organization_id, s.workspace_id, w.slug, s.name`;
    return rows.map((r) => ({
      id: r.id,
      organizationId: r.organization_id,
      workspaceId: r.workspace_id,
      workspaceSlug: r.slug,
      name: r.name,
    }));
  }

  /** When the earliest session that is neither ended nor announced expires, in every organisation (null: none). */
  async nextExpiry(_system: SystemScope): Promise<Date | null> {
    const row = await this.client.agentSession.findFirst({
      where: { expiryAnnouncedAt: null, endedAt: null },
      orderBy: { expiresAt: 'asc' },
      select: { expiresAt: true },
    });
    return row?.expiresAt ?? null;
  }

  async addMessage(
    tx: Transaction,
    scope: OrgScope,
    message: Omit<MessageRecord, 'id' | 'createdAt'>,
  ): Promise<MessageRecord> {
    return toMessage(
      await tx.agentSessionMessage.create({ data: { ...message, organizationId: scope.organizationId } }),
    );
  }

  /** Messages (of one direction, or both when null), oldest first, after `after` (all when null). */
  async messages(
    scope: OrgScope,
    sessionId: string,
    direction: MessageRecord['direction'] | null,
    after: Pick<MessageRecord, 'id' | 'createdAt'> | null,
    limit: number,
  ): Promise<MessageRecord[]> {
    // (created_at, id) is the order, so two messages of the same millisecond are neither skipped nor repeated
    const rows = await this.client.agentSessionMessage.findMany({
      where: {
        organizationId: scope.organizationId,
        sessionId,
        ...(direction ? { direction } : {}),
        ...keysetAfter<Prisma.AgentSessionMessageWhereInput>(
          ['createdAt', 'id'],
          'asc',
          after ? [after.createdAt, after.id] : undefined,
        ),
      },
      orderBy: keysetOrder<Prisma.AgentSessionMessageOrderByWithRelationInput>(['createdAt', 'id'], 'asc'),
      take: limit,
    });
    return rows.map(toMessage);
  }

  async message(scope: OrgScope, id: string): Promise<MessageRecord | null> {
    const row = await this.client.agentSessionMessage.findFirst({
      where: { organizationId: scope.organizationId, id },
    });
    return row ? toMessage(row) : null;
  }

  /** Newest first (the key id breaking ties); every key, or a page of them when `page` is given. */
  async rootKeys(scope: OrgScope, page?: Keyset<{ createdAt: Date; id: string }>): Promise<RootKeyRecord[]> {
    return this.client.agentSessionRootKey.findMany({
      where: {
        organizationId: scope.organizationId,
        ...keysetAfter<Prisma.AgentSessionRootKeyWhereInput>(
          ['createdAt', 'keyId'],
          'desc',
          page?.after && [page.after.createdAt, page.after.id],
        ),
      },
      select: { keyId: true, sealed: true, createdAt: true, retiredAt: true },
      orderBy: keysetOrder<Prisma.AgentSessionRootKeyOrderByWithRelationInput>(['createdAt', 'keyId'], 'desc'),
      ...(page ? { take: page.take } : {}),
    });
  }

  /** Adds a key, retiring the ones before it (they still verify until removed). */
  async addRootKey(scope: OrgScope, key: { keyId: string; sealed: string }, now: Date): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.agentSessionRootKey.updateMany({
        where: { organizationId: scope.organizationId, retiredAt: null },
        data: { retiredAt: now },
      });
      await tx.agentSessionRootKey.create({ data: { organizationId: scope.organizationId, ...key } });
    });
  }

  /** The first key of an organisation; concurrent first uses agree on one. */
  async firstRootKey(scope: OrgScope, key: { keyId: string; sealed: string }): Promise<void> {
    await this.client.$executeRaw`INSERT INTO session_root_keys (organization_id, key_id, sealed)
      SELECT ${scope.organizationId}::uuid, ${key.keyId}, ${key.sealed}
      WHERE NOT EXISTS (SELECT 1 FROM session_root_keys WHERE organization_id = ${scope.organizationId}::uuid)`;
  }

  async removeRootKey(scope: OrgScope, keyId: string): Promise<boolean> {
    const { count } = await this.client.agentSessionRootKey.deleteMany({
      where: { organizationId: scope.organizationId, keyId, retiredAt: { not: null } },
    });
    return count === 1;
  }

  async replaceSealed(scope: OrgScope, keyId: string, from: string, to: string): Promise<boolean> {
    const { count } = await this.client.agentSessionRootKey.updateMany({
      where: { organizationId: scope.organizationId, keyId, sealed: from },
      data: { sealed: to },
    });
    return count === 1;
  }
}
