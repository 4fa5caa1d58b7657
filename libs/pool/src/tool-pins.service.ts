import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { canonicalJson, sha256Hex } from '@aileron/crypto';
import { DatabaseService, Keyset } from '@aileron/database';
import { NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { ToolPinRecord, ToolPinsRepository } from './tool-pins.repository';

const NONE: ReadonlySet<string> = new Set();

export interface ToolPinView {
  server: string;
  version: string;
  tool: string;
  pinned_hash: string;
  changed_hash: string | null;
  changed_at: string | null;
  accepted_by: string | null;
  blocked: boolean;
}

/** how long a replica trusts the pins it saw without asking the database again */
const KNOWN_TTL_MS = 10 * 60_000;

/**
 * Tool-definition pinning. A server's tool definitions are what a model reads
 * to decide what to call, so a server that quietly changes one (a "rug pull")
 * can steer the model. The first definition seen for a (workspace, server,
 * version, tool) is pinned; a different one under the same version is an event
 * and an audit record, and — if the workspace chose so — the tool is held back
 * from lists and calls until an admin accepts the new definition. A new
 * catalog version is a deliberate change and pins afresh.
 */
@Injectable()
export class ToolPins implements OnModuleDestroy {
  /**
   * `<workspace>:<server>:<version>` → tool → pinned hash, as this replica
   * last saw them: what spares a list that did not change its round trip.
   * Bounded like every SharedCache (the lists in use, not every workspace's
   * that ever listed), and dropped on every replica when an admin accepts a
   * change; a list it no longer holds is checked against the database again.
   */
  private readonly known: SharedCache<ReadonlyMap<string, string>>;
  /**
   * `<workspace>:<server>` → tools held back now, for servers that have any:
   * as many as the database holds changed pins in workspaces that block them.
   * Kept until the database says otherwise (a list, an acceptance here), never
   * dropped for room: a forgotten one would let a held tool be called.
   */
  private readonly held = new Map<string, ReadonlySet<string>>();

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: ToolPinsRepository,
    private readonly outbox: OutboxService,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    clock: Clock,
  ) {
    this.known = new SharedCache(bus, 'tool-pins', KNOWN_TTL_MS, clock);
  }

  onModuleDestroy(): void {
    this.known.close();
  }

  async observe(
    scope: WorkspaceScope,
    actor: string,
    server: string,
    version: string,
    tools: Record<string, unknown>[],
  ): Promise<ReadonlySet<string>> {
    const key = `${scope.workspaceId}:${server}:${version}`;
    const hashes = new Map(tools.map((tool) => [String(tool.name), sha256Hex(canonicalJson(tool))]));
    const known = this.known.get(key);
    // the common case, a list that did not change, costs no database round trip
    if (known && [...hashes].every(([tool, hash]) => known.get(tool) === hash))
      return this.held.get(`${scope.workspaceId}:${server}`) ?? NONE;

    const [block, rows] = await Promise.all([
      this.repository.blocksChangedTools(scope),
      this.repository.pins(scope, server, { version }),
    ]);
    const pinned = new Map(rows.map((r) => [r.tool, r]));
    const fresh = [...hashes].filter(([tool]) => !pinned.has(tool));
    const changed = [...hashes].filter(([tool, hash]) => {
      const row = pinned.get(tool);
      return row && row.pinnedHash !== hash && row.changedHash !== hash;
    });
    if (fresh.length > 0 || changed.length > 0) {
      await this.db.transaction(async (tx) => {
        if (fresh.length > 0) await this.repository.pin(scope, server, version, fresh, tx);
        for (const [tool, hash] of changed) {
          await this.repository.markChanged(scope, { server, version, tool }, hash, tx);
          await this.outbox.record(tx, {
            topic: 'tool.definition_changed',
            organizationId: scope.organizationId,
            workspaceId: scope.workspaceId,
            payload: {
              workspace: scope.workspaceSlug,
              server,
              version,
              tool,
              pinned_hash: pinned.get(tool)!.pinnedHash,
              new_hash: hash,
              blocked: block,
              actor,
            },
          });
        }
      });
    }
    const stillChanged = new Set(
      [...hashes]
        .filter(([tool, hash]) => {
          const row = pinned.get(tool);
          return row !== undefined && row.pinnedHash !== hash;
        })
        .map(([tool]) => tool),
    );
    const held = block ? stillChanged : NONE;
    if (held.size > 0) this.held.set(`${scope.workspaceId}:${server}`, held);
    else this.held.delete(`${scope.workspaceId}:${server}`);
    // remember only what is pinned as it is now: a changed tool is looked at again next time
    this.known.set(key, new Map([...hashes].filter(([tool]) => !stillChanged.has(tool))));
    return held;
  }

  /** Whether a call must be refused because the tool's definition changed (and the workspace blocks that). */
  blocked(scope: WorkspaceScope, server: string, tool: string): boolean {
    return this.held.get(`${scope.workspaceId}:${server}`)?.has(tool) ?? false;
  }

  async list(
    scope: WorkspaceScope,
    server: string,
    filter: { tool?: string } = {},
    page?: Keyset<readonly [string, string]>,
  ): Promise<ToolPinView[]> {
    const [block, rows] = await Promise.all([
      this.repository.blocksChangedTools(scope),
      this.repository.pins(scope, server, filter, page),
    ]);
    return rows.map((r: ToolPinRecord) => ({
      server: r.server,
      version: r.version,
      tool: r.tool,
      pinned_hash: r.pinnedHash,
      changed_hash: r.changedHash,
      changed_at: r.changedAt?.toISOString() ?? null,
      accepted_by: r.acceptedBy,
      blocked: block && r.changedHash !== null,
    }));
  }

  /** The new definition becomes the pinned one, on every version where it changed. */
  async accept(scope: WorkspaceScope, actor: string, server: string, tool: string): Promise<ToolPinView[]> {
    await this.db.transaction(async (tx) => {
      const rows = await this.repository.changed(scope, server, tool, tx);
      if (rows.length === 0) throw new NotFoundError('changed tool', `${server}/${tool}`, 'TOOL_CHANGE_NOT_FOUND');
      for (const row of rows) {
        await this.repository.accept(scope, { server, version: row.version, tool }, row.changedHash!, actor, tx);
        await this.outbox.record(tx, {
          topic: 'tool.definition_accepted',
          organizationId: scope.organizationId,
          workspaceId: scope.workspaceId,
          payload: {
            workspace: scope.workspaceSlug,
            server,
            version: row.version,
            tool,
            pinned_hash: row.changedHash,
            actor,
          },
        });
      }
    });
    this.forget(scope, server);
    return this.list(scope, server, { tool });
  }

  async settings(scope: WorkspaceScope): Promise<{ block_changed_tools: boolean }> {
    return { block_changed_tools: await this.repository.blocksChangedTools(scope) };
  }

  async putSettings(
    scope: WorkspaceScope,
    actor: string,
    input: { block_changed_tools: boolean },
  ): Promise<{ block_changed_tools: boolean }> {
    await this.db.transaction(async (tx) => {
      await this.repository.putSettings(scope, { blockChangedTools: input.block_changed_tools, updatedBy: actor }, tx);
      await this.outbox.record(tx, {
        topic: 'pool.settings_updated',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { workspace: scope.workspaceSlug, block_changed_tools: input.block_changed_tools, actor },
      });
    });
    for (const key of [...this.held.keys()]) if (key.startsWith(`${scope.workspaceId}:`)) this.held.delete(key);
    await this.known.invalidate(scope.workspaceId);
    return this.settings(scope);
  }

  private forget(scope: WorkspaceScope, server: string): void {
    this.held.delete(`${scope.workspaceId}:${server}`);
    void this.known.invalidate(`${scope.workspaceId}:${server}`);
  }
}
