import { Injectable } from '@nestjs/common';
import type { OrgScope, SystemScope, WorkspaceScope } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import {
  DatabaseService,
  Keyset,
  keysetAfter,
  keysetOrder,
  Repository,
  Prisma,
  storableJson,
  Transaction,
} from '@aileron/database';
import type { ApprovalStatus } from './domain/approval';
import type { RoutingDocument } from './domain/routing';

export interface ApprovalDecisionRecord {
  approver: string;
  decision: 'approve' | 'deny';
  reason: string | null;
  via: string;
  createdAt: Date;
}

export interface ApprovalRecord {
  id: string;
  organizationId: string;
  workspaceId: string;
  status: ApprovalStatus;
  requester: string;
  requestedBy: string;
  gatewayId: string | null;
  sessionId: string | null;
  /** the agent session whose caveat token asked (`sessionId` is the caller's own session label) */
  agentSessionId: string | null;
  server: string;
  tool: string;
  arguments: Record<string, unknown>;
  argumentsDigest: string;
  executionMode: string;
  policyVersion: number;
  rules: string[];
  route: string;
  quorum: number;
  expiresAt: Date;
  createdAt: Date;
  decidedAt: Date | null;
  decisionReason: string | null;
  consumedAt: Date | null;
  decisions: ApprovalDecisionRecord[];
}

export type NewApproval = Omit<
  ApprovalRecord,
  | 'id'
  | 'organizationId'
  | 'workspaceId'
  | 'status'
  | 'createdAt'
  | 'decidedAt'
  | 'decisionReason'
  | 'consumedAt'
  | 'decisions'
>;

