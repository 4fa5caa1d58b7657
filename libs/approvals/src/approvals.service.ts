import { randomBytes } from 'node:crypto';
import {
  BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import {
  AccessService,
  describePrincipal,
  hashToken,
  Offboardee,
  Offboarding,
  OffboardingContext,
  OidcSignIn,
  OrgScope,
  Principal,
  roleIn,
  WorkspaceScope,
} from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { MESSAGE_BUS, MessageBus, Wakeups } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { databaseUnavailableReason, DatabaseService, Keyset, Transaction } from '@aileron/database';
import {
  DomainError,
  ErrorCodeWithStatus,
  fieldIssues,
  fieldPath,
  NotFoundError,
  ValidationError,
} from '@aileron/errors';
import { OutboxService, PublicEvent } from '@aileron/outbox';
import { PolicyService } from '@aileron/policy';
import { DeadlineSweep, drain } from '@aileron/schedule';
import { WebhooksService } from '@aileron/webhooks';
import {
  argumentsDigest,
  FINAL,
  identitiesOf,
  personIdentities,
  redactArguments,
  samePerson,
  tally,
} from './domain/approval';
import {
  Candidate,
  channelNames,
  checkChannels,
  checkRouting,
  isApprover,
  resolveRoute,
  RoutingDocument,
  routingDocumentSchema,
} from './domain/routing';
import { ApprovalRecord, ApprovalsRepository } from './approvals.repository';

const DECIDED = 'approvals.decided';
const MAX_WAIT_SECONDS = 120;
const RECHECK_MS = 5_000;
/** how often a call held for a decision tells its client it still waits */
const PROGRESS_EVERY_MS = 5_000;
/** how soon a held call looks again when the database was away */
const DATABASE_RETRY_MS = 1_000;
const SWEEP_MS = 2_000;
const EXPIRY_BATCH = 200;
/** how long an expiry another replica wrote may wait when this one knows of nothing due sooner (NextDue) */
const SWEEP_BACKSTOP_MS = 30_000;
export const LINK_PREFIX = 'ail_lnk_';
/** the personal notification that carries a one-time review link to its approver */
export const LINK_NOTIFICATION = 'approval.link';
/** a request as posted to the channels its route names (webhook endpoints), and only to them */
export const ROUTED_EVENT = 'approval.routed';

export class ApprovalError extends DomainError {
  constructor(code: ErrorCodeWithStatus<403 | 409>, detail: string) {
    super(code, detail);
  }
}

/** The call an approval is asked for, and later used for. */
export interface ApprovalCall {
  server: string;
  tool: string;
  arguments?: Record<string, unknown>;
  /** on whose behalf it runs: `user:<id>`, an e-mail, `token:<id>` */
  requester: string;
  session?: string | null;
  /** the agent session (its caveat token) the call was made with */
  agentSession?: string | null;
  executionMode: 'local' | 'remote';
  /** principal context for the policy (roles, groups) */
  roles?: string[];
  groups?: string[];
}

/** How long a held call waits for a decision, and whom it tells that it waits. */
export interface DecisionWait {
  /** the Clock's time (ms) after which the call stops waiting and says where the request is */
  deadline: number;
  /** the client went away: stop waiting at once */
  signal: AbortSignal;
  /** a line for the client (an MCP progress notification) each time the wait goes on */
  progress?: (message: string) => void;
}

/**
 * What became of a call that needs a person's approval: `approved` (and used
 * for this call, which may now run once), `not-usable` (approved, but used
 * first by a racing call or no longer usable, `reason` says why), `pending`
 * (nobody decided before the wait ended) or `refused` (denied, expired,
 * withdrawn: `request.status` says which).
 */
export type CallApproval =
  | { outcome: 'approved'; request: ApprovalRecord }
  | { outcome: 'not-usable'; request: ApprovalRecord; reason: string }
  | { outcome: 'pending'; request: ApprovalRecord; reviewUrl: string }
  | { outcome: 'refused'; request: ApprovalRecord };

/** How a decision arrives, for the record. */
export type Channel = 'rest' | 'page' | 'link' | 'cli';

/**
 * Approvals of exact calls. A request exists only where the policy says
 * `approval`; approvers named by the route decide (a quorum approves, any deny
 * ends it, nobody approves their own request); an approved request lets
 * exactly its call through once before it expires. Expiry is derived from the
 * database (a sweep marks it, and every read treats a lapsed request as
 * expired), so restarts lose nothing. Decisions reach waiters on every
 * replica through the bus.
 */
// a review link (and the page it opens) names a request, not yet a tenant
const REVIEW_LINKS = SystemScopes.system('review link');

@Injectable()
export class ApprovalsService
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  private readonly logger = new Logger('Approvals');
  /** long-polls on a request, woken when it is decided on any replica */
  readonly waiting: Wakeups;
  /** asks the database only when an expiry it knows of is due, or once a backstop */
  private readonly expiry: DeadlineSweep;

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: ApprovalsRepository,
    private readonly policies: PolicyService,
    private readonly outbox: OutboxService,
    private readonly access: AccessService,
    private readonly signIn: OidcSignIn,
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly webhooks: WebhooksService,
    private readonly clock: Clock,
    private readonly offboarding: Offboarding,
  ) {
    webhooks.addNotification(LINK_NOTIFICATION, (event) => this.completeLink(event));
    webhooks.addDirected(ROUTED_EVENT);
    this.waiting = new Wakeups(bus, DECIDED, (message) => (message as { id?: unknown } | null)?.id);
    this.expiry = new DeadlineSweep({
      name: 'approval expiry sweep',
      everyMs: SWEEP_MS,
      backstopMs: SWEEP_BACKSTOP_MS,
      look: () => this.expireAndLookAhead(),
      logger: this.logger,
      clock,
    });
  }

  onModuleInit(): void {
    // last: the gateways and sessions that asked in the person's name are known by then
    this.offboarding.register({
      name: 'approvals',
      order: 30,
      end: (scope, person, context) => this.offboard(scope, person, context),
    });
  }

  onApplicationBootstrap(): void {
    this.expiry.start();
  }

  // before the HTTP server closes, which waits for every answer under way: the long-polls and held calls answer now
  beforeApplicationShutdown(): void {
    this.waiting.close();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.expiry.stop();
  }

  reviewUrl(id: string): string {
    return `${this.config.publicUrl}/review/${id}`;
  }

  /** The sign-in the review page of a request offers: its organisation's identity provider, if set up for browsers. */
  async signInOption(id: string): Promise<{ organization: string; label: string } | null> {
    const organization = await this.repository.organizationOf(REVIEW_LINKS, id);
    const option = organization ? await this.signIn.option(organization.id) : null;
    return organization && option ? { organization: organization.slug, label: option.label } : null;
  }

  /** A request for a call the policy says needs approval (a gateway's local call, or the pool's remote one). */
  async request(
    scope: WorkspaceScope,
    requestedBy: string,
    call: ApprovalCall,
    gatewayId: string | null,
  ): Promise<ApprovalRecord> {
    const decision = await this.policies.evaluate(scope, {
      server: call.server,
      tool: call.tool,
      arguments: call.arguments ?? {},
      execution_mode: call.executionMode,
      principal: {
        user: call.requester,
        roles: call.roles ?? [],
        groups: call.groups ?? [],
        ...(call.session ? { session: call.session } : {}),
      },
    });
    if (decision.decision !== 'approval') {
      throw new ApprovalError(
        'APPROVAL_NOT_REQUIRED',
        `The policy (version ${decision.policy_version}) decides "${decision.decision}" for this call, not "approval"`,
      );
    }
    return this.create(scope, requestedBy, call, gatewayId, {
      policyVersion: decision.policy_version,
      rules: decision.rules,
      route: decision.approval_route,
    });
  }

  /**
   * A request another rule than the policy asked for: a workspace's shell
   * rule that says `prompt` for one exact command. It is routed and decided
   * like any other; `rules` names what asked.
   */
  async requestForRule(
    scope: WorkspaceScope,
    requestedBy: string,
    call: ApprovalCall,
    gatewayId: string | null,
    rules: string[],
  ): Promise<ApprovalRecord> {
    const current = await this.policies.current(scope);
    return this.create(scope, requestedBy, call, gatewayId, { policyVersion: current.version, rules, route: null });
  }

  private async create(
    scope: WorkspaceScope,
    requestedBy: string,
    call: ApprovalCall,
    gatewayId: string | null,
    decided: { policyVersion: number; rules: string[]; route: string | null },
  ): Promise<ApprovalRecord> {
    const routing = await this.repository.routing(scope);
    const { name, route } = resolveRoute(routing?.document ?? null, decided.route);
    const current = await this.policies.current(scope);
    const record = await this.db.transaction(async (tx) => {
      const created = await this.repository.create(
        scope,
        {
          requester: call.requester,
          requestedBy,
          gatewayId,
          sessionId: call.session ?? null,
          agentSessionId: call.agentSession ?? null,
          server: call.server,
          tool: call.tool,
          arguments: redactArguments(call.arguments, current.document.redact ?? []),
          argumentsDigest: argumentsDigest(call.arguments),
          executionMode: call.executionMode,
          policyVersion: decided.policyVersion,
          rules: decided.rules,
          route: name,
          quorum: route.quorum,
          expiresAt: new Date(this.clock.now() + route.expires_in_seconds * 1000),
        },
        tx,
      );
      const payload = {
        workspace: scope.workspaceSlug,
        session: created.sessionId,
        ...(created.agentSessionId ? { agent_session: created.agentSessionId } : {}),
        approval_id: created.id,
        review_url: this.reviewUrl(created.id),
        server: created.server,
        tool: created.tool,
        arguments: created.arguments,
        // a policy replay decides the call again, and rules may name the execution mode
        execution_mode: created.executionMode,
        requester: created.requester,
        rules: created.rules,
        route: created.route,
        quorum: created.quorum,
        policy_version: created.policyVersion,
        expires_at: created.expiresAt.toISOString(),
        actor: requestedBy,
      };
      await this.outbox.record(tx, { topic: 'approval.requested', ...this.inWorkspace(scope), payload });
      const channels = channelNames(route);
      // the review link, not a one-time link: a channel is shared, and only the route's approvers may decide through it
      if (channels.length > 0)
        await this.outbox.record(tx, {
          topic: ROUTED_EVENT,
          ...this.inWorkspace(scope),
          payload: { ...payload, channels, approvers: route.approvers },
        });
      return created;
    });
    this.expiry.expect(record.expiresAt);
    return record;
  }

  /** One request, as the caller may see it; a gateway sees the ones it asked for. */
  async get(caller: Principal, id: string): Promise<ApprovalRecord> {
    const record = await this.repository.get(SystemScopes.organization(caller.organizationId), id);
    if (!record) throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
    // an agent session follows the approvals its own calls asked for, nothing else
    if (caller.agentSession && record.agentSessionId !== caller.agentSession.id)
      throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
    await this.access.workspaceById(caller, record.workspaceId, 'approval.read', {
      kind: 'approval',
      id,
      code: 'APPROVAL_NOT_FOUND',
    });
    if (!caller.agentSession && caller.gateway && record.gatewayId !== caller.id)
      throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
    return effective(record, this.clock.date());
  }

  /** Answers as soon as the request is decided (on any replica), or after `seconds` with its state then. */
  async wait(caller: Principal, id: string, seconds: number): Promise<ApprovalRecord> {
    let record = await this.get(caller, id);
    const deadline = this.clock.now() + Math.min(seconds, MAX_WAIT_SECONDS) * 1000;
    while (record.status === 'pending' && this.clock.now() < deadline && !this.waiting.closed) {
      // wake at the decision, at expiry, or at the deadline, whichever comes first
      // and re-read now and then: a lost bus message then costs seconds, not the whole wait
      const now = this.clock.now();
      const until = Math.min(deadline, record.expiresAt.getTime(), now + RECHECK_MS) - now;
      await this.waiting.sleep(id, until);
      record = await this.get(caller, id);
    }
    return record;
  }

  /**
   * Waits for a person's decision on a call held open for it, until
   * `deadline` or until the client goes away, telling the client now and then
   * that it waits and where the request is reviewed. While the database is
   * away nobody can decide either: the call keeps waiting (its progress says
   * why) instead of failing, and looks again once it is back. Answers the
   * request as it stands at the end (still pending if nobody decided).
   */
  async awaitDecision(caller: Principal, request: ApprovalRecord, wait: DecisionWait): Promise<ApprovalRecord> {
    let current = request;
    // a control plane that stops answers the call as it stands (pending: the client is told where it is reviewed)
    while (
      current.status === 'pending' &&
      this.clock.now() < wait.deadline &&
      !wait.signal.aborted &&
      !this.waiting.closed
    ) {
      wait.progress?.(`Waiting for approval ${current.id}: ${this.reviewUrl(current.id)}`);
      const seconds = Math.max(1, Math.min(PROGRESS_EVERY_MS, wait.deadline - this.clock.now()) / 1000);
      try {
        current = await this.wait(caller, current.id, seconds);
      } catch (error) {
        if (!databaseUnavailableReason(error)) throw error;
        wait.progress?.(
          `Waiting for approval ${current.id}: the control plane's database cannot be reached right now; still waiting`,
        );
        // the client going away ends the pause (and the loop) at once
        await this.clock.sleep(Math.min(DATABASE_RETRY_MS, Math.max(0, wait.deadline - this.clock.now())), wait.signal);
      }
    }
    return current;
  }

  /**
   * A call that needs approval, from request to use: a request for exactly
   * this call (same arguments, requester, session and gateway) is reused,
   * else `ask` makes one; the call waits for the decision as long as the
   * installation lets calls wait (AILERON_POOL_APPROVAL_WAIT_SECONDS, see
   * awaitDecision); an approved request is used for this call, once.
   */
  async holdCall(
    scope: WorkspaceScope,
    caller: Principal,
    call: { exact: Omit<ApprovalCall, 'executionMode' | 'roles' | 'groups'>; gatewayId: string | null },
    // how to ask when no request is open; or the request the caller already read or asked for, not read again:
    // a second read could meet a database outage before the wait below, which rides it out
    ask: (() => Promise<ApprovalRecord>) | ApprovalRecord,
    wait: Omit<DecisionWait, 'deadline'>,
  ): Promise<CallApproval> {
    const { exact, gatewayId } = call;
    const asked = typeof ask !== 'function' ? ask : ((await this.forCall(scope, exact, gatewayId)) ?? (await ask()));
    const request = await this.awaitDecision(caller, asked, {
      ...wait,
      deadline: this.clock.now() + this.config.pool.approvalWaitSeconds * 1000,
    });
    if (request.status === 'approved') {
      try {
        await this.consume(scope, exact.requester, request.id, exact, gatewayId);
        return { outcome: 'approved', request };
      } catch (error) {
        // a racing call with the same arguments used it first
        if (!(error instanceof ApprovalError)) throw error;
        return { outcome: 'not-usable', request, reason: error.message };
      }
    }
    if (request.status === 'pending') return { outcome: 'pending', request, reviewUrl: this.reviewUrl(request.id) };
    return { outcome: 'refused', request };
  }

  async list(
    scope: WorkspaceScope,
    filter: { status?: ApprovalRecord['status'] },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<ApprovalRecord[]> {
    const now = this.clock.date();
    return (await this.repository.list(scope, filter, page)).map((record) => effective(record, now));
  }

  /** For the overview: how many requests of the workspace wait for a decision now (not yet expired). */
  waitingCount(scope: WorkspaceScope): Promise<number> {
    return this.repository.countPending(scope);
  }

  /** A vote by a signed-in approver (REST, CLI, the review page). */
  async decide(
    caller: Principal,
    id: string,
    decision: 'approve' | 'deny',
    reason: string | null,
    via: Channel,
  ): Promise<ApprovalRecord> {
    if (caller.gateway) throw new ApprovalError('NOT_AN_APPROVER', 'A gateway cannot decide approvals');
    const organization = SystemScopes.organization(caller.organizationId);
    const found = await this.repository.get(organization, id);
    if (!found) throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
    const scope = await this.access.workspaceById(caller, found.workspaceId, 'approval.decide', {
      kind: 'approval',
      id,
      code: 'APPROVAL_NOT_FOUND',
    });
    const user = caller.kind === 'user' ? await this.repository.user(organization, caller.id) : null;
    // a token acts for whoever made it: nobody approves their own request with a token they minted
    const identities = await this.personIdentities(organization, describePrincipal(caller));
    return this.vote(scope, id, {
      approver: describePrincipal(caller),
      identities,
      // the IdP groups of the credential itself (an IdP JWT) come first; else those of the user's last sign-in
      candidate: {
        userId: user?.id ?? null,
        email: user?.email ?? null,
        role: roleIn(caller, found.workspaceId),
        idpGroups: caller.idpGroups ?? user?.idpGroups ?? [],
      },
      decision,
      reason,
      via,
    });
  }

  /** A vote through a one-time link: the link names the approver; it works once. */
  async decideWithLink(
    link: string,
    id: string,
    decision: 'approve' | 'deny',
    reason: string | null,
  ): Promise<ApprovalRecord> {
    const found = link.startsWith(LINK_PREFIX) ? await this.repository.findLink(REVIEW_LINKS, hashToken(link)) : null;
    if (!found || found.approvalId !== id)
      throw new ApprovalError('LINK_INVALID', 'This link is not valid for this approval');
    if (found.usedAt) throw new ApprovalError('LINK_USED', 'This link has been used already; each link decides once');
    if (found.expiresAt <= this.clock.date()) throw new ApprovalError('LINK_EXPIRED', 'This link has expired');
    const organization = SystemScopes.organization(found.organizationId);
    const [record, user] = await Promise.all([
      this.repository.get(organization, id),
      this.repository.user(organization, found.userId),
    ]);
    const workspace = record && (await this.repository.workspace(organization, record.workspaceId));
    // an offboarded person's links are deleted; one made as they left is refused all the same
    if (!record || !user || user.deactivatedAt || !workspace)
      throw new ApprovalError('LINK_INVALID', 'This link is not valid for this approval');
    const scope = SystemScopes.workspace(found.organizationId, workspace, 'member');
    return this.vote(
      scope,
      id,
      {
        approver: `user:${user.id}`,
        identities: identitiesOf({ kind: 'user', id: user.id, email: user.email }),
        candidate: { userId: user.id, email: user.email, role: null, idpGroups: user.idpGroups },
        decision,
        reason,
        via: 'link',
      },
      hashToken(link),
    );
  }

  /** What a link-holder may see before deciding: the request, if the link is good. */
  async viewWithLink(link: string, id: string): Promise<ApprovalRecord> {
    const found = link.startsWith(LINK_PREFIX) ? await this.repository.findLink(REVIEW_LINKS, hashToken(link)) : null;
    if (!found || found.approvalId !== id)
      throw new ApprovalError('LINK_INVALID', 'This link is not valid for this approval');
    const record = await this.repository.get(SystemScopes.organization(found.organizationId), id);
    if (!record) throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
    return effective(record, this.clock.date());
  }

  /**
   * Sends one approver of the request a one-time link, through the webhook
   * endpoints that carry `approval.link` to people (a chat-ops bot that writes
   * to them directly). The caller never sees the link: whoever could read it
   * could decide as that approver, and with a quorum as several.
   */
  async sendLink(
    caller: Principal,
    id: string,
    userId: string,
  ): Promise<{ user: string; expires_at: string; channels: number }> {
    const organization = SystemScopes.organization(caller.organizationId);
    const record = await this.repository.get(organization, id);
    if (!record) throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
    const scope = await this.access.workspaceById(caller, record.workspaceId, 'approval.routes', {
      kind: 'approval',
      id,
      code: 'APPROVAL_NOT_FOUND',
    });
    const user = await this.repository.user(organization, userId);
    if (!user) throw new ValidationError([{ path: 'body.user', message: 'is not a user of this organisation' }]);
    if (user.deactivatedAt) throw new ValidationError([{ path: 'body.user', message: 'is deactivated' }]);
    const current = effective(record, this.clock.date());
    if (current.status !== 'pending')
      throw new ApprovalError(
        'APPROVAL_ALREADY_DECIDED',
        `This request is already ${current.status}; decisions are final`,
      );
    const routing = await this.repository.routing(scope);
    const { route } = resolveRoute(routing?.document ?? null, record.route);
    if (
      !isApprover(
        routing?.document ?? null,
        route,
        { userId: user.id, email: user.email, role: null, idpGroups: user.idpGroups },
        this.clock.date(),
      ) &&
      !(await this.hasApproverRole(scope, user.id, route))
    ) {
      throw new ApprovalError('NOT_AN_APPROVER', `User ${user.id} is not an approver of route "${record.route}"`);
    }
    const channels = await this.webhooks.notificationChannels(organization, record.workspaceId, LINK_NOTIFICATION);
    if (channels === 0) {
      throw new ApprovalError(
        'LINK_CHANNEL_MISSING',
        `No webhook endpoint delivers "${LINK_NOTIFICATION}" for this workspace: add one (POST /v1/webhooks with events ["${LINK_NOTIFICATION}"], format json) that passes links on to the people they name`,
      );
    }
    const actor = describePrincipal(caller);
    await this.db.transaction((tx) =>
      this.outbox.record(tx, {
        topic: LINK_NOTIFICATION,
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          session: record.sessionId,
          approval_id: id,
          user: { id: user.id, email: user.email, name: user.name },
          server: record.server,
          tool: record.tool,
          expires_at: record.expiresAt.toISOString(),
          actor,
        },
      }),
    );
    return { user: user.id, expires_at: record.expiresAt.toISOString(), channels };
  }

  /** Makes the link as the notification leaves (each attempt its own, only its hash kept); null once there is nothing left to decide. */
  private async completeLink(event: PublicEvent): Promise<Record<string, unknown> | null> {
    const approvalId = event.data.approval_id;
    const userId = (event.data.user as { id?: unknown } | undefined)?.id;
    if (!event.organization_id || typeof approvalId !== 'string' || typeof userId !== 'string') return null;
    const organization = SystemScopes.organization(event.organization_id);
    const [record, user] = await Promise.all([
      this.repository.get(organization, approvalId),
      this.repository.user(organization, userId),
    ]);
    // nothing to decide any more, or nobody to decide it: the person was offboarded since the link was asked for
    if (!record || effective(record, this.clock.date()).status !== 'pending' || !user || user.deactivatedAt)
      return null;
    const token = `${LINK_PREFIX}${randomBytes(32).toString('base64url')}`;
    await this.db.transaction((tx) =>
      this.repository.createLink(tx, organization, {
        tokenHash: hashToken(token),
        approvalId,
        userId,
        expiresAt: record.expiresAt,
      }),
    );
    return { ...event.data, url: `${this.reviewUrl(approvalId)}?link=${token}` };
  }

  /**
   * Uses an approval for the call it names, once. Anything different (an
   * argument, the session, the requester, the tool), a second use, or after
   * expiry is refused with the reason. `gatewayId` is the gateway using it
   * (null for the pool): only whoever asked may use it, as only they may read it.
   */
  async consume(
    scope: WorkspaceScope,
    consumer: string,
    id: string,
    call: Omit<ApprovalCall, 'executionMode' | 'roles' | 'groups'>,
    gatewayId: string | null,
  ): Promise<ApprovalRecord> {
    const digest = argumentsDigest(call.arguments);
    const used = await this.db.transaction(async (tx) => {
      const ok = await this.repository.consume(tx, scope, id, {
        server: call.server,
        tool: call.tool,
        argumentsDigest: digest,
        requester: call.requester,
        sessionId: call.session ?? null,
        gatewayId,
      });
      if (!ok) return false;
      await this.outbox.record(tx, {
        topic: 'approval.consumed',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          session: call.session ?? null,
          approval_id: id,
          server: call.server,
          tool: call.tool,
          actor: consumer,
        },
      });
      return true;
    });
    const record = await this.repository.get(scope, id);
    if (!record || record.workspaceId !== scope.workspaceId || record.gatewayId !== gatewayId)
      throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
    if (used) return record;
    throw new ApprovalError(
      'APPROVAL_NOT_USABLE',
      whyNotUsable(effective(record, this.clock.date()), { ...call, digest }, this.clock.date()),
    );
  }

  /** An approved-and-unused or pending request for exactly this call, if there is one (the pool's retries). */
  async forCall(
    scope: WorkspaceScope,
    call: Omit<ApprovalCall, 'executionMode' | 'roles' | 'groups'>,
    gatewayId: string | null,
  ): Promise<ApprovalRecord | null> {
    const found = await this.repository.findForCall(scope, {
      server: call.server,
      tool: call.tool,
      argumentsDigest: argumentsDigest(call.arguments),
      requester: call.requester,
      sessionId: call.session ?? null,
      gatewayId,
    });
    return found ? effective(found, this.clock.date()) : null;
  }

  /** Whoever asked may withdraw a request still pending (the developer gave up on the call). */
  async cancel(
    scope: WorkspaceScope,
    canceller: string,
    id: string,
    gatewayId: string | null,
    reason: string | null,
  ): Promise<ApprovalRecord> {
    await this.db.transaction(async (tx) => {
      const record = await this.repository.lock(tx, scope, id);
      if (!record || record.workspaceId !== scope.workspaceId || record.gatewayId !== gatewayId)
        throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
      if (record.status !== 'pending' || record.expiresAt <= this.clock.date()) {
        throw new ApprovalError(
          'APPROVAL_ALREADY_DECIDED',
          `This request is already ${effective(record, this.clock.date()).status}; decisions are final`,
        );
      }
      await this.cancelIn(tx, scope, record, canceller, reason, scope.workspaceSlug);
    });
    await this.bus.publish(DECIDED, { id });
    return effective((await this.repository.get(scope, id))!, this.clock.date());
  }

  /** A pending request, locked by the caller's `tx`, withdrawn with its `approval.cancelled` record. */
  private async cancelIn(
    tx: Transaction,
    scope: OrgScope,
    record: ApprovalRecord,
    actor: string,
    reason: string | null,
    workspaceSlug: string,
  ): Promise<void> {
    await this.repository.finish(tx, scope, record.id, 'cancelled', reason);
    await this.outbox.record(tx, {
      topic: 'approval.cancelled',
      organizationId: scope.organizationId,
      workspaceId: record.workspaceId,
      payload: {
        workspace: workspaceSlug,
        session: record.sessionId,
        approval_id: record.id,
        server: record.server,
        tool: record.tool,
        reason,
        actor,
      },
    });
  }

  /**
   * Offboarding: the pending requests asked in the person's name (their
   * `user:<id>` or e-mail as the requester) or by anything that acted for
   * them (their tokens, the gateways and sessions ended before this step) are
   * cancelled, and the review links sent to them stop working. Waiters on
   * every replica learn it once the offboarding commits.
   */
  private async offboard(
    scope: OrgScope,
    person: Offboardee,
    { tx, actor, reason, at }: OffboardingContext,
  ): Promise<Record<string, number>> {
    const refs = [...person.refs];
    const email = person.email?.toLowerCase();
    const pending = await this.repository.lockPendingOf(
      tx,
      scope,
      {
        requesters: [...refs, ...(email ? [email, `user:${email}`] : [])],
        requestedBy: refs,
        gatewayIds: idsOf(refs, 'gateway'),
        agentSessionIds: idsOf(refs, 'session'),
      },
      at,
    );
    for (const { record, workspaceSlug } of pending)
      await this.cancelIn(
        tx,
        scope,
        record,
        actor,
        `the person it was asked for is offboarded (${reason})`,
        workspaceSlug,
      );
    const links = await this.repository.deleteLinksOf(tx, scope, person.userId);
    this.db.afterCommit(tx, async () => {
      await Promise.all(pending.map(({ record }) => this.bus.publish(DECIDED, { id: record.id })));
    });
    return { approvals: pending.length, review_links: links };
  }

  private inWorkspace(scope: WorkspaceScope): { organizationId: string; workspaceId: string } {
    return { organizationId: scope.organizationId, workspaceId: scope.workspaceId };
  }

  async routing(scope: WorkspaceScope): Promise<{ document: RoutingDocument; version: number }> {
    const found = await this.repository.routing(scope);
    return found
      ? { document: found.document, version: found.version }
      : { document: routingDocumentSchema.parse({}), version: 0 };
  }

  async putRouting(
    caller: Principal,
    scope: WorkspaceScope,
    input: unknown,
  ): Promise<{ document: RoutingDocument; version: number }> {
    const parsed = routingDocumentSchema.safeParse(input);
    if (!parsed.success) throw new ValidationError(fieldIssues('body', parsed.error.issues));
    const named = [...new Set(Object.values(parsed.data.routes).flatMap(channelNames))];
    const problems = [
      ...checkRouting(parsed.data),
      ...checkChannels(parsed.data, await this.webhooks.endpointsNamed(scope, named), scope.workspaceId),
    ];
    if (problems.length > 0)
      throw new ValidationError(problems.map((p) => ({ path: fieldPath('body', p.path), message: p.message })));
    const version = await this.db.transaction(async (tx) => {
      const v = await this.repository.putRouting(scope, parsed.data, describePrincipal(caller), tx);
      await this.outbox.record(tx, {
        topic: 'approval.routes_updated',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          version: v,
          routes: Object.keys(parsed.data.routes),
          actor: describePrincipal(caller),
        },
      });
      return v;
    });
    return { document: parsed.data, version };
  }

  /**
   * Marks lapsed requests expired (events and audit included); any replica
   * may run it, each request once. A failure is thrown: the sweep's task
   * logs it and runs again.
   */
  /** The sweep's pass: what is due expires, and the next expiry in the data says when to look again. */
  private async expireAndLookAhead(): Promise<Date | null> {
    await drain(() => this.expireDue(), EXPIRY_BATCH);
    return this.repository.nextExpiry(SystemScopes.system('approval expiry sweep'));
  }

  async expireDue(): Promise<number> {
    const expired = await this.db.transaction(async (tx) => {
      const due = await this.repository.lockExpired(tx, SystemScopes.system('approval expiry sweep'), EXPIRY_BATCH);
      for (const request of due) {
        const scope = SystemScopes.organization(request.organizationId);
        await this.repository.finish(tx, scope, request.id, 'expired', 'no decision before the request expired');
        await this.outbox.record(tx, {
          topic: 'approval.expired',
          organizationId: request.organizationId,
          workspaceId: request.workspaceId,
          payload: { approval_id: request.id, actor: 'system' },
        });
      }
      return due;
    });
    for (const request of expired) await this.bus.publish(DECIDED, { id: request.id });
    return expired.length;
  }

  /** Every name of the person a principal ref (or a requester's e-mail) stands for. */
  private async personIdentities(organization: OrgScope, ref: string): Promise<Set<string>> {
    const { chain, user } = await this.repository.personOf(organization, ref);
    return personIdentities(ref, chain, user);
  }

  private async vote(
    scope: WorkspaceScope,
    id: string,
    vote: {
      approver: string;
      identities: Set<string>;
      candidate: Candidate;
      decision: 'approve' | 'deny';
      reason: string | null;
      via: Channel;
    },
    linkHash?: string,
  ): Promise<ApprovalRecord> {
    const routing = await this.repository.routing(scope);
    const requested = await this.repository.get(scope, id);
    // the requester as a person: a call made with a token counts as whoever made the token
    const requester = requested ? await this.personIdentities(scope, requested.requester) : new Set<string>();
    const outcome = await this.db.transaction(async (tx) => {
      const record = await this.repository.lock(tx, scope, id);
      if (!record) throw new NotFoundError('approval', id, 'APPROVAL_NOT_FOUND');
      if (FINAL.includes(record.status))
        throw new ApprovalError(
          'APPROVAL_ALREADY_DECIDED',
          `This request is already ${record.status}; decisions are final`,
        );
      if (record.expiresAt <= this.clock.date())
        throw new ApprovalError('APPROVAL_EXPIRED', 'This request expired before a decision');
      // separation of duties: whoever the call runs for never decides it
      if (samePerson(requester, vote.identities))
        throw new ApprovalError('SELF_APPROVAL_FORBIDDEN', 'You asked for this call; someone else must decide it');
      const { route } = resolveRoute(routing?.document ?? null, record.route);
      const eligible =
        isApprover(routing?.document ?? null, route, vote.candidate, this.clock.date()) ||
        (vote.candidate.userId !== null &&
          vote.candidate.role === null &&
          (await this.hasApproverRole(scope, vote.candidate.userId, route, tx)));
      if (!eligible) throw new ApprovalError('NOT_AN_APPROVER', `You are not an approver of route "${record.route}"`);
      if (record.decisions.some((d) => d.approver === vote.approver))
        throw new ApprovalError('ALREADY_VOTED', 'You have decided on this request already');
      if (linkHash && !(await this.repository.useLink(tx, scope, linkHash)))
        throw new ApprovalError('LINK_USED', 'This link has been used already; each link decides once');
      await this.repository.addDecision(tx, scope, id, {
        approver: vote.approver,
        decision: vote.decision,
        reason: vote.reason,
        via: vote.via,
      });
      const status = tally([...record.decisions, { approver: vote.approver, decision: vote.decision }], record.quorum);
      const base = {
        workspace: scope.workspaceSlug,
        session: record.sessionId,
        approval_id: id,
        server: record.server,
        tool: record.tool,
        actor: vote.approver,
        via: vote.via,
      };
      if (status === 'pending') {
        await this.outbox.record(tx, {
          topic: 'approval.vote_recorded',
          organizationId: scope.organizationId,
          workspaceId: record.workspaceId,
          payload: { ...base, decision: vote.decision, approvals_needed: record.quorum },
        });
      } else {
        await this.repository.finish(tx, scope, id, status, vote.reason);
        await this.outbox.record(tx, {
          topic: `approval.${status}`,
          organizationId: scope.organizationId,
          workspaceId: record.workspaceId,
          payload: { ...base, reason: vote.reason },
        });
      }
      return status;
    });
    if (outcome !== 'pending') await this.bus.publish(DECIDED, { id });
    const record = await this.repository.get(scope, id);
    return effective(record!, this.clock.date());
  }

  /** A route's role approvers, for a user deciding through a link (their role is the workspace's, looked up). */
  private async hasApproverRole(
    scope: WorkspaceScope,
    userId: string,
    route: ReturnType<typeof resolveRoute>['route'],
    tx?: Transaction,
  ): Promise<boolean> {
    const roles = route.approvers.flatMap((a) => ('role' in a ? [a.role] : []));
    if (roles.length === 0) return false;
    const held = await this.repository.workspaceRoles(scope, userId, tx);
    return held.some((r) => roles.includes(r as never));
  }
}

