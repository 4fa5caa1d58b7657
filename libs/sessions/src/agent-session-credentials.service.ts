import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import {
  changesOnlyAdd,
  CredentialResolvers,
  PrincipalCache,
  PrincipalResolver,
  Principal,
  roleIn,
  StreamAccess,
  type AgentSessionGrant,
} from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { databaseUnavailableReason, isDatabaseUnavailable } from '@aileron/database';
import { UnauthenticatedError } from '@aileron/errors';
import { GatewayCredentials } from '@aileron/gateway';
import { OutboxService } from '@aileron/outbox';
import {
  CAVEAT_TOKEN_PREFIX,
  CaveatTokenError,
  permitsServer,
  permitsTool,
  TOKEN_INVALID_DETAIL,
  TokenGrant,
  TokenIdentity,
} from './domain/caveat-token';
import { CaveatTokenVerifier } from './domain/caveat-token-verifier';
import { AgentSessionKeys } from './agent-session-keys.service';
import { SessionRecord, AgentSessionsRepository } from './agent-sessions.repository';

/**
 * how long a replica trusts that a session is alive and what its creator may
 * do, should a bus message be lost; ending a session or revoking its creator
 * reaches every replica through the bus at once
 */
const LIVE_TTL_MS = 10_000;
/** changes that can end a session's right to act: its creator's token, gateway, membership, user or workspace */
const CHANGES_CREATOR = /^(organization|workspace|user|member)\.|^token\.revoked$|^gateway\.revoked$/;
const ROOT = 'all';

/** The one refusal of a token that is not ours (see TOKEN_INVALID_DETAIL). */
function tokenInvalid(): UnauthenticatedError {
  return new UnauthenticatedError(TOKEN_INVALID_DETAIL, 'TOKEN_INVALID');
}

interface Live {
  session: SessionRecord;
  /** the creator as they are now, narrowed to the session's workspace */
  creator: Principal;
}

/**
 * Authenticates session caveat tokens for the global guard and the MCP fast
 * path. The chain is verified once per token and remembered (HMACs cost more
 * than a map lookup, and a token is used for hours); every use still checks
 * the token's expiry and asks the shared cache whether the session is alive
 * and its creator still may act, so an end or a revocation refuses the next
 * request on every replica.
 */