/** `token:<uuid>` or `user:<uuid>`, as describePrincipal writes `created_by` */
const UUID_REF = /^(token|user):[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const include = { decisions: { orderBy: { createdAt: 'asc' } } } as const;
type Row = Prisma.ApprovalRequestGetPayload<{ include: typeof include }>;

/** Approval requests, votes, one-time links and routing documents. */
@Injectable()
export class ApprovalsRepository extends Repository {
  constructor(
    db: DatabaseService,
    private readonly clock: Clock,
  ) {
    super(db);
  }

  async create(scope: WorkspaceScope, data: NewApproval, tx: Transaction): Promise<ApprovalRecord> {
    const row = await tx.approvalRequest.create({
      data: {
        ...data,
        // the display copy; what a retry must match is the digest of the originals
        arguments: storableJson(data.arguments) as Prisma.InputJsonValue,
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
      },
      include,
    });
    return toRecord(row);
  }

  /** By id inside the caller's organisation (an approval id is all a reviewer has). */
  async get(scope: OrgScope, id: string, tx?: Transaction): Promise<ApprovalRecord | null> {
    const row = await this.use(tx).approvalRequest.findFirst({
      where: { organizationId: scope.organizationId, id },
      include,
    });
    return row ? toRecord(row) : null;
  }

  /**
   * Offboarding: the organisation's requests still pending and unexpired that
   * name one of `requesters` (case aside), were asked by one of `requestedBy`,
   * or came from one of these gateways or agent sessions; each locked until
   * the transaction ends, as a vote locks it.
   */
  async lockPendingOf(
    tx: Transaction,
    scope: OrgScope,
    of: { requesters: string[]; requestedBy: string[]; gatewayIds: string[]; agentSessionIds: string[] },
    now: Date,
  ): Promise<{ record: ApprovalRecord; workspaceSlug: string }[]> {
    const rows = await tx.$queryRaw<{ id: string; slug: string }[]>`
      SELECT r.id::text AS id, w.slug FROM approval_requests r JOIN workspaces w ON w.id = r.workspace_id
       WHERE r.organization_id = ${scope.organizationId}::uuid AND r.status = 'pending' AND r.expires_at > ${now}
         AND (lower(r.requester) = ANY(${of.requesters.map((r) => r.toLowerCase())}::text[])
              OR r.requested_by = ANY(${of.requestedBy}::text[])
              OR r.gateway_id = ANY(${of.gatewayIds}::uuid[])
              OR r.agent_session_id = ANY(${of.agentSessionIds}::uuid[]))
       ORDER BY r.id FOR UPDATE OF r`;
    const found: { record: ApprovalRecord; workspaceSlug: string }[] = [];
    for (const row of rows) {
      const record = await this.get(scope, row.id, tx);
      if (record) found.push({ record, workspaceSlug: row.slug });
    }
    return found;
  }

  /** Offboarding: the person's one-time review links stop working (a link decides as the person it names). */
  async deleteLinksOf(tx: Transaction, scope: OrgScope, userId: string): Promise<number> {
    return (await tx.approvalLink.deleteMany({ where: { organizationId: scope.organizationId, userId } })).count;
  }

  /** Locks the request until the transaction ends: votes on one request are counted one at a time. */
  async lock(tx: Transaction, scope: OrgScope, id: string): Promise<ApprovalRecord | null> {
    const rows = await tx.$queryRaw<
      { id: string }[]
    >`SELECT id FROM approval_requests WHERE id = ${id}::uuid AND organization_id = ${scope.organizationId}::uuid FOR UPDATE`;
    return rows.length === 0 ? null : this.get(scope, id, tx);
  }

  async addDecision(
    tx: Transaction,
    scope: OrgScope,
    id: string,
    vote: Omit<ApprovalDecisionRecord, 'createdAt'>,
  ): Promise<void> {
    await tx.approvalDecision.create({ data: { approvalId: id, organizationId: scope.organizationId, ...vote } });
  }

  async finish(
    tx: Transaction,
    scope: OrgScope,
    id: string,
    status: ApprovalStatus,
    reason: string | null,
  ): Promise<void> {
    await tx.approvalRequest.updateMany({
      where: { organizationId: scope.organizationId, id, status: 'pending' },
      data: { status, decidedAt: this.clock.date(), decisionReason: reason },
    });
  }

  /**
   * Uses an approval for exactly the call it names, once: one UPDATE whose
   * conditions are the whole check, so two racing executions cannot both pass.
   */
  async consume(
    tx: Transaction,
    scope: WorkspaceScope,
    id: string,
    call: {
      server: string;
      tool: string;
      argumentsDigest: string;
      requester: string;
      sessionId: string | null;
      gatewayId: string | null;
    },
  ): Promise<boolean> {
    const count = await tx.$executeRaw`
      UPDATE approval_requests SET consumed_at = now()
      WHERE id = ${id}::uuid AND organization_id = ${scope.organizationId}::uuid AND workspace_id = ${scope.workspaceId}::uuid
        AND status = 'approved' AND consumed_at IS NULL AND expires_at > ${this.clock.date().toISOString()}::timestamptz
        AND server = ${call.server} AND tool = ${call.tool} AND arguments_digest = ${call.argumentsDigest}
        AND requester = ${call.requester} AND session_id IS NOT DISTINCT FROM ${call.sessionId}
        AND gateway_id IS NOT DISTINCT FROM ${call.gatewayId}::uuid`;
    return count === 1;
  }

  /**
   * The newest request for exactly this call that can still let it run: an
   * approved one not yet used, or one still pending. A retried call finds its
   * approval here instead of asking again.
   */
  async findForCall(
    scope: WorkspaceScope,
    call: {
      server: string;
      tool: string;
      argumentsDigest: string;
      requester: string;
      sessionId: string | null;
      gatewayId: string | null;
    },
  ): Promise<ApprovalRecord | null> {
    const row = await this.client.approvalRequest.findFirst({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        server: call.server,
        tool: call.tool,
        argumentsDigest: call.argumentsDigest,
        requester: call.requester,
        sessionId: call.sessionId,
        gatewayId: call.gatewayId,
        expiresAt: { gt: this.clock.date() },
        OR: [{ status: 'pending' }, { status: 'approved', consumedAt: null }],
      },
      orderBy: { createdAt: 'desc' },
      include,
    });
    return row ? toRecord(row) : null;
  }

  /** Newest first, the id breaking ties. */
  async list(
    scope: WorkspaceScope,
    filter: { status?: ApprovalStatus },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<ApprovalRecord[]> {
    const status: Prisma.ApprovalRequestWhereInput =
      filter.status === 'pending'
        ? { status: 'pending', expiresAt: { gt: this.clock.date() } }
        : filter.status === 'expired'
          ? { OR: [{ status: 'expired' }, { status: 'pending', expiresAt: { lte: this.clock.date() } }] }
          : filter.status
            ? { status: filter.status }
            : {};
    const rows = await this.client.approvalRequest.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        AND: [
          status,
          keysetAfter<Prisma.ApprovalRequestWhereInput>(
            ['createdAt', 'id'],
            'desc',
            page.after && [page.after.createdAt, page.after.id],
          ),
        ],
      },
      orderBy: keysetOrder<Prisma.ApprovalRequestOrderByWithRelationInput>(['createdAt', 'id'], 'desc'),
      take: page.take,
      include,
    });
    return rows.map(toRecord);
  }

  /** Requests still pending and not past their expiry. */
  countPending(scope: WorkspaceScope): Promise<number> {
    return this.client.approvalRequest.count({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        status: 'pending',
        expiresAt: { gt: this.clock.date() },
      },
    });
  }

  /** Pending requests past their expiry, across tenants (system work), locked for the expiring transaction. */
  async lockExpired(
    tx: Transaction,
    _system: SystemScope,
    limit: number,
  ): Promise<{ id: string; organizationId: string; workspaceId: string }[]> {
    const rows = await tx.$queryRaw<{ id: string; organization_id: string; workspace_id: string }[]>`
      SELECT id, organization_id, workspace_id FROM approval_requests
      WHERE status = 'pending' AND expires_at <= ${this.clock.date().toISOString()}::timestamptz ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
    return rows.map((r) => ({ id: r.id, organizationId: r.organization_id, workspaceId: r.workspace_id }));
  }

  /** When the earliest pending request expires, in every organisation (null: none is pending). */
  async nextExpiry(_system: SystemScope): Promise<Date | null> {
    const row = await this.client.approvalRequest.findFirst({
      where: { status: 'pending' },
      orderBy: { expiresAt: 'asc' },
      select: { expiresAt: true },
    });
    return row?.expiresAt ?? null;
  }

  async routing(
    scope: WorkspaceScope,
  ): Promise<{ document: RoutingDocument; version: number; updatedBy: string | null; updatedAt: Date } | null> {
    const row = await this.client.approvalRouting.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId },
    });
    return row
      ? {
          document: row.document as unknown as RoutingDocument,
          version: row.version,
          updatedBy: row.updatedBy,
          updatedAt: row.updatedAt,
        }
      : null;
  }

  async putRouting(scope: WorkspaceScope, document: RoutingDocument, actor: string, tx: Transaction): Promise<number> {
    const existing = await tx.approvalRouting.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId },
      select: { version: true },
    });
    const version = (existing?.version ?? 0) + 1;
    const json = document as unknown as Prisma.InputJsonValue;
    await tx.approvalRouting.upsert({
      where: { workspaceId: scope.workspaceId },
      create: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        document: json,
        version,
        updatedBy: actor,
      },
      update: { document: json, version, updatedBy: actor, updatedAt: this.clock.date() },
    });
    return version;
  }

  /** Users of the organisation by id or e-mail (approvers named in routes). */
  async users(scope: OrgScope, people: string[]): Promise<{ id: string; email: string | null }[]> {
    const ids = people.filter((p) => /^[0-9a-f-]{36}$/i.test(p));
    const emails = people.filter((p) => p.includes('@')).map((p) => p.toLowerCase());
    return this.client.user.findMany({
      where: {
        organizationId: scope.organizationId,
        OR: [{ id: { in: ids } }, { email: { in: emails, mode: 'insensitive' } }],
      },
      select: { id: true, email: true },
    });
  }

  /**
   * The person an API token acts for: whoever created it, through tokens made
   * with tokens (a few hops); null for one the installation made (bootstrap).
   */
  /**
   * Whom a principal ref acts for: `token:<id>` refs followed through their
   * creators (a few hops at most) to a user or a root token. `chain` holds
   * every ref passed, the first included; `user` is where it ends, if a user.
   */
  async personOf(
    scope: OrgScope,
    ref: string,
  ): Promise<{ chain: string[]; user: { id: string; email: string | null } | null }> {
    const chain: string[] = [];
    let current: string | null = ref;
    for (let hop = 0; hop < 6 && current !== null && UUID_REF.test(current) && !chain.includes(current); hop++) {
      chain.push(current);
      if (!current.startsWith('token:')) break;
      const row: { createdBy: string | null } | null = await this.client.apiToken.findFirst({
        where: { organizationId: scope.organizationId, id: current.slice(6) },
        select: { createdBy: true },
      });
      current = row?.createdBy ?? null;
    }
    const last = chain.at(-1);
    const user = last?.startsWith('user:') ? await this.user(scope, last.slice(5)) : null;
    return { chain, user };
  }

  async user(
    scope: OrgScope,
    id: string,
  ): Promise<{
    id: string;
    email: string | null;
    name: string | null;
    idpGroups: string[];
    deactivatedAt: Date | null;
  } | null> {
    return this.client.user.findFirst({
      where: { organizationId: scope.organizationId, id },
      select: { id: true, email: true, name: true, idpGroups: true, deactivatedAt: true },
    });
  }

  /**
   * Whose request this is, before anyone is signed in: the review page offers
   * that organisation's sign-in. The id itself is what the reviewer was sent.
   */
  async organizationOf(_system: SystemScope, id: string): Promise<{ id: string; slug: string } | null> {
    const row = await this.client.approvalRequest.findFirst({
      where: { id },
      select: { workspace: { select: { organization: { select: { id: true, slug: true } } } } },
    });
    return row?.workspace.organization ?? null;
  }

  async workspace(scope: OrgScope, id: string): Promise<{ id: string; slug: string } | null> {
    return this.client.workspace.findFirst({
      where: { organizationId: scope.organizationId, id },
      select: { id: true, slug: true },
    });
  }

  /** The roles a user holds in the workspace: a membership, or an organisation role that spans workspaces. */
  async workspaceRoles(scope: WorkspaceScope, userId: string, tx?: Transaction): Promise<string[]> {
    // one after the other: inside a transaction they share one connection anyway
    const membership = await this.use(tx).membership.findFirst({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, userId },
      select: { role: true },
    });
    const user = await this.use(tx).user.findFirst({
      where: { organizationId: scope.organizationId, id: userId },
      select: { role: true },
    });
    return [membership?.role, user && ['owner', 'admin', 'auditor'].includes(user.role) ? user.role : undefined].filter(
      (r): r is NonNullable<typeof r> => r !== undefined,
    );
  }

  async createLink(
    tx: Transaction,
    scope: OrgScope,
    link: { tokenHash: string; approvalId: string; userId: string; expiresAt: Date },
  ): Promise<void> {
    await tx.approvalLink.create({ data: { ...link, organizationId: scope.organizationId } });
  }

  /** A one-time link, found by its hash (the link is the credential: it names its organisation). */
  findLink(
    _system: SystemScope,
    tokenHash: string,
  ): Promise<{
    approvalId: string;
    organizationId: string;
    userId: string;
    expiresAt: Date;
    usedAt: Date | null;
  } | null> {
    return this.client.approvalLink.findUnique({
      where: { tokenHash },
      select: { approvalId: true, organizationId: true, userId: true, expiresAt: true, usedAt: true },
    });
  }

  /** Spends a link; false if it was spent already (two tabs, a replay). */
  async useLink(tx: Transaction, scope: OrgScope, tokenHash: string): Promise<boolean> {
    return (
      (
        await tx.approvalLink.updateMany({
          where: {
            organizationId: scope.organizationId,
            tokenHash,
            usedAt: null,
            expiresAt: { gt: this.clock.date() },
          },
          data: { usedAt: this.clock.date() },
        })
      ).count === 1
    );
  }
}

function toRecord(row: Row): ApprovalRecord {
  return {
    id: row.id,
    organizationId: row.organizationId,
    workspaceId: row.workspaceId,
    status: row.status as ApprovalStatus,
    requester: row.requester,
    requestedBy: row.requestedBy,
    gatewayId: row.gatewayId,
    sessionId: row.sessionId,
    agentSessionId: row.agentSessionId,
    server: row.server,
    tool: row.tool,
    arguments: row.arguments as Record<string, unknown>,
    argumentsDigest: row.argumentsDigest,
    executionMode: row.executionMode,
    policyVersion: row.policyVersion,
    rules: row.rules,
    route: row.route,
    quorum: row.quorum,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
    decidedAt: row.decidedAt,
    decisionReason: row.decisionReason,
    consumedAt: row.consumedAt,
    decisions: row.decisions.map((d) => ({
      approver: d.approver,
      decision: d.decision as 'approve' | 'deny',
      reason: d.reason,
      via: d.via,
      createdAt: d.createdAt,
    })),
  };
}
