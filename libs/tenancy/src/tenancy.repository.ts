import { Injectable } from '@nestjs/common';
import type { OrgScope, Role, SystemScope, WorkspaceScope } from '@aileron/auth';
import { Keyset, keysetAfter, keysetOrder, Repository, Prisma, Transaction } from '@aileron/database';
import type { PolicyDefault } from './tenancy.schemas';

export interface OrganizationRecord {
  id: string;
  slug: string;
  name: string;
  createdAt: Date;
}

export interface WorkspaceRecord {
  id: string;
  slug: string;
  name: string;
  policyDefault: PolicyDefault;
  createdAt: Date;
}

export interface UserRecord {
  id: string;
  email: string | null;
  name: string | null;
  subject: string | null;
  role: Role;
  createdAt: Date;
  lastLoginAt: Date | null;
  deactivatedAt: Date | null;
}

export interface MemberRecord {
  userId: string;
  email: string | null;
  name: string | null;
  role: Role;
  createdAt: Date;
}

export interface IdentityProviderData {
  issuer: string;
  jwksUrl: string;
  audience: string | null;
  /** the owner's explicit choice to accept tokens whatever their `aud` */
  allowAnyAudience: boolean;
  /** the owner's explicit choice to link sign-ins by e-mails the IdP has not verified */
  trustUnverifiedEmail: boolean;
  subjectClaim: string;
  emailClaim: string;
  nameClaim: string;
  roleClaim: string | null;
  roleMapping: Record<string, Role>;
  defaultRole: Role;
  groupsClaim: string;
  clientId: string | null;
  /** sealed by the root key (BrowserKeys); never leaves the control plane */
  clientSecretSealed: string | null;
  scopes: string[];
}

const workspaceSelect = { id: true, slug: true, name: true, policyDefault: true, createdAt: true } as const;
const userSelect = {
  id: true,
  email: true,
  name: true,
  subject: true,
  role: true,
  createdAt: true,
  lastLoginAt: true,
  deactivatedAt: true,
} as const;

/** Organisations, workspaces, users and memberships. */
@Injectable()
export class TenancyRepository extends Repository {
  /** Platform-level: an organisation is the scope itself, so none is taken. */
  async createOrganization(
    _system: SystemScope,
    data: { slug: string; name: string },
    tx: Transaction,
  ): Promise<OrganizationRecord> {
    return tx.organization.create({ data, select: { id: true, slug: true, name: true, createdAt: true } });
  }

  async findOrganizationBySlug(_system: SystemScope, slug: string): Promise<OrganizationRecord | null> {
    return this.client.organization.findUnique({
      where: { slug },
      select: { id: true, slug: true, name: true, createdAt: true },
    });
  }

  async countOrganizations(_system: SystemScope): Promise<number> {
    return this.client.organization.count();
  }

  async getOrganization(scope: OrgScope): Promise<OrganizationRecord> {
    return this.client.organization.findUniqueOrThrow({
      where: { id: scope.organizationId },
      select: { id: true, slug: true, name: true, createdAt: true },
    });
  }

  async getIdentityProvider(scope: OrgScope): Promise<IdentityProviderData | null> {
    const row = await this.client.identityProvider.findUnique({ where: { organizationId: scope.organizationId } });
    return row ? { ...row, roleMapping: row.roleMapping as Record<string, Role> } : null;
  }

  async putIdentityProvider(scope: OrgScope, data: IdentityProviderData, tx: Transaction): Promise<void> {
    const values = { ...data, roleMapping: data.roleMapping as Prisma.InputJsonValue };
    await tx.identityProvider.upsert({
      where: { organizationId: scope.organizationId },
      create: { organizationId: scope.organizationId, ...values },
      update: values,
    });
  }

  async deleteIdentityProvider(scope: OrgScope, tx: Transaction): Promise<boolean> {
    const { count } = await tx.identityProvider.deleteMany({ where: { organizationId: scope.organizationId } });
    return count > 0;
  }

  async createWorkspace(
    scope: OrgScope,
    data: { slug: string; name: string; policyDefault?: PolicyDefault },
    tx: Transaction,
  ): Promise<WorkspaceRecord> {
    return tx.workspace.create({ data: { organizationId: scope.organizationId, ...data }, select: workspaceSelect });
  }

  /** By slug; `ids` keeps only those workspaces (the ones a caller may see). */
  async listWorkspaces(scope: OrgScope, filter: { ids?: string[] }, page: Keyset<string>): Promise<WorkspaceRecord[]> {
    return this.client.workspace.findMany({
      where: {
        organizationId: scope.organizationId,
        ...(filter.ids ? { id: { in: filter.ids } } : {}),
        ...keysetAfter<Prisma.WorkspaceWhereInput>(
          ['slug'],
          'asc',
          page.after === undefined ? undefined : [page.after],
        ),
      },
      select: workspaceSelect,
      orderBy: { slug: 'asc' },
      take: page.take,
    });
  }

  async findWorkspaceBySlug(scope: OrgScope, slug: string): Promise<WorkspaceRecord | null> {
    return this.client.workspace.findUnique({
      where: { organizationId_slug: { organizationId: scope.organizationId, slug } },
      select: workspaceSelect,
    });
  }

  async getWorkspace(scope: WorkspaceScope): Promise<WorkspaceRecord> {
    return this.client.workspace.findUniqueOrThrow({
      where: { organizationId_id: { organizationId: scope.organizationId, id: scope.workspaceId } },
      select: workspaceSelect,
    });
  }

  async updateWorkspace(scope: WorkspaceScope, data: { name: string }, tx: Transaction): Promise<WorkspaceRecord> {
    return tx.workspace.update({
      where: { organizationId_id: { organizationId: scope.organizationId, id: scope.workspaceId } },
      data,
      select: workspaceSelect,
    });
  }

