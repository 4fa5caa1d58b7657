import type { AddressInfo } from 'node:net';
import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import Redis from 'ioredis';
import { AccessService, describePrincipal, Principal, roleIn, StreamAccess, WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { KeyProvider, ROOT_KEYS } from '@aileron/keys';
import { PoolCalls } from './calls.service';
import { MCP_PERMISSION } from './mcp-routes';
import { PoolInstances } from './instances.service';
import { ProxySession } from './proxy/proxy-session';

export type McpEndpoint = { server: string } | { aggregate: true };


interface Entry {
  session: ProxySession;
  owner: string;
  workspaceId: string;
  endpoint: string;
  announcedAt: number;
}

/**
 * The downstream MCP sessions this replica serves. A session belongs to the
 * principal that opened it, in one workspace, on one endpoint: anyone else
 * presenting its id is told it does not exist.
 */
@Injectable()
export class PoolSessions implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly sessions = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;
  /** session id → the replica serving it, shared by every replica (server mode) */
  private readonly directory: Redis | undefined;
  private readonly directoryTtlSeconds: number;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly instances: PoolInstances,
    private readonly calls: PoolCalls,
    private readonly http: HttpAdapterHost,
    @Inject(ROOT_KEYS) private readonly root: KeyProvider,
    private readonly streams: StreamAccess,
    private readonly access: AccessService,
  ) {
    if (config.redisUrl) {
      this.directory = new Redis(config.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
      this.directory.on('error', () => undefined);
    }
    this.directoryTtlSeconds = config.pool.idleSeconds * 2 + 60;
  }

  onApplicationBootstrap(): void {
    // the SDK never ends an idle session itself; without this they (and their upstream sessions) leak
    const idleMs = this.config.pool.idleSeconds * 1000;
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const { session } of this.sessions.values()) if (!session.busy && now - session.lastActivity > idleMs) void session.close();
    }, Math.min(60_000, Math.max(500, idleMs / 4)));
    this.timer.unref();
  }

  /**
   * Before the HTTP server closes: it waits for open responses, and a
   * client's stream (GET) stays open until its session ends.
   */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await Promise.all([...this.sessions.values()].map(({ session }) => session.close()));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.directory?.quit().catch(() => undefined);
  }

  /**
   * Where another replica reaches this one. Configured in a cluster; on one
   * machine the listening port says it.
   */
  replicaUrl(): string | undefined {
    if (this.config.replicaUrl) return this.config.replicaUrl;
    const address = (this.http.httpAdapter?.getHttpServer() as { address(): AddressInfo | string | null } | undefined)?.address();
    return address && typeof address === 'object' ? `http://127.0.0.1:${address.port}` : undefined;
  }

  /**
   * The replica that serves a session this one does not have, if any other
   * does. Requests go there with the caller's credentials, so an entry counts
   * only if a replica of this installation sealed it (the root key every
   * replica shares) for this very session, and names a replica the way ours
   * is named: anyone who can write to Redis cannot send a caller anywhere.
   * An entry naming this replica is stale (it was restarted, or the session
   * ended without its entry going): it is dropped.
   */
  async ownerOf(id: string): Promise<string | undefined> {
    const owner = await this.entryOf(id);
    if (owner === undefined) return undefined;
    const self = this.replicaUrl();
    if (owner === self) {
      if (!this.sessions.has(id)) await this.forget(id, owner);
      return undefined;
    }
    return isReplicaAddress(owner, self, this.config.replicaUrl !== undefined) ? owner : undefined;
  }

  /** Drops a session's directory entry if it still names `owner`: the session is gone with it. */
  async forget(id: string, owner: string): Promise<void> {
    if ((await this.entryOf(id)) === owner) await this.directory?.del(this.directoryKey(id)).catch(() => undefined);
  }

  /** The address a session's directory entry names, if it is a sealed entry for this session. */
  private async entryOf(id: string): Promise<string | undefined> {
    if (!this.directory) return undefined;
    const sealed = await this.directory.get(this.directoryKey(id)).catch(() => null);
    if (!sealed) return undefined;
    try {
      return this.root.unwrap(sealed, directoryAad(id)).toString('utf8');
    } catch {
      return undefined;
    }
  }

  private announce(id: string): void {
    const self = this.replicaUrl();
    if (!this.directory || !self) return;
    const sealed = this.root.wrap(Buffer.from(self, 'utf8'), directoryAad(id));
    void this.directory.set(this.directoryKey(id), sealed, 'EX', this.directoryTtlSeconds).catch(() => undefined);
  }

  /** Under the installation's prefix, so two installations can share one Redis. */
  private directoryKey(id: string): string {
    return `${this.config.queuePrefix}:mcp-session:${id}`;
  }

  create(scope: WorkspaceScope, principal: Principal, endpoint: McpEndpoint, allowedOrigins: string[], credential?: string): ProxySession {
    const organizationSlug = principal.organizationSlug;
    const role = roleIn(principal, scope.workspaceId);
    const session = new ProxySession(
      endpoint,
      {
        servers: () => this.instances.remoteServers(scope),
        acquire: (server) => this.instances.acquire(scope, organizationSlug, server),
      },
      this.calls,
      {
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        workspaceSlug: scope.workspaceSlug,
        requester: describePrincipal(principal),
        principal: {
          user: principal.kind === 'gateway' ? undefined : describePrincipal(principal),
          roles: role ? [role] : [],
          groups: [...(principal.idpGroups ?? []), ...(principal.gateway?.groups ?? [])],
          ...(principal.kind === 'gateway' ? { gateway: principal.id } : {}),
        },
        gatewayId: principal.kind === 'gateway' ? principal.id : null,
        caller: principal,
      },
      { allowedOrigins },
    );
    // a revoked token, gateway or membership ends the session (and its stream of server messages) at once, on every replica
    const release = credential
      ? this.streams.hold(
          credential,
          async (fresh) => {
            if (describePrincipal(fresh) !== describePrincipal(principal)) throw new Error('the credential now names someone else');
            await this.access.workspace(fresh, scope.workspaceSlug, MCP_PERMISSION);
          },
          () => void session.close(),
        )
      : () => undefined;
    session.onClosed = () => {
      release();
      if (!session.sessionId) return;
      this.sessions.delete(session.sessionId);
      void this.directory?.del(this.directoryKey(session.sessionId)).catch(() => undefined);
    };
    // known from the moment the transport makes the id, before the client can use it
    session.onSessionId = (id) => {
      this.sessions.set(id, { session, owner: describePrincipal(principal), workspaceId: scope.workspaceId, endpoint: endpointKey(endpoint), announcedAt: Date.now() });
      this.announce(id);
    };
    return session;
  }

  /** Whether this replica serves the session, whoever asks: the caller is checked by `find`. */
  serves(id: string): boolean {
    return this.sessions.has(id);
  }

  find(id: string, scope: WorkspaceScope, principal: Principal, endpoint: McpEndpoint): ProxySession | undefined {
    const entry = this.sessions.get(id);
    // a live session keeps its directory entry from expiring (one write per quarter of its lifetime)
    if (entry && Date.now() - entry.announcedAt > (this.directoryTtlSeconds * 1000) / 4) {
      entry.announcedAt = Date.now();
      this.announce(id);
    }
    if (!entry || entry.owner !== describePrincipal(principal) || entry.workspaceId !== scope.workspaceId || entry.endpoint !== endpointKey(endpoint)) return undefined;
    return entry.session;
  }

  count(): number {
    return this.sessions.size;
  }
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
  return configured ? url.protocol === mine.protocol && url.port === mine.port : url.protocol === 'http:' && url.hostname === '127.0.0.1';
}

function endpointKey(endpoint: McpEndpoint): string {
  return 'server' in endpoint ? endpoint.server : '*';
}
