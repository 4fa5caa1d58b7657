import { randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import {
  AssignmentRecord,
  CatalogService,
  ConnectionMode,
  isVaultReference,
  NamespacedServer,
  oauthOf,
  toolPrefixOf,
  type SessionMode,
} from '@aileron/catalog';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError, ErrorCode } from '@aileron/errors';
import { checkOutboundUrl, OutboundUrlRefusedError, outboundPolicyOf } from '@aileron/net';
import { PeriodicTask } from '@aileron/schedule';
import { VaultService } from '@aileron/vault';
import {
  InstanceDriver,
  InProcessEndpoint,
  InstanceEndpoint,
  InstanceExit,
  InstanceStartError,
  RunningInstance,
} from './drivers/driver';

export const INSTANCE_DRIVER = Symbol('INSTANCE_DRIVER');

export class PoolError extends DomainError {
  constructor(code: ErrorCode, detail: string, extensions: Record<string, unknown> = {}) {
    super(code, detail, { extensions });
  }
}

/** What a workspace's assigned server runs, read from its pinned catalog version. */
interface Definition {
  transport: 'stdio' | 'streamable_http';
  command?: string;
  args?: string[];
  image?: string;
  url?: string;
  env?: Record<string, string>;
  headers?: Record<string, string>;
  sessions?: SessionMode;
}

/**
 * One running instance of a (workspace, server, version), shared by that
 * workspace's MCP sessions. An upstream URL is an instance too, without a
 * process: it still has credentials resolved once and a lifecycle.
 */
export class Instance {
  inflight = 0;
  upstreamSessions = 0;
  /** the Clock's time of the last call in or out, which the idle sweep compares */
  lastUsed: number;
  private stopping: Promise<void> | undefined;
  /** an MCP session saw its connection to the instance break: check before handing it out again */
  suspected = false;
  /** the Clock's time it started, for people */
  readonly startedAt: number;
  /** who hears it end: removed when they go first, so a long-lived instance does not keep every session it ever served */
  private readonly endListeners = new Set<(exit: InstanceExit) => void>();
  private exit: InstanceExit | undefined;

  constructor(
    readonly id: string,
    readonly server: string,
    readonly version: string,
    readonly endpoint: InstanceEndpoint | InProcessEndpoint,
    readonly ended: Promise<InstanceExit>,
    private readonly running: RunningInstance<InstanceEndpoint | InProcessEndpoint> | null,
    private readonly end: (exit: InstanceExit) => void,
    readonly maxInflight: number,
    private readonly clock: Clock,
    /** the version of each secret it was started with that follows the newest one (path → version) */
    readonly secrets: ReadonlyMap<string, number> = new Map(),
    /** `shared`: its MCP sessions share upstream sessions (proxy/shared-upstream.ts) instead of one each */
    readonly sessionMode: SessionMode = 'per_session',
    /** an upstream that signs in with OAuth: each MCP session's requests carry the token of the connection it uses */
    readonly oauth: { connections: ConnectionMode } | null = null,
  ) {
    this.lastUsed = clock.now();
    this.startedAt = this.lastUsed;
    void ended.then((exit) => {
      this.exit = exit;
      for (const listener of [...this.endListeners]) listener(exit);
      this.endListeners.clear();
    });
  }

  /** Calls `listener` when the instance ends (at once, if it has); the returned function stops listening. */
  onEnded(listener: (exit: InstanceExit) => void): () => void {
    const exit = this.exit;
    if (exit) {
      queueMicrotask(() => listener(exit));
      return () => undefined;
    }
    this.endListeners.add(listener);
    return () => this.endListeners.delete(listener);
  }

  /** Whether it was started with an older value of `path` than its `version` (null: the secret is gone). */
  holdsOlder(path: string, version: number | null): boolean {
    const held = this.secrets.get(path);
    return held !== undefined && (version === null || held < version);
  }

  get pid(): number | undefined {
    return this.running?.pid;
  }

