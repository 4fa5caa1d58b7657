import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { describePrincipal, Principal, roleIn, WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { PoolCalls } from './calls.service';
import { PoolInstances } from './instances.service';
import { ProxySession } from './proxy/proxy-session';

export type McpEndpoint = { server: string } | { aggregate: true };

interface Entry {
  session: ProxySession;
  owner: string;
  workspaceId: string;
  endpoint: string;
}

/**
 * The downstream MCP sessions this replica serves. A session belongs to the
 * principal that opened it, in one workspace, on one endpoint: anyone else
 * presenting its id is told it does not exist.
 */
@Injectable()
export class PoolSessions implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly sessions = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly instances: PoolInstances,
    private readonly calls: PoolCalls,
  ) {}

  onApplicationBootstrap(): void {
    // the SDK never ends an idle session itself; without this they (and their upstream sessions) leak
    const idleMs = this.config.pool.idleSeconds * 1000;
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const { session } of this.sessions.values()) if (!session.busy && now - session.lastActivity > idleMs) void session.close();
    }, Math.min(60_000, Math.max(500, idleMs / 4)));
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await Promise.all([...this.sessions.values()].map(({ session }) => session.close()));
  }

  create(scope: WorkspaceScope, principal: Principal, endpoint: McpEndpoint, allowedOrigins: string[]): ProxySession {
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
    session.onClosed = () => {
      if (session.sessionId) this.sessions.delete(session.sessionId);
    };
    // known from the moment the transport makes the id, before the client can use it
    session.onSessionId = (id) => this.sessions.set(id, { session, owner: describePrincipal(principal), workspaceId: scope.workspaceId, endpoint: endpointKey(endpoint) });
    return session;
  }

  find(id: string, scope: WorkspaceScope, principal: Principal, endpoint: McpEndpoint): ProxySession | undefined {
    const entry = this.sessions.get(id);
    if (!entry || entry.owner !== describePrincipal(principal) || entry.workspaceId !== scope.workspaceId || entry.endpoint !== endpointKey(endpoint)) return undefined;
    return entry.session;
  }

  count(): number {
    return this.sessions.size;
  }
}

function endpointKey(endpoint: McpEndpoint): string {
  return 'server' in endpoint ? endpoint.server : '*';
}