@Injectable()
export class AgentSessionCredentials implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('SessionCredentials');
  private readonly live: SharedCache<Live>;
  private readonly verifier: CaveatTokenVerifier;

  constructor(
    private readonly repository: AgentSessionsRepository,
    private readonly keys: AgentSessionKeys,
    private readonly resolvers: CredentialResolvers,
    private readonly principals: PrincipalResolver,
    private readonly gateways: GatewayCredentials,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    outbox: OutboxService,
    principalCache: PrincipalCache,
    streams: StreamAccess,
    private readonly clock: Clock,
  ) {
    this.live = new SharedCache(bus, 'agent-sessions', LIVE_TTL_MS, clock, { staleIfError: isDatabaseUnavailable });
    this.verifier = new CaveatTokenVerifier((identity) => this.keyOf(identity));
    keys.onRemoved((organizationId, keyId) => this.verifier.forgetKey(organizationId, keyId));
    outbox.afterCommitOf(
      (topic) => CHANGES_CREATOR.test(topic),
      (topics) => this.live.invalidate(ROOT, { keepForOutage: changesOnlyAdd(topics) }),
    );
    // roles the identity provider changed at sign-in drop the principal cache without an outbox message
    principalCache.onChange((onlyAdded) => void this.live.invalidate(ROOT, { keepForOutage: onlyAdded }));
    // an ended session's open streams (MCP, events) end on every replica, not at their next request
    this.live.onEvict(() => streams.recheck());
  }

  onModuleInit(): void {
    this.resolvers.register({ prefix: CAVEAT_TOKEN_PREFIX, resolve: (token) => this.resolve(token) });
  }

  onModuleDestroy(): void {
    this.live.close();
    this.verifier.clear();
  }

  async resolve(token: string): Promise<Principal> {
    const grant = await this.verify(token);
    const live = await this.live.getOrLoad(`${ROOT}:${grant.sessionId}`, () => this.load(grant));
    if (live.session.organizationId !== grant.organizationId) throw tokenInvalid();
    this.assertAlive(live.session, this.clock.date());
    return sessionPrincipal(live, grant);
  }

  /** Drops a session on every replica (it ended). */
  forget(sessionId: string): Promise<void> {
    return this.live.invalidate(`${ROOT}:${sessionId}`);
  }

  private async verify(token: string): Promise<TokenGrant> {
    try {
      return await this.verifier.verify(token, Math.floor(this.clock.now() / 1000));
    } catch (error) {
      if (error instanceof CaveatTokenError) throw new UnauthenticatedError(error.message, error.code);
      throw error;
    }
  }

  /**
   * The key a token names, for anyone who sends one: the identity's shape is
   * checked already, so what fails here is ours, not the caller's. The
   * database away is no verdict on the token (503, and the agent retries);
   * anything else refuses the token like a missing key, at debug level, since
   * an unauthenticated caller chooses how often this runs. A key that cannot
   * be opened still shows up loudly where it mints (a session's start).
   */
  private async keyOf(identity: TokenIdentity): Promise<Buffer | null> {
    try {
      return (
        (await this.keys.byId(SystemScopes.organization(identity.organizationId), identity.keyId))?.derived ?? null
      );
    } catch (error) {
      if (databaseUnavailableReason(error)) throw error;
      this.logger.debug(
        `session token refused: its key ${identity.keyId} could not be looked up (${error instanceof Error ? error.name : typeof error})`,
      );
      return null;
    }
  }

  private async load(grant: TokenGrant): Promise<Live> {
    const session = await this.repository.get(SystemScopes.organization(grant.organizationId), grant.sessionId);
    // a chain that held for a session that is gone: the same answer as any other token that is not (or no longer) ours
    if (!session) throw tokenInvalid();
    this.assertAlive(session, this.clock.date());
    return { session, creator: await this.creatorOf(session) };
  }

  private async creatorOf(session: SessionRecord): Promise<Principal> {
    try {
      if (session.creatorKind === 'gateway')
        return await this.gateways.principalById(
          SystemScopes.workspace(session.organizationId, { id: session.workspaceId, slug: session.workspaceSlug }),
          session.creatorId,
        );
      return await this.principals.byReference(session.organizationId, session.creatorKind, session.creatorId);
    } catch (error) {
      // the creator's own refusal (revoked, expired, gone) ends what acts for it
      if (error instanceof UnauthenticatedError)
        throw new UnauthenticatedError('The session ended: whoever started it no longer has access', 'SESSION_ENDED');
      throw error;
    }
  }

  private assertAlive(session: SessionRecord, now: Date): void {
    if (session.endedAt) throw new UnauthenticatedError('The session has ended', 'SESSION_ENDED');
    if (session.expiresAt <= now) throw new UnauthenticatedError('The session has expired', 'SESSION_EXPIRED');
  }
}

/**
 * The creator, narrowed to the session's workspace and to nothing that spans
 * the organisation, with the token's caveats attached for the layers that
 * enforce them (the guard's capability check, the pool's server and tool filters).
 */
function sessionPrincipal(live: Live, grant: TokenGrant): Principal {
  const { session, creator } = live;
  const role = creator.gateway ? null : roleIn(creator, session.workspaceId);
  if (!creator.gateway && !role)
    throw new UnauthenticatedError(
      'The session ended: whoever started it no longer has access to its workspace',
      'SESSION_ENDED',
    );
  const grantView: AgentSessionGrant = {
    id: session.id,
    workspaceId: session.workspaceId,
    creator: `${session.creatorKind}:${session.creatorId}`,
    caps: grant.workspaces.every((w) => w === session.workspaceId) ? grant.caps : new Set(),
    allowsServer: (server) => permitsServer(grant, server),
    allowsTool: (server, tool) => permitsServer(grant, server) && permitsTool(grant, `${server}__${tool}`),
    allowsSandbox: (name) => grant.caps.has('sandbox:use') && grant.sandboxes.every((s) => s === name),
  };
  return {
    kind: 'session',
    id: session.id,
    name: session.name ?? `session ${session.id}`,
    organizationId: creator.organizationId,
    organizationSlug: creator.organizationSlug,
    orgRole: null,
    workspaceRoles: new Map(role ? [[session.workspaceId, role]] : []),
    restrictedToWorkspaceId: session.workspaceId,
    platformOperator: false,
    ...(creator.gateway ? { gateway: creator.gateway } : {}),
    agentSession: grantView,
  };
}