  /** Holds a call slot; false when the instance is at its concurrency limit. */
  enter(): boolean {
    if (this.inflight >= this.maxInflight) return false;
    this.inflight++;
    this.lastUsed = this.clock.now();
    return true;
  }

  leave(): void {
    this.inflight--;
    this.lastUsed = this.clock.now();
  }

  healthy(): Promise<boolean> {
    return this.running ? this.running.healthy() : Promise.resolve(true);
  }

  /**
   * After a broken connection: alive if it answers its health check before
   * the driver reports it gone (which, for a killed sandbox, can lag behind
   * the broken socket while the namespace is torn down).
   */
  async confirmAlive(): Promise<boolean> {
    const alive = await Promise.race([this.ended.then(() => false), this.healthy()]);
    if (alive) this.suspected = false;
    return alive;
  }

  stop(reason: string): Promise<void> {
    this.stopping ??= (async () => {
      this.end({ reason, requested: true });
      await this.running?.stop();
    })();
    return this.stopping;
  }
}

interface Slot {
  scope: WorkspaceScope;
  organizationSlug: string;
  server: string;
  instance: Instance | null;
  starting: Promise<Instance> | null;
  /** the instance being started, listed as `starting` until it runs */
  next: { id: string; version: string; since: number } | null;
  /** consecutive crashes, for the restart backoff; reset once an instance lived a while */
  crashes: number;
  lastCrashAt: number;
}

export interface InstanceHealth {
  server: string;
  version: string | null;
  id: string | null;
  state: 'running' | 'suspected' | 'starting' | 'crashed';
  crashes: number;
  lastCrashAt: Date | null;
  inflight: number;
  sessions: number;
}

const HEALTH_EVERY_MS = 30_000;
const STABLE_AFTER_MS = 60_000;
const MAX_BACKOFF_MS = 30_000;

/**
 * Starts instances on first use, shares them between a workspace's MCP sessions,
 * restarts them with backoff after a crash, stops them when idle, and stops or
 * replaces them when the kill switch or a new pinned version says so.
 */