/** The ids of the refs of one kind (`gateway:<id>` → id). */
function idsOf(refs: readonly string[], kind: string): string[] {
  return refs.filter((ref) => ref.startsWith(`${kind}:`)).map((ref) => ref.slice(kind.length + 1));
}

/** A pending request past its expiry is expired, whether or not the sweep has marked it yet. */
function effective(record: ApprovalRecord, now: Date): ApprovalRecord {
  return record.status === 'pending' && record.expiresAt <= now ? { ...record, status: 'expired' } : record;
}

function whyNotUsable(
  record: ApprovalRecord,
  call: { server: string; tool: string; digest: string; requester: string; session?: string | null },
  now: Date,
): string {
  if (record.status !== 'approved') return `The request is ${record.status}, not approved`;
  if (record.consumedAt) return 'The approval has been used already; each approval lets one call through once';
  if (record.expiresAt <= now) return 'The approval has expired';
  const differs = [
    record.server !== call.server && 'server',
    record.tool !== call.tool && 'tool',
    record.argumentsDigest !== call.digest && 'arguments',
    record.requester !== call.requester && 'requester',
    (record.sessionId ?? null) !== (call.session ?? null) && 'session',
  ].filter(Boolean);
  return `The call differs from the approved one (${differs.join(', ')}); it needs its own approval`;
}
