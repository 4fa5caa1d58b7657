import { Injectable } from '@nestjs/common';
import type { Transaction } from '@aileron/database';
import type { Principal } from './domain/principal';
import { AuthRepository } from './auth.repository';
import type { OrgScope } from './scope';
import { TokensService } from './tokens.service';

/** The person being offboarded, and the refs of everything that acts for them. */
export interface Offboardee {
  userId: string;
  email: string | null;
  /**
   * `user:<id>`, then every credential that acts for the person as
   * `created_by`, `enrolled_by`, a session's creator or an approval's
   * `requested_by` name it (`token:<id>`, `gateway:<id>`, `session:<id>`):
   * each step adds the ones it found, for the steps after it.
   */
  readonly refs: Set<string>;
}

export interface OffboardingContext {
  /** everything ends in the one transaction that marks the person deactivated, with its audit records */
  tx: Transaction;
  /** who offboards (`user:<id>`, `token:<id>`) */
  actor: string;
  /** the `reason` of each record it writes */
  reason: string;
  at: Date;
}

/**
 * What a domain above auth ends when a person leaves: its part of the one
 * transaction, recording an event per thing it ends, and telling the other
 * replicas after the commit (db.afterCommit) when a cache of its own must drop them.
 */
export interface OffboardingStep {
  name: string;
  /** lower first: what acts for the person (gateways, then agent sessions) before what was asked in their name (approvals) */
  order: number;
  /** answers how many of each thing it ended, by the name the `user.deactivated` record gives it */
  end(scope: OrgScope, person: Offboardee, context: OffboardingContext): Promise<Record<string, number>>;
}

/**
 * Offboarding across the domains: auth ends the person's API tokens and
 * browser sessions; gateways, agent sessions and approvals register their
 * steps here (they sit above auth), as their credentials register with
 * CredentialResolvers. Tenancy calls `end` in the transaction that
 * deactivates or removes the person.
 */
@Injectable()
export class Offboarding {
  private readonly steps: OffboardingStep[] = [];

  constructor(
    private readonly repository: AuthRepository,
    private readonly tokens: TokensService,
  ) {}

  register(step: OffboardingStep): void {
    if (this.steps.some((s) => s.name === step.name)) throw new Error(`offboarding step ${step.name} registered twice`);
    this.steps.push(step);
    this.steps.sort((a, b) => a.order - b.order);
  }

  /** The refs of the person and of every API token that acts for them (docs/auth.md#offboarding). */
  async refsOf(scope: OrgScope, userId: string): Promise<string[]> {
    return [`user:${userId}`, ...(await this.repository.tokensOwnedBy(scope, userId)).map((id) => `token:${id}`)];
  }

  /** Whether the caller is the person, or a token acting for them: nobody offboards themselves mid-request. */
  async isSelf(scope: OrgScope, caller: Principal, userId: string): Promise<boolean> {
    if (caller.kind === 'user') return caller.id === userId;
    if (caller.kind !== 'api_token') return false;
    return (await this.refsOf(scope, userId)).includes(`token:${caller.tokenId ?? caller.id}`);
  }

  /** Ends everything that acts for the person, in `context.tx`; answers what it ended, by kind. */
  async end(
    scope: OrgScope,
    person: { userId: string; email: string | null },
    context: OffboardingContext,
  ): Promise<Record<string, number>> {
    const tokens = await this.tokens.revokeOwnedBy(scope, person.userId, context);
    const offboardee: Offboardee = { ...person, refs: new Set([`user:${person.userId}`, ...tokens.refs]) };
    const ended: Record<string, number> = {
      api_tokens: tokens.revoked,
      browser_sessions: await this.repository.deleteBrowserSessionsOfUser(scope, person.userId, context.tx),
    };
    for (const step of this.steps) Object.assign(ended, await step.end(scope, offboardee, context));
    return ended;
  }
}
