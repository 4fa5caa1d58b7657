import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { describePrincipal, OrgScope, Principal, WorkspaceScope } from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { DatabaseService, isDatabaseUnavailable, isUniqueViolation, Keyset, Transaction } from '@aileron/database';
import { ConflictError, NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { CatalogEntryInput, toolPrefixOf } from './domain/catalog-entry';
import { AssignmentRecord, CatalogEntryRecord, CatalogRepository, ServerDefinition } from './catalog.repository';

export interface RolloutInput {
  version: string;
  gateways: string[];
  groups: string[];
  percent: number;
}

const CACHE_TTL_MS = 30_000;

@Injectable()
export class CatalogService implements OnModuleDestroy {
  /** per workspace: its assigned servers with their definitions, for the gateway API and the pool */
  private readonly cache: SharedCache<AssignmentRecord[]>;
  /** per cached list of a workspace's servers: the tool prefixes of their pinned versions */
  private readonly prefixes = new WeakMap<AssignmentRecord[], ReadonlyMap<string, string>>();

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: CatalogRepository,
    private readonly outbox: OutboxService,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    clock: Clock,
  ) {
    this.cache = new SharedCache(bus, 'catalog', CACHE_TTL_MS, clock, { staleIfError: isDatabaseUnavailable });
  }

  onModuleDestroy(): void {
    this.cache.close();
  }

  /** Versions are immutable: publishing never changes what a workspace pinned. */
  async publish(principal: Principal, scope: OrgScope, input: CatalogEntryInput): Promise<CatalogEntryRecord> {
    const { name, version, ...definition } = input;
    try {
      await this.db.transaction(async (tx) => {
        const entryId = await this.repository.ensureEntry(scope, name, tx);
        await this.repository.createVersion(
          scope,
          entryId,
          { version, definition: definition as ServerDefinition, createdBy: describePrincipal(principal) },
          tx,
        );
        await this.outbox.record(tx, {
          topic: 'catalog.version_published',
          organizationId: scope.organizationId,
          payload: { server: name, version, mode: input.mode, actor: describePrincipal(principal) },
        });
      });
    } catch (error) {
      if (isUniqueViolation(error))
        throw new ConflictError(
          'CATALOG_VERSION_EXISTS',
          `${name}@${version} is already published; versions are immutable, publish a new one`,
        );
      throw error;
    }
    return this.entry(scope, name);
  }

  list(scope: OrgScope, page: Keyset<string>): Promise<CatalogEntryRecord[]> {
    return this.repository.listEntries(scope, page);
  }

  async entry(scope: OrgScope, name: string, tx?: Transaction): Promise<CatalogEntryRecord> {
    const entry = await this.repository.findEntry(scope, name, tx);
    if (!entry) throw new NotFoundError('catalog server', name, 'CATALOG_SERVER_NOT_FOUND');
    return entry;
  }

  /** The kill switch: off in every workspace of the organisation at once. */
  async setEnabled(
    principal: Principal,
    scope: OrgScope,
    name: string,
    enabled: boolean,
    reason: string | null,
  ): Promise<CatalogEntryRecord> {
    await this.db.transaction(async (tx) => {
      const entry = await this.entry(scope, name, tx);
      if (entry.enabled === enabled) return;
      await this.repository.setEnabled(scope, entry.id, enabled, reason, tx);
      const payload = { server: name, reason, actor: describePrincipal(principal) };
      await this.outbox.record(tx, {
        topic: enabled ? 'catalog.server_enabled' : 'catalog.server_disabled',
        organizationId: scope.organizationId,
        payload,
      });
    });
    await this.cache.invalidate(scope.organizationId);
    return this.entry(scope, name);
  }

  /** What the workspace runs: served from memory, invalidated on every change. */
  workspaceServers(scope: WorkspaceScope): Promise<AssignmentRecord[]> {
    return this.cache.getOrLoad(`${scope.organizationId}:${scope.workspaceId}`, () =>
      this.repository.assignments(scope),
    );
  }

  /**
   * The workspace's servers that have a `tool_prefix`, at their pinned version
   * (the one the pool runs): policy rules may name their tools by it.
   */
  async toolPrefixes(scope: WorkspaceScope): Promise<ReadonlyMap<string, string>> {
    return this.prefixesOf(this.peekWorkspaceServers(scope) ?? (await this.workspaceServers(scope)));
  }

  /** The tool prefixes, if this replica holds the workspace's servers; for synchronous fast paths. */
  peekToolPrefixes(scope: WorkspaceScope): ReadonlyMap<string, string> | undefined {
    const servers = this.peekWorkspaceServers(scope);
    return servers && this.prefixesOf(servers);
  }

  private prefixesOf(servers: AssignmentRecord[]): ReadonlyMap<string, string> {
    let prefixes = this.prefixes.get(servers);
    if (!prefixes) {
      const found = new Map<string, string>();
      for (const assignment of servers) {
        const prefix = toolPrefixOf(assignment.pinned.definition);
        if (prefix !== null) found.set(assignment.name, prefix);
      }
      this.prefixes.set(servers, (prefixes = found));
    }
    return prefixes;
  }

  /**
   * Told on every replica when servers of an organisation (`<org>`, the kill
   * switch) or of one workspace (`<org>:<workspace>`) change.
   */
  onServersChanged(listener: (prefix: string) => void): () => void {
    return this.cache.onEvict(listener);
  }

  /** The cached servers, if this replica holds them; for synchronous fast paths. */
  peekWorkspaceServers(scope: WorkspaceScope): AssignmentRecord[] | undefined {
    return this.cache.get(`${scope.organizationId}:${scope.workspaceId}`);
  }

  async assign(principal: Principal, scope: WorkspaceScope, name: string, version: string): Promise<AssignmentRecord> {
    return this.changeAssignment(
      scope,
      name,
      async (entry, tx) => {
        this.requireVersion(entry, version);
        await this.repository.assign(scope, entry.id, version, describePrincipal(principal), tx);
        return { topic: 'catalog.server_assigned', payload: { server: name, version } };
      },
      principal,
    );
  }

  async unassign(principal: Principal, scope: WorkspaceScope, name: string): Promise<void> {
    await this.changeAssignment(
      scope,
      name,
      async (entry, tx) => {
        if (!(await this.repository.unassign(scope, entry.id, tx)))
          throw new NotFoundError('workspace server', name, 'WORKSPACE_SERVER_NOT_FOUND');
        return { topic: 'catalog.server_unassigned', payload: { server: name } };
      },
      principal,
    );
  }

  async startRollout(
    principal: Principal,
    scope: WorkspaceScope,
    name: string,
    rollout: RolloutInput,
  ): Promise<AssignmentRecord> {
    return this.changeAssignment(
      scope,
      name,
      async (entry, tx, assignment) => {
        const current = this.assigned(name, assignment);
        this.requireVersion(entry, rollout.version);
        if (current.pinned.version === rollout.version) {
          throw new ConflictError('ROLLOUT_SAME_VERSION', `${name}@${rollout.version} is already the pinned version`);
        }
        await this.repository.setRollout(scope, entry.id, rollout, describePrincipal(principal), tx);
        return {
          topic: 'catalog.rollout_started',
          payload: { server: name, from: current.pinned.version, ...rollout },
        };
      },
      principal,
    );
  }

  /** Everyone gets the rollout version: it becomes the pinned one. */
  async promote(principal: Principal, scope: WorkspaceScope, name: string): Promise<AssignmentRecord> {
    return this.changeAssignment(
      scope,
      name,
      async (entry, tx, assignment) => {
        const current = this.assigned(name, assignment);
        const rollout = this.requireRollout(current);
        await this.repository.assign(scope, entry.id, rollout.version.version, describePrincipal(principal), tx);
        return {
          topic: 'catalog.rollout_promoted',
          payload: { server: name, from: current.pinned.version, to: rollout.version.version },
        };
      },
      principal,
    );
  }

  /** Everyone goes back to the pinned version. */
  async rollBack(principal: Principal, scope: WorkspaceScope, name: string): Promise<AssignmentRecord> {
    return this.changeAssignment(
      scope,
      name,
      async (entry, tx, assignment) => {
        const current = this.assigned(name, assignment);
        const rollout = this.requireRollout(current);
        await this.repository.setRollout(scope, entry.id, null, describePrincipal(principal), tx);
        return {
          topic: 'catalog.rollout_rolled_back',
          payload: { server: name, abandoned: rollout.version.version, pinned: current.pinned.version },
        };
      },
      principal,
    );
  }

  private async changeAssignment<T extends AssignmentRecord | undefined>(
    scope: WorkspaceScope,
    name: string,
    change: (
      entry: CatalogEntryRecord,
      tx: Transaction,
      current: AssignmentRecord | null,
    ) => Promise<{ topic: string; payload: Record<string, unknown> }>,
    principal: Principal,
  ): Promise<T> {
    await this.db.transaction(async (tx) => {
      const entry = await this.entry(scope, name, tx);
      const current = (await this.repository.assignments(scope, tx)).find((a) => a.entryId === entry.id);
      const event = await change(entry, tx, current ?? null);
      await this.outbox.record(tx, {
        topic: event.topic,
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { workspace: scope.workspaceSlug, ...event.payload, actor: describePrincipal(principal) },
      });
    });
    await this.cache.invalidate(`${scope.organizationId}:${scope.workspaceId}`);
    const after = (await this.repository.assignments(scope)).find((a) => a.name === name);
    return after as T;
  }

  private assigned(name: string, current: AssignmentRecord | null): AssignmentRecord {
    if (!current) throw new NotFoundError('workspace server', name, 'WORKSPACE_SERVER_NOT_FOUND');
    return current;
  }

  private requireVersion(entry: CatalogEntryRecord, version: string): void {
    if (!entry.versions.some((v) => v.version === version)) {
      throw new NotFoundError('catalog version', `${entry.name}@${version}`, 'CATALOG_VERSION_NOT_FOUND');
    }
  }

  private requireRollout(current: AssignmentRecord): NonNullable<AssignmentRecord['rollout']> {
    if (!current.rollout) throw new ConflictError('NO_ROLLOUT', `${current.name} has no rollout in progress`);
    return current.rollout;
  }
}