  /** Oldest first, the id breaking ties. */
  async listUsers(scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<UserRecord[]> {
    return this.client.user.findMany({
      where: {
        organizationId: scope.organizationId,
        ...keysetAfter<Prisma.UserWhereInput>(
          ['createdAt', 'id'],
          'asc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      select: userSelect,
      orderBy: keysetOrder<Prisma.UserOrderByWithRelationInput>(['createdAt', 'id'], 'asc'),
      take: page.take,
    });
  }

  async findUser(scope: OrgScope, id: string): Promise<UserRecord | null> {
    return this.client.user.findUnique({
      where: { organizationId_id: { organizationId: scope.organizationId, id } },
      select: userSelect,
    });
  }

  async createUser(
    scope: OrgScope,
    data: { email: string; name: string | null; role: Role },
    tx: Transaction,
  ): Promise<UserRecord> {
    return tx.user.create({ data: { organizationId: scope.organizationId, ...data }, select: userSelect });
  }

  async updateUserRole(scope: OrgScope, id: string, role: Role, tx: Transaction): Promise<UserRecord> {
    return tx.user.update({
      where: { organizationId_id: { organizationId: scope.organizationId, id } },
      data: { role },
      select: userSelect,
    });
  }

  /**
   * The user, locked until the transaction ends, with the organisation's
   * active owners (locked in id order, so two offboardings never deadlock):
   * two admins offboarding the last two owners at once cannot both pass the
   * last-owner check.
   */
  async lockForOffboarding(
    scope: OrgScope,
    id: string,
    tx: Transaction,
  ): Promise<{ user: UserRecord | null; activeOwners: string[] }> {
    const owners = await tx.$queryRaw<{ id: string }[]>`
      SELECT id::text AS id FROM users
       WHERE organization_id = ${scope.organizationId}::uuid AND role = 'owner' AND deactivated_at IS NULL
       ORDER BY id FOR UPDATE`;
    await tx.$queryRaw`SELECT id FROM users WHERE organization_id = ${scope.organizationId}::uuid AND id = ${id}::uuid FOR UPDATE`;
    const user = await tx.user.findUnique({
      where: { organizationId_id: { organizationId: scope.organizationId, id } },
      select: userSelect,
    });
    return { user, activeOwners: owners.map((o) => o.id) };
  }

  async setDeactivated(scope: OrgScope, id: string, at: Date | null, tx: Transaction): Promise<UserRecord> {
    return tx.user.update({
      where: { organizationId_id: { organizationId: scope.organizationId, id } },
      data: { deactivatedAt: at },
      select: userSelect,
    });
  }

  /** The row goes; audit records keep naming `user:<id>`, and nothing else points at it once offboarding has run. */
  async deleteUser(scope: OrgScope, id: string, tx: Transaction): Promise<void> {
    await tx.user.deleteMany({ where: { organizationId: scope.organizationId, id } });
  }

  /** Every membership of the user, removed: which workspaces they were in, with what role. */
  async deleteMembershipsOf(
    scope: OrgScope,
    userId: string,
    tx: Transaction,
  ): Promise<{ workspaceId: string; workspaceSlug: string; role: Role }[]> {
    const rows = await tx.membership.findMany({
      where: { organizationId: scope.organizationId, userId },
      select: { workspaceId: true, role: true, workspace: { select: { slug: true } } },
      orderBy: { workspaceId: 'asc' },
    });
    await tx.membership.deleteMany({ where: { organizationId: scope.organizationId, userId } });
    return rows.map((r) => ({ workspaceId: r.workspaceId, workspaceSlug: r.workspace.slug, role: r.role }));
  }

  /** Oldest membership first, the user id breaking ties. */
  async listMembers(scope: WorkspaceScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<MemberRecord[]> {
    const rows = await this.client.membership.findMany({
      where: {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        ...keysetAfter<Prisma.MembershipWhereInput>(
          ['createdAt', 'userId'],
          'asc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      include: { user: { select: { email: true, name: true } } },
      orderBy: keysetOrder<Prisma.MembershipOrderByWithRelationInput>(['createdAt', 'userId'], 'asc'),
      take: page.take,
    });
    return rows.map((r) => ({
      userId: r.userId,
      email: r.user.email,
      name: r.user.name,
      role: r.role,
      createdAt: r.createdAt,
    }));
  }

  async putMember(scope: WorkspaceScope, userId: string, role: Role, tx: Transaction): Promise<MemberRecord> {
    const row = await tx.membership.upsert({
      where: { workspaceId_userId: { workspaceId: scope.workspaceId, userId } },
      create: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, userId, role },
      update: { role },
      include: { user: { select: { email: true, name: true } } },
    });
    return { userId: row.userId, email: row.user.email, name: row.user.name, role: row.role, createdAt: row.createdAt };
  }

  /** The membership as it stands, locked until the transaction ends so a concurrent change cannot slip under the check. */
  async lockMember(scope: WorkspaceScope, userId: string, tx: Transaction): Promise<{ role: Role } | null> {
    const rows = await tx.$queryRaw<{ role: Role }[]>`
      SELECT role::text AS role FROM memberships
       WHERE organization_id = ${scope.organizationId}::uuid AND workspace_id = ${scope.workspaceId}::uuid AND user_id = ${userId}::uuid
       FOR UPDATE`;
    return rows[0] ?? null;
  }

  async deleteMember(scope: WorkspaceScope, userId: string, tx: Transaction): Promise<boolean> {
    const { count } = await tx.membership.deleteMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, userId },
    });
    return count > 0;
  }
}