@Injectable()
export class PoolInstances implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Pool');
  private readonly slots = new Map<string, Slot>();
  private readonly sweeper: PeriodicTask;
  private unsubscribe: (() => void) | undefined;
  private lastHealthCheck: number;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly catalog: CatalogService,
    private readonly vault: VaultService,
    @Inject(INSTANCE_DRIVER) private readonly driver: InstanceDriver,
    private readonly clock: Clock,
  ) {
    this.lastHealthCheck = clock.now();
    const every = Math.min(10_000, Math.max(250, (config.pool.idleSeconds * 1000) / 4));
    this.sweeper = new PeriodicTask({
      name: 'pool idle and health sweep',
      everyMs: every,
      run: () => this.tick(),
      logger: this.logger,
    });
  }

  onApplicationBootstrap(): void {
    this.sweeper.start();
    this.unsubscribe = this.catalog.onServersChanged((prefix) => void this.reconcile(prefix));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.sweeper.stop();
    this.unsubscribe?.();
    await Promise.all([...this.slots.values()].map(async (slot) => slot.instance?.stop('control plane shutting down')));
    await this.driver.close();
  }

  /** The workspace's remote servers that are on, with the tool prefix of the version the pool runs: what `/mcp/{ws}` aggregates. */
  async remoteServers(scope: WorkspaceScope): Promise<NamespacedServer[]> {
    const assignments = await this.catalog.workspaceServers(scope);
    return assignments
      .filter((a) => a.enabled && a.pinned.definition.mode === 'remote')
      .map((a) => ({ name: a.name, tool_prefix: toolPrefixOf(a.pinned.definition) }));
  }

  /** The running instance for an MCP session to use, started if need be. */
  async acquire(scope: WorkspaceScope, organizationSlug: string, server: string): Promise<Instance> {
    const assignment = await this.assignment(scope, server);
    const key = slotKey(scope, server);
    let slot = this.slots.get(key);
    if (!slot)
      this.slots.set(
        key,
        (slot = {
          scope,
          organizationSlug,
          server,
          instance: null,
          starting: null,
          next: null,
          crashes: 0,
          lastCrashAt: 0,
        }),
      );
    const current = slot.instance;
    if (
      current &&
      current.version === assignment.pinned.version &&
      (!current.suspected || (await current.confirmAlive()))
    )
      return current;
    if (current && current.version === assignment.pinned.version && slot.instance === current) {
      // it died under an MCP session before its driver said so: a crash, for the backoff too
      slot.crashes++;
      slot.lastCrashAt = this.clock.now();
      await current.stop('stopped answering');
      if (slot.instance === current) slot.instance = null;
    } else if (current) void current.stop(`version ${assignment.pinned.version} replaces ${current.version}`);
    if (!slot.starting) {
      const next = { id: instanceId(server), version: assignment.pinned.version, since: this.clock.now() };
      slot.next = next;
      slot.starting = this.start(slot, assignment, next.id).finally(() => {
        slot.starting = null;
        if (slot.next === next) slot.next = null;
      });
    }
    return slot.starting;
  }

  /**
   * Stops a running instance of the workspace and starts its server again at
   * once (credentials resolved anew); its MCP sessions carry on at their next
   * request, on the new instance. Answers once the new one runs.
   * POOL_INSTANCE_NOT_FOUND when this replica runs no such instance.
   */
  async restart(scope: WorkspaceScope, id: string, actor: string): Promise<InstanceView> {
    const slot = [...this.slots.values()].find(
      (s) => s.scope.workspaceId === scope.workspaceId && s.instance?.id === id,
    );
    const instance = slot?.instance;
    if (!slot || !instance)
      throw new PoolError(
        'POOL_INSTANCE_NOT_FOUND',
        `Workspace "${scope.workspaceSlug}" runs no instance "${id}" on this replica`,
      );
    await instance.stop(`restarted by ${actor}`);
    // stopped on request: no crash for the backoff, and the next acquire must not hand it out again
    if (slot.instance === instance) slot.instance = null;
    this.logger.log({ msg: 'instance restarted', server: slot.server, instance: id, actor });
    const started = await this.acquire(slot.scope, slot.organizationSlug, slot.server);
    return viewOf(slot, started);
  }

  /** Instances running or starting, for operators and tests. */
  list(scope?: WorkspaceScope): InstanceView[] {
    return [...this.slots.values()]
      .filter((slot) => (slot.instance || slot.next) && (!scope || slot.scope.workspaceId === scope.workspaceId))
      .flatMap((slot) => {
        const views: InstanceView[] = [];
        if (slot.instance) views.push(viewOf(slot, slot.instance));
        // a restart or a version change: the new one shows beside the old until it replaces it
        if (slot.next && slot.next.id !== slot.instance?.id)
          views.push({
            workspace: slot.scope.workspaceSlug,
            server: slot.server,
            version: slot.next.version,
            id: slot.next.id,
            state: 'starting',
            started_at: new Date(slot.next.since).toISOString(),
            inflight: 0,
            sessions: 0,
          });
        return views;
      });
  }

  /**
   * For the overview: each server of the workspace this replica runs or has
   * tried to, with its state. `suspected`: an MCP session saw its connection
   * break and the next use checks it; `crashed`: it ended unexpectedly or
   * failed to start, and the next use restarts it after a backoff. `crashes`
   * counts those since it last ran stably.
   */
  health(scope: WorkspaceScope): InstanceHealth[] {
    return [...this.slots.values()]
      .filter((slot) => slot.scope.workspaceId === scope.workspaceId)
      .map((slot): InstanceHealth => {
        const i = slot.instance;
        return {
          server: slot.server,
          version: i?.version ?? null,
          id: i?.id ?? null,
          state: i ? (i.suspected ? 'suspected' : 'running') : slot.starting ? 'starting' : 'crashed',
          crashes: slot.crashes,
          lastCrashAt: slot.crashes > 0 ? new Date(slot.lastCrashAt) : null,
          inflight: i?.inflight ?? 0,
          sessions: i?.upstreamSessions ?? 0,
        };
      })
      .filter((h) => h.state !== 'crashed' || h.crashes > 0)
      .sort((a, b) => (a.server < b.server ? -1 : a.server > b.server ? 1 : 0));
  }

  /** Throws the error a client should see when the server cannot be used at all. */
  async assignment(scope: WorkspaceScope, server: string): Promise<AssignmentRecord> {
    const assignment = (await this.catalog.workspaceServers(scope)).find((a) => a.name === server);
    if (!assignment)
      throw new PoolError('MCP_SERVER_NOT_FOUND', `Workspace "${scope.workspaceSlug}" has no server "${server}"`);
    if (assignment.pinned.definition.mode !== 'remote') {
      throw new PoolError(
        'MCP_SERVER_NOT_REMOTE',
        `"${server}" is a local server: it runs on developers' machines through their gateway, not in the pool`,
      );
    }
    if (!assignment.enabled) {
      throw new PoolError(
        'MCP_SERVER_DISABLED',
        `"${server}" is switched off for the organisation${assignment.disabledReason ? `: ${assignment.disabledReason}` : ''}`,
      );
    }
    return assignment;
  }

  private async start(slot: Slot, assignment: AssignmentRecord, id: string): Promise<Instance> {
    const running = [...this.slots.values()].filter(
      (s) =>
        s.scope.workspaceId === slot.scope.workspaceId && s !== slot && (s.instance !== null || s.starting !== null),
    ).length;
    if (running >= this.config.pool.maxInstancesPerWorkspace) {
      throw new PoolError(
        'POOL_INSTANCE_LIMIT',
        `Workspace "${slot.scope.workspaceSlug}" already runs ${running} instances, its limit (AILERON_POOL_MAX_INSTANCES_PER_WORKSPACE)`,
      );
    }
    const wait = backoff(slot, this.clock.now());
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));

    const definition = assignment.pinned.definition as unknown as Definition;
    const version = assignment.pinned.version;
    const reason = { actor: `pool:${id}`, server: slot.server, instance: id };
    // the secret versions it starts with, so a newer one written later replaces it
    const secretVersions = new Map<string, number>();
    let settle!: (exit: InstanceExit) => void;
    const ended = new Promise<InstanceExit>((resolve) => (settle = resolve));
    let instance: Instance;
    const startedAt = this.clock.now();
    const startMs = performance.now();
    try {
      if (definition.url) {
        // checked at every start, not only at publication: DNS may have moved the name since
        await checkOutboundUrl(definition.url, outboundPolicyOf(this.config));
        const headers = await this.vault.resolveAll(slot.scope, definition.headers ?? {}, reason, secretVersions);
        const oauth = oauthOf(definition as unknown as Record<string, unknown>);
        instance = new Instance(
          id,
          slot.server,
          version,
          { url: definition.url, headers, outbound: outboundPolicyOf(this.config) },
          ended,
          null,
          settle,
          this.config.pool.maxConcurrentCalls,
          this.clock,
          secretVersions,
          'per_session',
          oauth && { connections: oauth.connections },
        );
      } else {
        const env = await this.vault.resolveAll(slot.scope, definition.env ?? {}, reason, secretVersions);
        const secrets = Object.entries(definition.env ?? {})
          .filter(([, value]) => isVaultReference(value))
          .map(([name]) => env[name]!);
        const run = definition.image
          ? { kind: 'image' as const, image: definition.image, args: definition.args ?? [] }
          : { kind: 'command' as const, command: definition.command!, args: definition.args ?? [] };
        const process = await this.driver.start({
          id,
          organizationId: slot.scope.organizationId,
          organizationSlug: slot.organizationSlug,
          workspaceId: slot.scope.workspaceId,
          workspaceSlug: slot.scope.workspaceSlug,
          server: slot.server,
          version,
          run,
          env,
          secrets,
          limits: { memoryMb: this.config.pool.memoryMb, cpuMillis: this.config.pool.cpuMillis },
        });
        void process.exited.then(settle);
        instance = new Instance(
          id,
          slot.server,
          version,
          process.endpoint,
          ended,
          process,
          settle,
          this.config.pool.maxConcurrentCalls,
          this.clock,
          secretVersions,
          definition.sessions ?? 'per_session',
        );
      }
    } catch (error) {
      slot.crashes++;
      slot.lastCrashAt = this.clock.now();
      if (error instanceof OutboundUrlRefusedError)
        throw new PoolError('MCP_UPSTREAM_REFUSED', `The upstream of "${slot.server}" is refused: ${error.message}`);
      if (error instanceof InstanceStartError)
        throw new PoolError('MCP_INSTANCE_START_FAILED', `"${slot.server}" could not start: ${error.message}`);
      throw error;
    }
    slot.instance = instance;
    this.logger.log({
      msg: 'instance started',
      workspace: slot.scope.workspaceSlug,
      server: slot.server,
      version,
      instance: id,
      pid: instance.pid,
      ms: Math.round(performance.now() - startMs),
    });
    void ended.then((exit) => {
      if (slot.instance === instance) slot.instance = null;
      if (exit.requested) {
        this.logger.log({ msg: 'instance stopped', server: slot.server, instance: id, reason: exit.reason });
        return;
      }
      // a crash: the next use restarts it, waiting longer the more often it has crashed lately
      slot.crashes = this.clock.now() - startedAt > STABLE_AFTER_MS ? 1 : slot.crashes + 1;
      slot.lastCrashAt = this.clock.now();
      this.logger.warn({
        msg: 'instance ended unexpectedly',
        workspace: slot.scope.workspaceSlug,
        server: slot.server,
        instance: id,
        reason: exit.reason,
      });
    });
    return instance;
  }

  private async tick(): Promise<void> {
    const idleMs = this.config.pool.idleSeconds * 1000;
    const now = this.clock.now();
    for (const slot of this.slots.values()) {
      const instance = slot.instance;
      if (instance && instance.upstreamSessions === 0 && instance.inflight === 0 && now - instance.lastUsed >= idleMs) {
        void instance.stop(`idle for ${this.config.pool.idleSeconds} s`);
      }
      if (!slot.instance && !slot.starting && slot.crashes === 0) this.slots.delete(slotKey(slot.scope, slot.server));
    }
    if (now - this.lastHealthCheck < HEALTH_EVERY_MS) return;
    this.lastHealthCheck = now;
    await Promise.all(
      [...this.slots.values()].map(async (slot) => {
        const instance = slot.instance;
        if (instance && !(await instance.healthy()) && slot.instance === instance) {
          // stopping is "requested", but it is a failure for the backoff
          slot.crashes++;
          slot.lastCrashAt = this.clock.now();
          await instance.stop('failed its health check');
        }
      }),
    );
  }

  /**
   * A secret of the workspace got a new version (or was deleted: `version`
   * null): the instances this replica runs with an older value stop, as after
   * a new catalog version, and their sessions carry on at their next request on
   * a new instance that reads the new value. One still starting is checked
   * once it runs, since it may have read the old value. Answers what it stopped.
   */
  async replaceSecretHolders(
    tenant: { organizationId: string; workspaceId: string },
    path: string,
    version: number | null,
  ): Promise<StoppedHolder[]> {
    const stopped: StoppedHolder[] = [];
    const why = version === null ? `secret ${path} was deleted` : `secret ${path} has version ${version}`;
    const stop = async (slot: Slot, instance: Instance): Promise<void> => {
      if (!instance.holdsOlder(path, version)) return;
      stopped.push({
        scope: slot.scope,
        server: slot.server,
        version: instance.version,
        instance: instance.id,
        path,
        held: instance.secrets.get(path)!,
        newest: version,
      });
      await instance.stop(why);
      // stopped on request: no crash for the backoff, and the next acquire must not hand it out again
      if (slot.instance === instance) slot.instance = null;
    };
    await Promise.all(
      [...this.slots.values()]
        .filter((s) => s.scope.organizationId === tenant.organizationId && s.scope.workspaceId === tenant.workspaceId)
        .map(async (slot) => {
          const starting = slot.starting;
          if (slot.instance) await stop(slot, slot.instance);
          if (starting) await starting.then((instance) => stop(slot, instance)).catch(() => undefined);
        }),
    );
    return stopped;
  }

  /**
   * After the bus was away (a change may have been missed): every instance
   * started with a secret version older than the newest is stopped likewise.
   */
  async replaceStaleSecretHolders(): Promise<StoppedHolder[]> {
    const stopped: StoppedHolder[] = [];
    for (const slot of [...this.slots.values()]) {
      const instance = slot.instance;
      if (!instance || instance.secrets.size === 0) continue;
      const latest = await this.vault.latestVersions(slot.scope, [...instance.secrets.keys()]);
      for (const path of instance.secrets.keys()) {
        const stale = await this.replaceSecretHolders(slot.scope, path, latest.get(path) ?? null);
        stopped.push(...stale);
        if (stale.length > 0) break;
      }
    }
    return stopped;
  }

  /** Kill switch and version changes reach running instances on every replica. */
  private async reconcile(prefix: string): Promise<void> {
    for (const slot of [...this.slots.values()]) {
      const { organizationId, workspaceId } = slot.scope;
      // '': the catalog cache was dropped whole (the bus was interrupted), so every slot is checked
      if (prefix !== '' && prefix !== organizationId && prefix !== `${organizationId}:${workspaceId}`) continue;
      const instance = slot.instance;
      if (!instance) continue;
      const assignment = await this.catalog
        .workspaceServers(slot.scope)
        .then((all) => all.find((a) => a.name === slot.server))
        .catch(() => undefined);
      if (!assignment) await instance.stop('unassigned from the workspace');
      else if (!assignment.enabled)
        await instance.stop(`switched off${assignment.disabledReason ? `: ${assignment.disabledReason}` : ''}`);
      else if (assignment.pinned.version !== instance.version)
        await instance.stop(`version ${assignment.pinned.version} replaces ${instance.version}`);
    }
  }
}

