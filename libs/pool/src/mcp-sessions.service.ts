import { hash, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import {
  BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { AccessService, describePrincipal, Principal, roleIn, StreamAccess, WorkspaceScope } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { ConnectionTokens } from '@aileron/connections';
import { KeyProvider, ROOT_KEYS } from '@aileron/keys';
import { RedisService } from '@aileron/redis';
import { PeriodicTask } from '@aileron/schedule';
import { BuiltinServers } from './builtin-servers';
import { PoolCalls } from './pool-calls.service';
import { MCP_PERMISSION } from './mcp-routes';
import { PoolInstances } from './pool-instances.service';
import { McpSession } from './proxy/mcp-session';

export type McpEndpoint = { server: string } | { aggregate: true };

interface Entry {
  session: McpSession;
  owner: string;
  /** sha256 of the bearer credential that opened it: only that credential reaches it */
  credential: Buffer;
  workspaceId: string;
  endpoint: string;
  /** performance.now(): Redis expires the entry after a real TTL, whatever this process's Clock says */
  announcedAt: number;
}

/**
 * The downstream MCP sessions (`Mcp-Session-Id`) this replica serves. An MCP
 * session belongs to the exact credential that opened it, in one workspace, on
 * one endpoint: anyone else presenting its id is told it does not exist. The
 * credential, not only the principal: a caveat token narrowed from the one that
 * opened an MCP session names the same principal (the agent session's
 * `session:<id>`) with less reach, and the MCP session acts with the grant it
 * was opened with.
 */
@Injectable()
export class McpSessions implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly sessions = new Map<string, Entry>();
  private readonly idleCloser: PeriodicTask;
  private readonly directoryTtlSeconds: number;
  private readonly stopWatching: () => void;
  private readonly logger = new Logger('McpSessions');
  /** a misconfigured installation would say it at every request: once is enough to find it */
  private toldUnreachable = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly instances: PoolInstances,
    private readonly calls: PoolCalls,
    private readonly http: HttpAdapterHost,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    private readonly streams: StreamAccess,
    private readonly access: AccessService,
    /** MCP session id → the replica serving it, shared by every replica (server mode) */
    private readonly directory: RedisService,
    private readonly builtins: BuiltinServers,
    private readonly clock: Clock,
    private readonly connections: ConnectionTokens,
  ) {
    this.directoryTtlSeconds = config.pool.sessionIdleSeconds * 2 + 60;
    // sessions opened while Redis was away are in no directory yet: other replicas learn of them now
    this.stopWatching = directory.onChange((available) => {
      if (available) for (const id of this.sessions.keys()) this.announce(id);
    });
    // the SDK never ends an idle session itself; without this they (and their upstream sessions) leak
    const idleMs = config.pool.sessionIdleSeconds * 1000;
    this.idleCloser = new PeriodicTask({
      name: 'idle MCP session sweep',
      // a pass over a map: often enough that a session outlives its bound by at most a thirtieth of it
      everyMs: idleMs / 30,
      run: () => {
        const now = this.clock.now();
        for (const { session } of this.sessions.values())
          if (!session.busy && now - session.lastActivity > idleMs) void session.close();
      },
      logger: this.logger,
    });
  }

  onApplicationBootstrap(): void {
    this.idleCloser.start();
  }

  /**
   * Before the HTTP server closes: it waits for open responses, and a
   * client's stream (GET) stays open until its session ends.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.idleCloser.stop();
    await Promise.all([...this.sessions.values()].map(({ session }) => session.close()));
  }

  onApplicationShutdown(): void {
    this.stopWatching();
  }

  /**
   * Where another replica reaches this one. Configured in a cluster; on one
   * machine the listening port says it.
   */
  replicaUrl(): string | undefined {
    if (this.config.replicaUrl) return this.config.replicaUrl;
    const address = (
      this.http.httpAdapter?.getHttpServer() as { address(): AddressInfo | string | null } | undefined
    )?.address();
    return address && typeof address === 'object' ? `http://127.0.0.1:${address.port}` : undefined;
  }

  /**
   * The replica that serves a session this one does not have, if any other
   * does. Requests go there with the caller's credentials, so an entry counts
   * only if a replica of this installation sealed it (the root key every
   * replica shares) for this very session, and names a replica the way ours
   * is named: anyone who can write to Redis cannot send a caller anywhere.
   * An entry naming this replica is stale (it was restarted, or the session
   * ended without its entry going): it is dropped. While Redis is away,
   * throws RedisUnavailableError (503): the session may well live on, on
   * another replica, so "not found" would be a lie.
   */
  async ownerOf(id: string): Promise<string | undefined> {
    const owner = await this.entryOf(id);
    if (owner === undefined) return undefined;
    const self = this.replicaUrl();
    if (owner === self) {
      if (!this.sessions.has(id)) await this.forget(id, owner);
      return undefined;
    }
    const configured = this.config.replicaUrl !== undefined;
    if (isReplicaAddress(owner, self, configured)) return owner;
    if (!this.toldUnreachable) {
      this.toldUnreachable = true;
      // the origin alone: never a path or credentials, never the session id
      const where = URL.canParse(owner) ? new URL(owner).origin : 'an address that is not a URL';
      this.logger.warn(
        `An MCP session is held by the replica at ${where}, which this replica does not forward to: ` +
          (configured
            ? `with AILERON_REPLICA_URL set (here ${self}), it forwards only to replicas on the same scheme and port`
            : 'without AILERON_REPLICA_URL, it forwards only to replicas on 127.0.0.1') +
          '. Such requests are answered 404 MCP_SESSION_NOT_FOUND; give every replica an AILERON_REPLICA_URL of one scheme and port. (Said once.)',
      );
    }
    return undefined;
  }

  /** Drops a session's directory entry if it still names `owner`: the session is gone with it. */
  async forget(id: string, owner: string): Promise<void> {
    if ((await this.entryOf(id).catch(() => undefined)) === owner) {
      await this.directory
        .run('The MCP session directory', (redis) => redis.del(directoryKey(id)))
        .catch(() => undefined);
    }
  }

  /** The address a session's directory entry names, if it is a sealed entry for this session. */
  private async entryOf(id: string): Promise<string | undefined> {
    if (!this.directory.configured) return undefined;
    const sealed = await this.directory.run('Finding the replica that serves this MCP session', (redis) =>
      redis.get(directoryKey(id)),
    );
    if (!sealed) return undefined;
    try {
      return this.root.unwrap(sealed, directoryAad(id)).toString('utf8');
    } catch {
      return undefined;
    }
  }

  private announce(id: string): void {
    const self = this.replicaUrl();
    if (!this.directory.configured || !self) return;
    const sealed = this.root.wrap(Buffer.from(self, 'utf8'), directoryAad(id));
    void this.directory
      .run('The MCP session directory', (redis) => redis.set(directoryKey(id), sealed, 'EX', this.directoryTtlSeconds))
      .catch(() => undefined);
  }

  create(
    scope: WorkspaceScope,
    principal: Principal,
    endpoint: McpEndpoint,
    allowedOrigins: string[],
    credential: string,
  ): McpSession {
    const organizationSlug = principal.organizationSlug;
    const role = roleIn(principal, scope.workspaceId);
    // an agent session acts for whoever started it: the policy, approvals and audit see that one
    const requester = principal.agentSession?.creator ?? describePrincipal(principal);
    const gatewayId = requester.startsWith('gateway:') ? requester.slice('gateway:'.length) : null;
    const session = new McpSession(
      endpoint,
      {
        servers: async () => [
          ...(await this.instances.remoteServers(scope)),
          ...(await this.builtins.present(scope)).map((name) => ({ name })),
        ],
        acquire: (server) =>
          this.builtins.has(server)
            ? this.builtins.acquire(scope, principal, server, this.config.pool.maxConcurrentCalls)
            : this.instances.acquire(scope, organizationSlug, server),
        // per person: the caller's own connection (an agent session's is its creator's); per workspace: the workspace's
        bearer: (server, instance) =>
          instance.oauth
            ? this.connections.bearerFor(scope, server, instance.oauth.connections, requester, callerName(principal))
            : undefined,
        awaitConnection: async (server, ms, signal) => {
          const instance = await this.instances.acquire(scope, organizationSlug, server);
          return instance.oauth
            ? this.connections.awaitConnection(scope, server, instance.oauth.connections, requester, ms, signal)
            : true;
        },
      },
      this.calls,
      {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        workspaceSlug: scope.workspaceSlug,
        requester,
        principal: {
          user: gatewayId ? undefined : requester,
          roles: role ? [role] : [],
          groups: [...(principal.idpGroups ?? []), ...(principal.gateway?.groups ?? [])],
          ...(gatewayId ? { gateway: gatewayId } : {}),
        },
        gatewayId,
        caller: principal,
        agentSessionId: principal.agentSession?.id ?? null,
      },
      { allowedOrigins, clock: this.clock, connectWaitMs: this.config.pool.connectWaitSeconds * 1000 },
    );
    // a revoked token, gateway or membership ends the session (and its stream of server messages) at once, on every replica
    const release = this.streams.hold(
      credential,
      async (fresh) => {
        if (describePrincipal(fresh) !== describePrincipal(principal))
          throw new Error('the credential now names someone else');
        await this.access.workspace(fresh, scope.workspaceSlug, MCP_PERMISSION);
      },
      () => void session.close(),
    );
    session.onClosed = () => {
      release();
      const id = session.sessionId;
      if (!id) return;
      this.sessions.delete(id);
      if (this.directory.configured)
        void this.directory
          .run('The MCP session directory', (redis) => redis.del(directoryKey(id)))
          .catch(() => undefined);
    };
    // known from the moment the transport makes the id, before the client can use it
    session.onSessionId = (id) => {
      this.sessions.set(id, {
        session,
        owner: describePrincipal(principal),
        credential: credentialDigest(credential),
        workspaceId: scope.workspaceId,
        endpoint: endpointKey(endpoint),
        announcedAt: performance.now(),
      });
      this.announce(id);
    };
    return session;
  }

  /** Whether this replica serves the session, whoever asks: the caller is checked by `find`. */
  serves(id: string): boolean {
    return this.sessions.has(id);
  }

  /**
   * The session, when `credential` is the one that opened it (and its
   * principal, workspace and endpoint match). Checked where the session
   * lives, so a request another replica forwarded here is judged the same.
   */
  find(
    id: string,
    scope: WorkspaceScope,
    principal: Principal,
    endpoint: McpEndpoint,
    credential: string,
  ): McpSession | undefined {
    const entry = this.sessions.get(id);
    // a live session keeps its directory entry from expiring (one write per quarter of its lifetime)
    if (entry && performance.now() - entry.announcedAt > (this.directoryTtlSeconds * 1000) / 4) {
      entry.announcedAt = performance.now();
      this.announce(id);
    }
    if (
      !entry ||
      entry.owner !== describePrincipal(principal) ||
      entry.workspaceId !== scope.workspaceId ||
      entry.endpoint !== endpointKey(endpoint)
    )
      return undefined;
    if (!timingSafeEqual(entry.credential, credentialDigest(credential))) return undefined;
    return entry.session;
  }

  count(): number {
    return this.sessions.size;
  }
}

