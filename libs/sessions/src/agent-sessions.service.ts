import { randomUUID } from 'node:crypto';
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
  Offboardee,
  Offboarding,
  OffboardingContext,
  OrgScope,
  Principal,
  WorkspaceScope,
} from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { MESSAGE_BUS, MessageBus, Wakeups } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { DatabaseService, Keyset, Transaction } from '@aileron/database';
import { ConflictError, ForbiddenError, NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { DeadlineSweep, drain } from '@aileron/schedule';
import { Capability, Caveat, caveatText, DEFAULT_CAPABILITIES, mintCaveatToken } from './domain/caveat-token';
import { AgentSessionCredentials } from './agent-session-credentials.service';
import { AgentSessionKeys } from './agent-session-keys.service';
import { CreatorKind, MessageRecord, SessionRecord, AgentSessionsRepository } from './agent-sessions.repository';

export const DEFAULT_TTL_SECONDS = 8 * 3600;
export const MAX_TTL_SECONDS = 7 * 24 * 3600;
const MAX_WAIT_SECONDS = 120;
/** a lost bus message costs this much of a wait, not all of it */
const RECHECK_MS = 5_000;
const MESSAGE_WRITTEN = 'sessions.message-written';
/** how often expired sessions are looked for: a subscriber hears of an expiry within about this long */
const EXPIRY_SWEEP_MS = 2_000;
/** sessions announced per sweep and transaction; a backlog takes a few sweeps */
const EXPIRY_BATCH = 200;
/** how long an expiry another replica wrote may wait to be announced when this one knows of nothing due sooner (NextDue) */
const EXPIRY_BACKSTOP_MS = 30_000;

export interface NewSessionRequest {
  workspace: string;
  name?: string;
  agent?: string;
  ttlSeconds?: number;
  caps?: Capability[];
  caveats?: { servers?: string[]; tools?: string[]; sandbox?: string };
}

/**
 * A session as a request names it: by id, and under its workspace when the
 * path says which (`/v1/workspaces/{ws}/sessions/{id}`); a session of another
 * workspace is then not found, as any resource of another workspace is.
 */
export interface SessionRef {
  id: string;
  workspace?: string;
}

export type MessageKey = Pick<MessageRecord, 'createdAt' | 'id'>;

export interface StartedSession {
  session: SessionRecord;
  token: string;
}

function creatorOf(principal: Principal): { kind: CreatorKind; id: string } {
  if (principal.kind === 'api_token') return { kind: 'token', id: principal.tokenId ?? principal.id };
  if (principal.kind === 'user') return { kind: 'user', id: principal.id };
  if (principal.kind === 'gateway') return { kind: 'gateway', id: principal.id };
  // the route map keeps session tokens out; this keeps a session from ever begetting one
  throw new ForbiddenError('A session token may not start sessions', 'CAPABILITY_REQUIRED');
}

/**
 * Agent sessions: what a sandboxed agent acts as, for the person, token or
 * gateway that started it, and the two-way channel between the agent and its
 * people. Starting one mints its caveat token (shown once, never stored);
 * ending one refuses its tokens on every replica at once.
 */
@Injectable()
export class AgentSessionsService
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  /** long-polls on a session's channel, woken when a message is written on any replica */
  readonly waiting: Wakeups;
  private readonly logger = new Logger('AgentSessions');
  /** asks the database only when an expiry it knows of is due, or once a backstop */
  private readonly expiry: DeadlineSweep;

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: AgentSessionsRepository,
    private readonly keys: AgentSessionKeys,
    private readonly credentials: AgentSessionCredentials,
    private readonly access: AccessService,
    private readonly outbox: OutboxService,
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    private readonly clock: Clock,
    private readonly offboarding: Offboarding,
  ) {
    this.waiting = new Wakeups(bus, MESSAGE_WRITTEN, (message) => (message as { session?: unknown } | null)?.session);
    this.expiry = new DeadlineSweep({
      name: 'agent session expiry sweep',
      everyMs: EXPIRY_SWEEP_MS,
      backstopMs: EXPIRY_BACKSTOP_MS,
      look: () => this.announceAndLookAhead(),
      logger: this.logger,
      clock,
    });
  }

  onModuleInit(): void {
    // after gateways (the sessions they started end too), before approvals
    this.offboarding.register({
      name: 'agent_sessions',
      order: 20,
      end: (scope, person, context) => this.offboard(scope, person, context),
    });
  }

  onApplicationBootstrap(): void {
    this.expiry.start();
  }

  // before the HTTP server closes, which waits for every answer under way: the long-polls answer now
  beforeApplicationShutdown(): void {
    this.waiting.close();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.expiry.stop();
  }

  /**
   * Announces sessions that reached their `expires_at` without being ended:
   * `session.ended` with reason `expired`, by `system`. Any replica may run it;
   * each session is announced once (the mark and its event commit together,
   * and an ended session is never announced), and an expired one is not ended
   * again afterwards. Answers how many it announced.
   */
  /** The sweep's pass: what expired is announced, and the next expiry in the data says when to look again. */
  private async announceAndLookAhead(): Promise<Date | null> {
    await drain(() => this.announceExpired(), EXPIRY_BATCH);
    return this.repository.nextExpiry(SystemScopes.system('agent session expiry sweep'));
  }

  async announceExpired(): Promise<number> {
    return this.db.transaction(async (tx) => {
      const expired = await this.repository.markExpired(
        tx,
        SystemScopes.system('agent session expiry sweep'),
        this.clock.date(),
        EXPIRY_BATCH,
      );
      for (const session of expired)
        await this.recordEnded(tx, session.organizationId, session, { reason: 'expired', actor: 'system' });
      return expired.length;
    });
  }

  async start(caller: Principal, request: NewSessionRequest): Promise<StartedSession> {
    const creator = creatorOf(caller);
    const scope = await this.access.workspace(caller, request.workspace, 'session.create');
    const caps = [...new Set(request.caps ?? DEFAULT_CAPABILITIES)];
    const ttl = request.ttlSeconds ?? DEFAULT_TTL_SECONDS;
    const extra: Caveat[] = [
      ...(request.caveats?.servers ? [{ kind: 'servers' as const, names: request.caveats.servers }] : []),
      ...(request.caveats?.tools ? [{ kind: 'tools' as const, globs: request.caveats.tools }] : []),
      ...(request.caveats?.sandbox ? [{ kind: 'sandbox' as const, name: request.caveats.sandbox }] : []),
    ];
    const key = await this.keys.current(scope);
    const id = randomUUID();
    const expiresAt = new Date(Math.floor(this.clock.now() / 1000 + ttl) * 1000);
    const token = mintCaveatToken(
      key.derived,
      { organizationId: scope.organizationId, keyId: key.keyId, sessionId: id },
      [
        { kind: 'session', id },
        { kind: 'workspace', id: scope.workspaceId },
        { kind: 'caps', caps },
        { kind: 'expires', at: expiresAt.getTime() / 1000 },
        ...extra,
      ],
    );
    const session = await this.db.transaction(async (tx) => {
      const created = await this.repository.create(
        scope,
        {
          id,
          name: request.name ?? null,
          agent: request.agent ?? null,
          caps,
          caveats: extra.map(caveatText),
          creatorKind: creator.kind,
          creatorId: creator.id,
          keyId: key.keyId,
          expiresAt,
        },
        tx,
      );
      await this.outbox.record(tx, {
        topic: 'session.started',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          session: id,
          name: created.name,
          agent: created.agent,
          caps,
          caveats: created.caveats,
          expires_at: expiresAt.toISOString(),
          actor: describePrincipal(caller),
        },
      });
      return created;
    });
    this.expiry.expect(session.expiresAt);
    return { session, token };
  }

  async list(
    caller: Principal,
    workspace: string,
    filter: { live: boolean },
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<SessionRecord[]> {
    const scope = await this.access.workspace(caller, workspace, 'session.read');
    // a gateway sees the sessions it started, nothing of the people's
    const creator = caller.gateway ? `gateway:${caller.id}` : undefined;
    return this.repository.list(scope, { ...filter, ...(creator ? { creator } : {}) }, page, this.clock.date());
  }

  /** One session as the caller may see it; anything else is a 404. */
  async get(
    caller: Principal,
    ref: SessionRef,
    permission: 'session.read' | 'session.message' = 'session.read',
  ): Promise<{ session: SessionRecord; scope: WorkspaceScope }> {
    const { id } = ref;
    const session = await this.repository.get(SystemScopes.organization(caller.organizationId), id);
    if (!session || (ref.workspace !== undefined && session.workspaceSlug !== ref.workspace))
      throw new NotFoundError('session', id, 'SESSION_NOT_FOUND');
    if (caller.agentSession) {
      // a session sees itself only
      if (caller.agentSession.id !== id) throw new NotFoundError('session', id, 'SESSION_NOT_FOUND');
    } else if (caller.gateway && !(session.creatorKind === 'gateway' && session.creatorId === caller.id)) {
      throw new NotFoundError('session', id, 'SESSION_NOT_FOUND');
    }
    const scope = await this.access.workspaceById(caller, session.workspaceId, permission, {
      kind: 'session',
      id,
      code: 'SESSION_NOT_FOUND',
    });
    return { session, scope };
  }

  /** Ends a session: its creator may always, an admin of its workspace too. */
  async end(caller: Principal, ref: SessionRef): Promise<SessionRecord> {
    const { session, scope } = await this.get(caller, ref);
    const { id } = session;
    const own =
      `${session.creatorKind}:${session.creatorId}` === describePrincipal(caller).replace(/^api_token:/, 'token:');
    if (!own && !caller.gateway)
      await this.access.workspaceById(caller, session.workspaceId, 'session.end', {
        kind: 'session',
        id,
        code: 'SESSION_NOT_FOUND',
      });
    const now = this.clock.date();
    const ended = await this.db.transaction((tx) =>
      this.endIn(tx, scope, session, { actor: describePrincipal(caller), reason: 'ended', at: now }),
    );
    if (ended) await this.credentials.forget(id);
    return (await this.repository.get(scope, id)) ?? session;
  }

  /** Ends a live session in `tx`, with its `session.ended` record; false when it had ended already. */
  private async endIn(
    tx: Transaction,
    scope: OrgScope,
    session: SessionRecord,
    how: { actor: string; reason: string; at: Date },
  ): Promise<boolean> {
    if (!(await this.repository.end(tx, scope, session.id, how.actor, how.at))) return false;
    await this.recordEnded(tx, scope.organizationId, session, how);
    return true;
  }

  /** The one `session.ended` of a session, however it ended. */
  private async recordEnded(
    tx: Transaction,
    organizationId: string,
    session: Pick<SessionRecord, 'id' | 'workspaceId' | 'workspaceSlug' | 'name'>,
    how: { reason: string; actor: string },
  ): Promise<void> {
    await this.outbox.record(tx, {
      topic: 'session.ended',
      organizationId,
      workspaceId: session.workspaceId,
      payload: {
        workspace: session.workspaceSlug,
        session: session.id,
        name: session.name,
        reason: how.reason,
        actor: how.actor,
      },
    });
  }

  /**
   * Offboarding: the live sessions the person, a token acting for them or a
   * gateway they enrolled started, ended; their caveat tokens are refused on
   * every replica once the offboarding commits.
   */
  private async offboard(
    scope: OrgScope,
    person: Offboardee,
    context: OffboardingContext,
  ): Promise<Record<string, number>> {
    const creators = [...person.refs].filter((ref) => /^(user|token|gateway):/.test(ref));
    const live = await this.repository.liveStartedBy(context.tx, scope, creators, context.at);
    const ended: string[] = [];
    for (const session of live) {
      person.refs.add(`session:${session.id}`);
      if (await this.endIn(context.tx, scope, session, context)) ended.push(session.id);
    }
    this.db.afterCommit(context.tx, async () => {
      await Promise.all(ended.map((id) => this.credentials.forget(id)));
    });
    return { agent_sessions: ended.length };
  }

  /**
   * One message on the session's channel: from the session's own token it is
   * the agent writing to its people (needs `comms`; an event carries it to
   * webhooks and chat), from a member of the workspace it is the answer.
   */
  async post(caller: Principal, ref: SessionRef, text: string, level: string): Promise<MessageRecord> {
    const { session, scope } = await this.get(caller, ref, caller.agentSession ? 'session.read' : 'session.message');
    const { id } = session;
    const message = caller.agentSession
      ? { direction: 'agent' as const, text, level, author: `session:${id}` }
      : { direction: 'people' as const, text, level: 'info', author: describePrincipal(caller) };
    return this.write(scope, session, message);
  }

  /**
   * Messages for the caller, oldest first: the session reads what people
   * wrote, people read the whole conversation. A page starts after the
   * cursor's message, or after `afterMessage` (the id of the last message the
   * caller has; the long-poll's form). With `waitSeconds`, an empty page waits
   * until a message arrives (on any replica) or the time is up.
   */
  async messages(
    caller: Principal,
    ref: SessionRef,
    page: Keyset<MessageKey>,
    afterMessage: string | undefined,
    waitSeconds: number,
  ): Promise<MessageRecord[]> {
    const { session, scope } = await this.get(caller, ref);
    const { id } = session;
    const direction = caller.agentSession ? 'people' : null;
    let since: MessageKey | null = page.after ?? null;
    if (since === null && afterMessage !== undefined) {
      const message = await this.repository.message(scope, afterMessage);
      if (!message || message.sessionId !== id) throw new NotFoundError('message', afterMessage, 'MESSAGE_NOT_FOUND');
      since = message;
    }
    const deadline = this.clock.now() + Math.min(waitSeconds, MAX_WAIT_SECONDS) * 1000;
    for (;;) {
      const found = await this.repository.messages(scope, id, direction, since, page.take);
      if (found.length > 0 || this.clock.now() >= deadline || this.waiting.closed) return found;
      await this.waiting.sleep(id, Math.min(deadline - this.clock.now(), RECHECK_MS));
    }
  }

  private async write(
    scope: WorkspaceScope,
    session: SessionRecord,
    message: Omit<MessageRecord, 'id' | 'createdAt' | 'sessionId'>,
  ): Promise<MessageRecord> {
    if (session.endedAt || session.expiresAt <= this.clock.date())
      throw new ConflictError('SESSION_CLOSED', 'The session has ended; its channel takes no more messages');
    const written = await this.db.transaction(async (tx) => {
      const record = await this.repository.addMessage(tx, scope, { ...message, sessionId: session.id });
      await this.outbox.record(tx, {
        topic: 'session.message',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: {
          workspace: scope.workspaceSlug,
          session: session.id,
          message_id: record.id,
          direction: record.direction,
          text: record.text,
          level: record.level,
          author: record.author,
        },
      });
      return record;
    });
    await this.bus.publish(MESSAGE_WRITTEN, { session: session.id }).catch(() => undefined);
    return written;
  }
}