/** An instance stopped because a secret it was started with changed. */
export interface StoppedHolder {
  scope: WorkspaceScope;
  server: string;
  /** the catalog version it ran */
  version: string;
  instance: string;
  /** the secret, the version it was started with and the newest (null: deleted) */
  path: string;
  held: number;
  newest: number | null;
}

/** An instance as operators see it: `starting` until its process (or upstream) is ready, then `running`. */
export interface InstanceView {
  workspace: string;
  server: string;
  version: string;
  id: string;
  state: 'starting' | 'running';
  started_at: string;
  pid?: number;
  inflight: number;
  sessions: number;
}

function viewOf(slot: Slot, i: Instance): InstanceView {
  return {
    workspace: slot.scope.workspaceSlug,
    server: slot.server,
    version: i.version,
    id: i.id,
    state: 'running',
    started_at: new Date(i.startedAt).toISOString(),
    ...(i.pid ? { pid: i.pid } : {}),
    inflight: i.inflight,
    sessions: i.upstreamSessions,
  };
}

function slotKey(scope: WorkspaceScope, server: string): string {
  return `${scope.organizationId}:${scope.workspaceId}:${server}`;
}

function backoff(slot: Slot, now: number): number {
  if (slot.crashes === 0) return 0;
  const wanted = Math.min(MAX_BACKOFF_MS, 250 * 2 ** (slot.crashes - 1));
  return Math.max(0, slot.lastCrashAt + wanted - now);
}

/** DNS-label safe (Kubernetes pod names): the server name and a random suffix. */
function instanceId(server: string): string {
  return `${server.slice(0, 40)}-${randomBytes(6).toString('hex')}`;
}