/** Who is calling, as a message to them names it. */
function callerName(principal: Principal): string {
  const who = principal.agentSession ? `the agent session ${principal.agentSession.id} of` : '';
  const kind = { api_token: 'API token', user: '', gateway: 'gateway', session: '' }[principal.kind];
  return [who, kind, principal.name].filter(Boolean).join(' ');
}

/** The installation's prefix goes in front (RedisService), so two installations can share one Redis. */
function directoryKey(id: string): string {
  return `mcp-session:${id}`;
}

/** A sealed entry opens only as the entry of the session it was made for: one copied onto another session's key does not. */
function directoryAad(id: string): string {
  return `aileron/replica-directory/${id}`;
}

/**
 * What a replica address looks like: configured (`AILERON_REPLICA_URL`, one per
 * pod), the scheme and port ours has; unconfigured (replicas on one machine),
 * loopback on any port. A host and nothing else either way: no credentials,
 * path, query or fragment.
 */
export function isReplicaAddress(address: string, self: string | undefined, configured: boolean): boolean {
  if (!self || !URL.canParse(address)) return false;
  const url = new URL(address);
  const mine = new URL(self);
  if (address !== url.origin || url.hostname === '') return false;
  return configured
    ? url.protocol === mine.protocol && url.port === mine.port
    : url.protocol === 'http:' && url.hostname === '127.0.0.1';
}

/** Fixed length, so the comparison takes the same time whatever was presented; the credential itself is never kept. */
function credentialDigest(credential: string): Buffer {
  // one-shot: several times cheaper than createHash for a token, and this runs on every call
  return hash('sha256', credential, 'buffer');
}

function endpointKey(endpoint: McpEndpoint): string {
  return 'server' in endpoint ? endpoint.server : '*';
}
