import { Injectable } from '@nestjs/common';
import { Keyset, keysetAfter, keysetOrder, Prisma, Repository, DbRole, Transaction } from '@aileron/database';
import type { ClaimMapping, MappedIdentity } from './domain/claims';
import type { Role } from './domain/roles';
import type { OrgScope, SystemScope } from './scope';

export interface TokenRecord {
  id: string;
  organizationId: string;
  organizationSlug: string;
  workspaceId: string | null;
  workspaceSlug: string | null;
  name: string;
  role: Role;
  prefix: string;
  platformOperator: boolean;
  createdBy: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface UserRecord {
  id: string;
  organizationId: string;
  organizationSlug: string;
  subject: string | null;
  email: string | null;
  name: string | null;
  role: Role;
  memberships: { workspaceId: string; role: Role }[];
  /** the IdP's groups at the user's last sign-in */
  idpGroups: string[];
  /** offboarded: nothing of theirs authenticates until they are reactivated */
  deactivatedAt: Date | null;
}

/** An API token that acts for a person, as offboarding revoked it. */
export interface OwnedTokenRecord {
  id: string;
  name: string;
  workspaceId: string | null;
}

export interface IdentityProviderRecord extends ClaimMapping {
  organizationId: string;
  issuer: string;
  jwksUrl: string;
  audience: string | null;
  /** the owner's explicit choice to accept tokens without checking `aud` */
  allowAnyAudience: boolean;
  /** the owner's explicit choice to link sign-ins by e-mails the IdP did not verify */
  trustUnverifiedEmail: boolean;
  /** browser sign-in: null while it is not configured */
  clientId: string | null;
  /** sealed by the root key; only the sign-in service opens it, to call the token endpoint */
  clientSecretSealed: string | null;
  scopes: string[];
}

export interface BrowserSessionRecord {
  id: string;
  organizationId: string;
  userId: string;
  expiresAt: Date;
}

type IdentityProviderRow = Omit<IdentityProviderRecord, 'roleMapping'> & { roleMapping: unknown; updatedAt: Date };

function toIdentityProvider(row: IdentityProviderRow): IdentityProviderRecord {
  return {
    organizationId: row.organizationId,
    issuer: row.issuer,
    jwksUrl: row.jwksUrl,
    audience: row.audience,
    allowAnyAudience: row.allowAnyAudience,
    trustUnverifiedEmail: row.trustUnverifiedEmail,
    subjectClaim: row.subjectClaim,
    emailClaim: row.emailClaim,
    nameClaim: row.nameClaim,
    roleClaim: row.roleClaim,
    roleMapping: row.roleMapping as Record<string, Role>,
    defaultRole: row.defaultRole,
    groupsClaim: row.groupsClaim,
    clientId: row.clientId,
    clientSecretSealed: row.clientSecretSealed,
    scopes: row.scopes,
  };
}

const tokenInclude = { organization: { select: { slug: true } }, workspace: { select: { slug: true } } } as const;

type TokenRow = {
  id: string;
  organizationId: string;
  workspaceId: string | null;
  name: string;
  role: DbRole;
  prefix: string;
  platformOperator: boolean;
  createdBy: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  organization: { slug: string };
  workspace: { slug: string } | null;
};

function toToken(row: TokenRow): TokenRecord {
  return {
    id: row.id,
    organizationId: row.organizationId,
    organizationSlug: row.organization.slug,
    workspaceId: row.workspaceId,
    workspaceSlug: row.workspace?.slug ?? null,
    name: row.name,
    role: row.role,
    prefix: row.prefix,
    platformOperator: row.platformOperator,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    lastUsedAt: row.lastUsedAt,
    revokedAt: row.revokedAt,
  };
}

/** Credentials and the identities behind them. */
@Injectable()
export class AuthRepository extends Repository {
  /** Authentication itself: no scope exists yet, the hash is the key. */
  async findTokenByHash(_system: SystemScope, hash: string): Promise<TokenRecord | null> {
    const row = await this.client.apiToken.findUnique({ where: { tokenHash: hash }, include: tokenInclude });
    return row ? toToken(row) : null;
  }

  async findTokenById(scope: OrgScope, id: string): Promise<TokenRecord | null> {
    const row = await this.client.apiToken.findUnique({
      where: { organizationId_id: { organizationId: scope.organizationId, id } },
      include: tokenInclude,
    });
    return row ? toToken(row) : null;
  }

  async touchToken(scope: OrgScope, id: string, at: Date): Promise<void> {
    await this.client.apiToken.updateMany({
      where: { organizationId: scope.organizationId, id },
      data: { lastUsedAt: at },
    });
  }

  async createToken(
    scope: OrgScope,
    data: {
      name: string;
      role: Role;
      workspaceId: string | null;
      hash: string;
      prefix: string;
      createdBy: string | null;
      expiresAt: Date | null;
      platformOperator?: boolean;
    },
    tx: Transaction,
  ): Promise<TokenRecord> {
    const row = await tx.apiToken.create({
      data: {
        organizationId: scope.organizationId,
        workspaceId: data.workspaceId,
        name: data.name,
        role: data.role,
        tokenHash: data.hash,
        prefix: data.prefix,
        createdBy: data.createdBy,
        expiresAt: data.expiresAt,
        platformOperator: data.platformOperator ?? false,
      },
      include: tokenInclude,
    });
    return toToken(row);
  }

