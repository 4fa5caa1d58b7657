import { Injectable } from '@nestjs/common';
import { Clock } from '@aileron/clock';
import { DatabaseService, Keyset, Transaction } from '@aileron/database';
import { ForbiddenError, NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { mintApiToken } from './domain/api-token';
import { describePrincipal, Principal } from './domain/principal';
import { canGrant, Role } from './domain/roles';
import { AccessService } from './access.service';
import { AuthRepository, TokenRecord } from './auth.repository';
import type { OrgScope } from './scope';
import type { CreateTokenBody, TokenView } from './tokens.schemas';

export function tokenView(record: TokenRecord): TokenView {
  return {
    id: record.id,
    name: record.name,
    role: record.role,
    workspace: record.workspaceSlug,
    prefix: record.prefix,
    created_by: record.createdBy,
    created_at: record.createdAt.toISOString(),
    expires_at: record.expiresAt?.toISOString() ?? null,
    last_used_at: record.lastUsedAt?.toISOString() ?? null,
    revoked_at: record.revokedAt?.toISOString() ?? null,
  };
}

export interface NewToken {
  record: TokenRecord;
  token: string;
}

@Injectable()
export class TokensService {
  constructor(
    private readonly db: DatabaseService,
    private readonly repository: AuthRepository,
    private readonly access: AccessService,
    private readonly outbox: OutboxService,
    private readonly clock: Clock,
  ) {}

  /** Exchanging a credential for an admin JWT is a login: audited through the outbox like every change. */
  async recordLogin(
    principal: Principal,
    how: 'jwt_issued' | 'oidc' | 'sign_in_link',
    details: Record<string, unknown>,
  ): Promise<void> {
    await this.db.transaction((tx) =>
      this.outbox.record(tx, {
        topic: 'auth.login',
        organizationId: principal.organizationId,
        payload: {
          principal: describePrincipal(principal),
          method: how,
          ...details,
          actor: describePrincipal(principal),
        },
      }),
    );
  }

  /**
   * A token is scoped like its creator: a workspace-restricted caller can only
   * make tokens for that workspace, and nobody can mint a role above their own.
   */
  async create(principal: Principal, body: CreateTokenBody): Promise<NewToken> {
    let holderRole: Role;
    let scope: OrgScope;
    let workspaceId: string | null = null;
    if (body.workspace) {
      const ws = await this.access.workspace(principal, body.workspace, 'token.create');
      holderRole = ws.role;
      scope = this.access.callerOrganization(principal);
      workspaceId = ws.workspaceId;
    } else {
      scope = this.access.organization(principal, 'token.create');
      holderRole = principal.orgRole!;
    }
    if (!canGrant(holderRole, body.role)) {
      throw new ForbiddenError(
        `Role "${holderRole}" may not create a token with role "${body.role}"`,
        'ROLE_ESCALATION',
      );
    }
    const expiresAt = body.expires_in_seconds ? new Date(this.clock.now() + body.expires_in_seconds * 1000) : null;
    return this.db.transaction((tx) =>
      this.mint(
        scope,
        { name: body.name, role: body.role, workspaceId, expiresAt, createdBy: describePrincipal(principal) },
        tx,
      ),
    );
  }

  /** Also used by bootstrap and organisation creation, inside their transaction. */
  async mint(
    scope: OrgScope,
    data: {
      name: string;
      role: Role;
      workspaceId: string | null;
      expiresAt: Date | null;
      createdBy: string | null;
      platformOperator?: boolean;
    },
    tx: Transaction,
  ): Promise<NewToken> {
    const minted = mintApiToken();
    const record = await this.repository.createToken(
      scope,
      { ...data, hash: minted.hash, prefix: minted.displayPrefix },
      tx,
    );
    await this.outbox.record(tx, {
      topic: 'token.created',
      organizationId: scope.organizationId,
      ...(data.workspaceId ? { workspaceId: data.workspaceId } : {}),
      payload: {
        token_id: record.id,
        name: record.name,
        role: record.role,
        workspace: record.workspaceSlug,
        actor: data.createdBy,
      },
    });
    return { record, token: minted.token };
  }

  list(principal: Principal, scope: OrgScope, page: Keyset<{ createdAt: Date; id: string }>): Promise<TokenRecord[]> {
    return this.repository.listTokens(
      scope,
      principal.restrictedToWorkspaceId ? { workspaceId: principal.restrictedToWorkspaceId } : {},
      page,
    );
  }

  async revoke(principal: Principal, scope: OrgScope, id: string): Promise<void> {
    const record = await this.repository.findTokenById(scope, id);
    if (!record || (principal.restrictedToWorkspaceId && record.workspaceId !== principal.restrictedToWorkspaceId)) {
      throw new NotFoundError('token', id, 'TOKEN_NOT_FOUND');
    }
    if (record.revokedAt) return;
    // nobody changes a grant above their own: an admin cannot cut an owner (or the platform operator) off
    const own =
      principal.orgRole ?? (record.workspaceId ? (principal.workspaceRoles.get(record.workspaceId) ?? null) : null);
    if (!own || !canGrant(own, record.role) || (record.platformOperator && !principal.platformOperator)) {
      throw new ForbiddenError(
        `Role "${own}" may not revoke a token with role "${record.role}"${record.platformOperator ? ' (a platform operator)' : ''}`,
        'ROLE_ESCALATION',
      );
    }
    // the commit drops cached principals on every replica (PrincipalCache follows token.revoked)
    await this.db.transaction(async (tx) => {
      await this.repository.revokeToken(scope, id, this.clock.date(), tx);
      await this.recordRevoked(tx, scope, record, describePrincipal(principal));
    });
  }

  /**
   * Offboarding, in its transaction: every token that acts for the person
   * (docs/auth.md#offboarding) revoked, each recorded as `token.revoked`.
   * Answers the refs of all of them, revoked before or now, and how many it revoked.
   */
  async revokeOwnedBy(
    scope: OrgScope,
    userId: string,
    context: { tx: Transaction; actor: string; reason: string; at: Date },
  ): Promise<{ refs: string[]; revoked: number }> {
    const { tx } = context;
    const owned = await this.repository.tokensOwnedBy(scope, userId, tx);
    const revoked = await this.repository.revokeTokens(scope, owned, context.at, tx);
    for (const token of revoked) await this.recordRevoked(tx, scope, token, context.actor, context.reason);
    return { refs: owned.map((id) => `token:${id}`), revoked: revoked.length };
  }

  private async recordRevoked(
    tx: Transaction,
    scope: OrgScope,
    token: { id: string; name: string; workspaceId: string | null },
    actor: string,
    reason?: string,
  ): Promise<void> {
    await this.outbox.record(tx, {
      topic: 'token.revoked',
      organizationId: scope.organizationId,
      ...(token.workspaceId ? { workspaceId: token.workspaceId } : {}),
      payload: { token_id: token.id, name: token.name, ...(reason ? { reason } : {}), actor },
    });
  }
}