  /** Oldest first, the id breaking ties. */
  async listTokens(
    scope: OrgScope,
    filter: { workspaceId?: string },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<TokenRecord[]> {
    const rows = await this.client.apiToken.findMany({
      where: {
        organizationId: scope.organizationId,
        ...(filter.workspaceId ? { workspaceId: filter.workspaceId } : {}),
        ...keysetAfter<Prisma.ApiTokenWhereInput>(
          ['createdAt', 'id'],
          'asc',
          page.after && [page.after.createdAt, page.after.id],
        ),
      },
      include: tokenInclude,
      orderBy: keysetOrder<Prisma.ApiTokenOrderByWithRelationInput>(['createdAt', 'id'], 'asc'),
      take: page.take,
    });
    return rows.map(toToken);
  }

  async revokeToken(scope: OrgScope, id: string, at: Date, tx: Transaction): Promise<void> {
    await tx.apiToken.updateMany({
      where: { organizationId: scope.organizationId, id, revokedAt: null },
      data: { revokedAt: at },
    });
  }

  /**
   * The tokens that act for a person: the ones they created, and the ones
   * created with those, however deep (a token acts for whoever made it).
   * Revoked ones too, so what those enrolled or started is found as well.
   */
  async tokensOwnedBy(scope: OrgScope, userId: string, tx?: Transaction): Promise<string[]> {
    const rows = await this.use(tx).$queryRaw<{ id: string }[]>`
      WITH RECURSIVE owned AS (
        SELECT id FROM api_tokens
         WHERE organization_id = ${scope.organizationId}::uuid AND created_by = ${`user:${userId}`}
        UNION
        SELECT t.id FROM api_tokens t JOIN owned o ON t.created_by = 'token:' || o.id::text
         WHERE t.organization_id = ${scope.organizationId}::uuid
      )
      SELECT id::text AS id FROM owned ORDER BY id`;
    return rows.map((r) => r.id);
  }

  /** Revokes those of `ids` still live; answers exactly the ones this transaction revoked. */
  async revokeTokens(scope: OrgScope, ids: string[], at: Date, tx: Transaction): Promise<OwnedTokenRecord[]> {
    if (ids.length === 0) return [];
    const rows = await tx.$queryRaw<{ id: string; name: string; workspace_id: string | null }[]>`
      UPDATE api_tokens SET revoked_at = ${at}
       WHERE organization_id = ${scope.organizationId}::uuid AND id = ANY(${ids}::uuid[]) AND revoked_at IS NULL
      RETURNING id::text AS id, name, workspace_id::text AS workspace_id`;
    return rows.map((r) => ({ id: r.id, name: r.name, workspaceId: r.workspace_id }));
  }

  async findUser(scope: OrgScope, id: string): Promise<UserRecord | null> {
    const row = await this.client.user.findUnique({
      where: { organizationId_id: { organizationId: scope.organizationId, id } },
      include: { organization: { select: { slug: true } }, memberships: { select: { workspaceId: true, role: true } } },
    });
    return row
      ? {
          id: row.id,
          organizationId: row.organizationId,
          organizationSlug: row.organization.slug,
          subject: row.subject,
          email: row.email,
          name: row.name,
          role: row.role,
          memberships: row.memberships,
          idpGroups: row.idpGroups,
          deactivatedAt: row.deactivatedAt,
        }
      : null;
  }

  async findIdentityProviderByIssuer(_system: SystemScope, issuer: string): Promise<IdentityProviderRecord | null> {
    const row = await this.client.identityProvider.findUnique({ where: { issuer } });
    return row ? toIdentityProvider(row) : null;
  }

  async findIdentityProvider(scope: OrgScope): Promise<IdentityProviderRecord | null> {
    const row = await this.client.identityProvider.findUnique({ where: { organizationId: scope.organizationId } });
    return row ? toIdentityProvider(row) : null;
  }

  /** Sign-in starts before anyone is authenticated: the organisation's slug is all the browser names. */
  async findOrganizationIdBySlug(_system: SystemScope, slug: string): Promise<string | null> {
    const row = await this.client.organization.findUnique({ where: { slug }, select: { id: true } });
    return row?.id ?? null;
  }

  /**
   * First login links a pre-provisioned user with the same e-mail, when the
   * e-mail may be trusted (`trustedEmail`); later logins find the user by
   * subject. An untrusted e-mail that names a pre-provisioned user links
   * nothing: the sign-in is refused rather than made a second account. The
   * IdP's role wins when it sends one. Its groups are recorded when the
   * credential was issued after the user's last recorded sign-in, so an old
   * token used late does not roll them back.
   */
  async upsertUserFromIdentity(
    scope: OrgScope,
    identity: MappedIdentity,
    options: { defaultRole: Role; trustedEmail: string | null },
    at: Date,
    issuedAt: Date,
  ): Promise<
    | { id: string; previousLoginAt: Date | null; roleChanged: boolean }
    | { refused: 'email_not_verified' | 'deactivated' }
  > {
    return this.db.transaction(async (tx) => {
      const bySubject = await tx.user.findUnique({
        where: { organizationId_subject: { organizationId: scope.organizationId, subject: identity.subject } },
      });
      const email = bySubject ? null : (options.trustedEmail ?? identity.email);
      const byEmail = email
        ? await tx.user.findFirst({ where: { organizationId: scope.organizationId, email, subject: null } })
        : null;
      if (byEmail && !options.trustedEmail) return { refused: 'email_not_verified' as const };
      const existing = bySubject ?? byEmail;
      if (existing?.deactivatedAt) return { refused: 'deactivated' as const };
      if (existing) {
        await tx.user.update({
          where: { id: existing.id },
          data: {
            subject: identity.subject,
            lastLoginAt: at,
            ...(identity.name ? { name: identity.name } : {}),
            ...(identity.role ? { role: identity.role } : {}),
            ...(!existing.lastLoginAt || issuedAt >= existing.lastLoginAt ? { idpGroups: identity.groups } : {}),
          },
        });
        return {
          id: existing.id,
          previousLoginAt: existing.lastLoginAt,
          roleChanged: !!identity.role && identity.role !== existing.role,
        };
      }
      const created = await tx.user.create({
        data: {
          organizationId: scope.organizationId,
          subject: identity.subject,
          email: options.trustedEmail,
          name: identity.name,
          role: identity.role ?? options.defaultRole,
          lastLoginAt: at,
          idpGroups: identity.groups,
        },
      });
      return { id: created.id, previousLoginAt: null, roleChanged: false };
    });
  }

  async createBrowserSession(
    scope: OrgScope,
    session: { userId: string; tokenHash: string; expiresAt: Date },
    at: Date,
  ): Promise<void> {
    await this.db.transaction(async (tx) => {
      // lapsed browser sessions are useless; sign-ins are rare enough to sweep here
      await tx.browserSession.deleteMany({ where: { expiresAt: { lt: at } } });
      await tx.browserSession.create({ data: { organizationId: scope.organizationId, ...session } });
    });
  }

  /** Sign-out: this browser's session only. */
  async deleteBrowserSession(scope: OrgScope, tokenHash: string): Promise<void> {
    await this.client.browserSession.deleteMany({ where: { organizationId: scope.organizationId, tokenHash } });
  }

  /** Sign-out everywhere, and offboarding: every browser session of the person. */
  async deleteBrowserSessionsOfUser(scope: OrgScope, userId: string, tx?: Transaction): Promise<number> {
    return (await this.use(tx).browserSession.deleteMany({ where: { organizationId: scope.organizationId, userId } }))
      .count;
  }

  /**
   * The person at the machine of an embedded installation, whom a sign-in link
   * signs in: an owner with a subject no identity provider issues.
   */
  async ensureLocalOwner(scope: OrgScope, subject: string, at: Date): Promise<string> {
    const row = await this.client.user.upsert({
      where: { organizationId_subject: { organizationId: scope.organizationId, subject } },
      create: {
        organizationId: scope.organizationId,
        subject,
        name: 'Owner (this machine)',
        role: 'owner',
        lastLoginAt: at,
      },
      update: { lastLoginAt: at },
      select: { id: true },
    });
    return row.id;
  }

  /** Authentication itself: the cookie's hash is the key, it names the organisation. */
  async findBrowserSession(_system: SystemScope, tokenHash: string): Promise<BrowserSessionRecord | null> {
    return this.client.browserSession.findUnique({
      where: { tokenHash },
      select: { id: true, organizationId: true, userId: true, expiresAt: true },
    });
  }

  async findOrganization(scope: OrgScope): Promise<{ id: string; slug: string; name: string } | null> {
    return this.client.organization.findUnique({
      where: { id: scope.organizationId },
      select: { id: true, slug: true, name: true },
    });
  }

  async findWorkspaceById(scope: OrgScope, id: string): Promise<{ id: string; slug: string; name: string } | null> {
    return this.client.workspace.findFirst({
      where: { organizationId: scope.organizationId, id },
      select: { id: true, slug: true, name: true },
    });
  }

  async findWorkspaceBySlug(scope: OrgScope, slug: string): Promise<{ id: string; slug: string; name: string } | null> {
    return this.client.workspace.findUnique({
      where: { organizationId_slug: { organizationId: scope.organizationId, slug } },
      select: { id: true, slug: true, name: true },
    });
  }

  async listWorkspaces(scope: OrgScope): Promise<{ id: string; slug: string; name: string; createdAt: Date }[]> {
    return this.client.workspace.findMany({
      where: { organizationId: scope.organizationId },
      select: { id: true, slug: true, name: true, createdAt: true },
      orderBy: { slug: 'asc' },
    });
  }
}
