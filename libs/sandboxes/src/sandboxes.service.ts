import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { allows, describePrincipal, Principal, WorkspaceScope } from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService, isDatabaseUnavailable, Keyset } from '@aileron/database';
import { ConflictError, DomainError, ForbiddenError, NotFoundError, ValidationError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { KeyedThrottle } from '@aileron/schedule';
import {
  type CommandRestrictions,
  RunnerError,
  SandboxSourceError,
  SandboxStartError,
  type SandboxDriver,
  type SandboxRunner,
  type SandboxSpec,
} from './drivers/driver';
import { SnapshotError, takeSnapshot } from './history/take-snapshot';
import { sandboxSlug } from './domain/slug';
import type { RunnerLimits, RunnerRequest, RunnerResult } from './runner-protocol';
import { SandboxesRepository, SandboxRecord, SnapshotRecord } from './sandboxes.repository';
import { importSource, SNAPSHOT_REF } from './source-import';

export const SANDBOX_DRIVER = Symbol('SANDBOX_DRIVER');

/** Who made a change: the commit's author, and the agent session recorded with the snapshot. */
export interface ChangeAuthor {
  name: string;
  email: string;
  agentSessionId: string | null;
}

/** The commit a change asks for, once it has run. */
export interface SnapshotIntent {
  trigger: 'write' | 'patch' | 'bash';
  /** what the message names after the trigger: a path, a command */
  subject: string;
  author: ChangeAuthor;
}

/** the pauses before each attempt at a snapshot: at once, then twice more a little later */
const SNAPSHOT_RETRIES = [0, 1_000, 5_000];
function withTimeout<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SnapshotError(message)), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** how long a replica trusts what it read of a sandbox should a create or delete elsewhere not reach it */
const CACHE_TTL_MS = 30_000;

function cacheKey(scope: WorkspaceScope, slug: string): string {
  return `${scope.organizationId}:${scope.workspaceId}:${slug}`;
}

export function specOf(sandbox: SandboxRecord): SandboxSpec {
  return {
    id: sandbox.id,
    organizationId: sandbox.organizationId,
    workspaceId: sandbox.workspaceId,
    name: sandbox.name,
    network: sandbox.network,
    limits: sandbox.limits,
  };
}

/** `bash: npm test`: the first line, cut at a length a log line shows whole. */
export function snapshotMessage(intent: Pick<SnapshotIntent, 'trigger' | 'subject'>): string {
  const firstLine = intent.subject.split('\n')[0]!.trim();
  const more = intent.subject.trim().includes('\n') || firstLine.length > 72;
  return `${intent.trigger}: ${more ? `${firstLine.slice(0, 71).trimEnd()}…` : firstLine}`;
}

/**
 * Sandboxes: their records, their processes (through the driver) and their
 * history. Changes to one sandbox run one after another, each followed by
 * its snapshot commit; the tool answers before its snapshot is taken, and
 * the next change waits for it, so every change is its own commit and a
 * change never waits for more than its predecessor's.
 */
/** how often a sandbox in use has its `last_used_at` written */
const TOUCH_EVERY_MS = 60_000;

@Injectable()
export class SandboxesService implements OnApplicationShutdown {
  private readonly logger = new Logger('Sandboxes');
  /** what the tools look up on every call: see find() */
  private readonly known: SharedCache<SandboxRecord | null>;
  /** per sandbox: the last change's snapshot, which the next change waits for */
  private readonly tails = new Map<string, Promise<unknown>>();
  private readonly idle = new Map<string, NodeJS.Timeout>();
  /** sandboxes whose `last_used_at` write is due: only those used within the last minute are remembered */
  private readonly touched: KeyedThrottle;

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: SandboxesRepository,
    private readonly outbox: OutboxService,
    @Inject(SANDBOX_DRIVER) private readonly driver: SandboxDriver,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    private readonly clock: Clock,
  ) {
    this.known = new SharedCache(bus, 'sandboxes', CACHE_TTL_MS, clock, { staleIfError: isDatabaseUnavailable });
    this.touched = new KeyedThrottle(clock, TOUCH_EVERY_MS);
  }

  async onApplicationShutdown(): Promise<void> {
    this.known.close();
    for (const timer of this.idle.values()) clearTimeout(timer);
    await this.settledAll();
    await this.driver.close();
  }

  async create(
    caller: Principal,
    scope: WorkspaceScope,
    request: { name: string; network: 'none' | 'egress'; limits: RunnerLimits },
  ): Promise<SandboxRecord> {
    const name = sandboxSlug(request.name);
    if (!name) throw new ValidationError([{ path: 'body.name', message: 'must contain at least one letter or digit' }]);
    if (request.network === 'egress') this.mayMakeEgress(scope);
    if (await this.repository.byName(scope, name))
      throw new ConflictError('SANDBOX_EXISTS', `Workspace "${scope.workspaceSlug}" has a sandbox "${name}" already`);
    try {
      return await this.db
        .transaction(async (tx) => {
          const { maxPerWorkspace } = this.config.sandboxes;
          if ((await this.repository.countLocked(scope, tx)) >= maxPerWorkspace) {
            throw new ConflictError(
              'SANDBOX_LIMIT_REACHED',
              `Workspace "${scope.workspaceSlug}" has ${maxPerWorkspace} sandboxes, as many as it may have (AILERON_SANDBOX_MAX_PER_WORKSPACE); delete one first`,
            );
          }
          const sandbox = await this.repository.create(
            scope,
            { name, network: request.network, limits: request.limits, createdBy: describePrincipal(caller) },
            tx,
          );
          await this.outbox.record(tx, {
            topic: 'sandbox.created',
            organizationId: scope.organizationId,
            workspaceId: scope.workspaceId,
            payload: {
              workspace: scope.workspaceSlug,
              sandbox: name,
              network: request.network,
              actor: describePrincipal(caller),
            },
          });
          // its storage before the commit: a sandbox that is listed can be used
          await this.driver.create(specOf(sandbox));
          return sandbox;
        })
        .finally(() => this.known.invalidate(cacheKey(scope, name)));
    } catch (error) {
      if (error instanceof SandboxStartError)
        throw new DomainError('SANDBOX_UNAVAILABLE', `The sandbox could not be made: ${error.message}`);
      throw error;
    }
  }

  /** A sandbox that reaches the internet runs with this installation's addresses: the installation, then the workspace's admins, decide. */
  private mayMakeEgress(scope: WorkspaceScope): void {
    if (this.config.sandboxes.egress === 'off') {
      throw new ForbiddenError(
        'This installation makes no sandbox with network "egress" (AILERON_SANDBOX_EGRESS=off)',
        'SANDBOX_EGRESS_DISABLED',
      );
    }
    if (!allows(scope.role, 'sandbox.egress')) {
      throw new ForbiddenError(
        `Role "${scope.role}" may not make a sandbox with network "egress" in workspace "${scope.workspaceSlug}": owners and admins may`,
        'SANDBOX_EGRESS_FORBIDDEN',
      );
    }
  }

  list(scope: WorkspaceScope, page: Keyset<string>): Promise<SandboxRecord[]> {
    return this.repository.list(scope, page);
  }

  /**
   * By name as a tool writes it (slugified); null when there is none. Every
   * tool call asks, so the answer comes from memory (a query per call cost an
   * embedded control plane more than the read it served); what the tools use
   * of a record (its id, network and limits) never changes, and a create or
   * delete anywhere drops it on every replica.
   */
  find(scope: WorkspaceScope, name: string): Promise<SandboxRecord | null> {
    const slug = sandboxSlug(name);
    if (!slug) return Promise.resolve(null);
    return this.known.getOrLoad(cacheKey(scope, slug), () => this.repository.byName(scope, slug));
  }

  /** By name as a person writes it, as stored now (its source, its last use); SANDBOX_NOT_FOUND when there is none. */
  async get(scope: WorkspaceScope, name: string): Promise<SandboxRecord> {
    const slug = sandboxSlug(name);
    const sandbox = slug ? await this.repository.byName(scope, slug) : null;
    if (!sandbox) throw new NotFoundError('sandbox', sandboxSlug(name) || name, 'SANDBOX_NOT_FOUND');
    return sandbox;
  }

  async any(scope: WorkspaceScope): Promise<boolean> {
    return this.repository.any(scope);
  }

  async remove(caller: Principal, scope: WorkspaceScope, name: string): Promise<void> {
    const sandbox = await this.get(scope, name);
    this.forgetIdle(sandbox.id);
    // its processes end first, so a command still running ends its change now rather than at its timeout
    await this.driver.stop(specOf(sandbox));
    // no change of it may still be running when its files go
    await this.tails.get(sandbox.id)?.catch(() => undefined);
    await this.driver.remove(specOf(sandbox));
    await this.db.transaction(async (tx) => {
      if (!(await this.repository.remove(scope, sandbox.id, tx))) return;
      await this.outbox.record(tx, {
        topic: 'sandbox.deleted',
        organizationId: scope.organizationId,
        workspaceId: scope.workspaceId,
        payload: { workspace: scope.workspaceSlug, sandbox: sandbox.name, actor: describePrincipal(caller) },
      });
    });
    this.tails.delete(sandbox.id);
    await this.known.invalidate(cacheKey(scope, sandbox.name));
  }

  /** The sandbox's runner, started if it was idle; each use pushes its idle stop back. */
  async runner(scope: WorkspaceScope, sandbox: SandboxRecord): Promise<SandboxRunner> {
    this.keepAwake(scope, sandbox);
    try {
      return await this.driver.runner(specOf(sandbox));
    } catch (error) {
      if (error instanceof SandboxStartError)
        throw new DomainError('SANDBOX_UNAVAILABLE', `Sandbox "${sandbox.name}" could not start: ${error.message}`);
      throw error;
    }
  }

  /**
   * One command under tighter bounds than the sandbox's (a client's sandbox
   * policy), as the driver narrows: by the sandbox's runner in the command's
   * own namespaces, or in a runner of its own made with them. Never wider:
   * a runner that cannot start is an error, not a run within the sandbox's
   * own bounds.
   */
  async execRestricted(
    scope: WorkspaceScope,
    sandbox: SandboxRecord,
    runner: SandboxRunner,
    exec: Extract<RunnerRequest, { op: 'exec' }>,
    restrictions: CommandRestrictions,
  ): Promise<RunnerResult<'exec'>> {
    if (this.driver.narrowing === 'runner') return runner.call({ ...exec, restrictions });
    this.keepAwake(scope, sandbox);
    let own: SandboxRunner;
    try {
      own = await this.driver.restricted!(specOf(sandbox), restrictions);
    } catch (error) {
      if (error instanceof SandboxStartError)
        throw new DomainError(
          'SANDBOX_UNAVAILABLE',
          `Sandbox "${sandbox.name}" could not start a runner under the client's sandbox policy: ${error.message}`,
        );
      throw error;
    }
    return own.call(exec);
  }

  /**
   * Runs a change of the sandbox's files after the previous change's snapshot,
   * and answers with its result at once; its own snapshot follows (when the
   * change asks for one and the work tree differs from the last commit).
   */
  async change<T>(
    scope: WorkspaceScope,
    sandbox: SandboxRecord,
    run: (runner: SandboxRunner) => Promise<T>,
    intent: (result: T) => SnapshotIntent | null,
  ): Promise<T> {
    const previous = this.tails.get(sandbox.id) ?? Promise.resolve();
    const ran = previous.catch(() => undefined).then(async () => run(await this.runner(scope, sandbox)));
    const snapshot = ran.then(
      async (result) => {
        const wanted = this.config.sandboxes.snapshots ? intent(result) : null;
        if (wanted) await this.snapshot(scope, sandbox, wanted);
      },
      () => undefined,
    );
    const tail = snapshot.catch((error: unknown) =>
      this.logger.error({
        msg: 'snapshot failed',
        sandbox: sandbox.name,
        err: error instanceof Error ? error.message : String(error),
      }),
    );
    this.tails.set(sandbox.id, tail);
    void tail.then(() => this.tails.get(sandbox.id) === tail && this.tails.delete(sandbox.id));
    return ran;
  }

  /** Resolves once every sandbox's changes so far have their snapshots (benchmarks, shutdown). */
  async settledAll(): Promise<void> {
    await Promise.allSettled([...this.tails.values()]);
  }

  /** Resolves once every change so far has its snapshot (tests, a bundle that must be complete). */
  async settled(sandbox: SandboxRecord): Promise<void> {
    await this.tails.get(sandbox.id)?.catch(() => undefined);
  }

  /**
   * A commit of whatever differs from the last one; none when nothing does
   * (never an empty commit). Tried again after a failure (the next attempt
   * scans anew, so nothing is lost), bounded in time; one that still fails
   * is logged and reported as `sandbox.snapshot_failed`, and the sandbox's
   * next change is committed on top of the last good snapshot.
   */
  private async snapshot(scope: WorkspaceScope, sandbox: SandboxRecord, intent: SnapshotIntent): Promise<void> {
    let reason = '';
    for (const [attempt, pause] of SNAPSHOT_RETRIES.entries()) {
      if (pause > 0) await sleep(pause);
      try {
        return await withTimeout(
          this.commitChanges(scope, sandbox, intent),
          this.config.sandboxes.snapshotTimeoutSeconds * 1000,
          'the snapshot took too long',
        );
      } catch (error) {
        reason =
          error instanceof RunnerError || error instanceof SnapshotError
            ? error.message
            : 'the history could not be written';
        this.logger.warn({
          msg: 'snapshot failed',
          sandbox: sandbox.name,
          attempt: attempt + 1,
          err: error instanceof Error ? error.message : String(error),
        });
        if (error instanceof RunnerError && error.failure.code === 'SNAPSHOT_TOO_LARGE') break;
      }
    }
    this.logger.error({
      msg: 'snapshot failed; the next change is committed on the last good snapshot',
      sandbox: sandbox.name,
      reason,
    });
    await this.db.transaction((tx) =>
      this.outbox.record(tx, {
        topic: 'sandbox.snapshot_failed',
        organizationId: sandbox.organizationId,
        workspaceId: sandbox.workspaceId,
        payload: {
          workspace: sandbox.workspaceSlug,
          sandbox: sandbox.name,
          trigger: intent.trigger,
          message: snapshotMessage(intent),
          session: intent.author.agentSessionId,
          reason,
        },
      }),
    );
  }

  /** The snapshot's commit (see takeSnapshot), and its record and event in one transaction. */
  private async commitChanges(scope: WorkspaceScope, sandbox: SandboxRecord, intent: SnapshotIntent): Promise<void> {
    const message = snapshotMessage(intent);
    const at = this.clock.date();
    const { snapshotMaxFiles: maxFiles, snapshotMaxBytes: maxBytes } = this.config.sandboxes;
    const taken = await takeSnapshot(this.driver, specOf(sandbox), {
      author: intent.author,
      message,
      at,
      limits: { maxFiles, maxBytes },
    });
    if (!taken) return;
    const { sha, files } = taken;
    const record: Omit<SnapshotRecord, 'id'> = {
      sha,
      trigger: intent.trigger,
      message,
      files,
      agentSessionId: intent.author.agentSessionId,
      author: `${intent.author.name} <${intent.author.email}>`,
      createdAt: at,
    };
    await this.db.transaction(async (tx) => {
      await this.repository.addSnapshot(scope, sandbox.id, record, tx);
      await this.outbox.record(tx, {
        topic: 'sandbox.snapshot',
        organizationId: sandbox.organizationId,
        workspaceId: sandbox.workspaceId,
        payload: {
          workspace: sandbox.workspaceSlug,
          sandbox: sandbox.name,
          sha,
          trigger: intent.trigger,
          message,
          files,
          session: intent.author.agentSessionId,
          author: record.author,
          ...(taken.skipped.length > 0 ? { left_out: taken.skipped } : {}),
        },
      });
    });
  }

  /** After the snapshots of the changes made so far through this replica: a reviewer reads their own writes. */
  async snapshots(
    scope: WorkspaceScope,
    name: string,
    page: Keyset<{ createdAt: Date; id: string }>,
  ): Promise<SnapshotRecord[]> {
    const sandbox = await this.get(scope, name);
    await this.settled(sandbox);
    return this.repository.snapshots(scope, sandbox.id, page);
  }

  /** One snapshot's change as a unified diff (against its parent; the first against nothing). */
  async diff(scope: WorkspaceScope, name: string, sha: string): Promise<string> {
    const sandbox = await this.get(scope, name);
    if (!/^[0-9a-f]{40}$/.test(sha) || !(await this.repository.snapshot(scope, sandbox.id, sha)))
      throw new NotFoundError('snapshot', sha, 'SNAPSHOT_NOT_FOUND');
    const shown = await this.driver.git(specOf(sandbox), ['show', '--format=', '--patch', '--root', '-M', sha]);
    if (shown.code !== 0) throw new NotFoundError('snapshot', sha, 'SNAPSHOT_NOT_FOUND');
    return shown.stdout.toString('utf8');
  }

  /** A git bundle of the snapshot branch, for `git fetch` into a developer's clone. */
  async bundle(scope: WorkspaceScope, name: string): Promise<NodeJS.ReadableStream> {
    const sandbox = await this.get(scope, name);
    await this.settled(sandbox);
    const head = await this.driver.git(specOf(sandbox), ['rev-parse', '--verify', '--quiet', SNAPSHOT_REF]);
    if (head.code !== 0)
      throw new ConflictError(
        'SANDBOX_SOURCE_EXISTS',
        `Sandbox "${sandbox.name}" has no snapshot yet: nothing to bundle`,
      );
    return this.driver.gitStream(specOf(sandbox), ['bundle', 'create', '--quiet', '-', SNAPSHOT_REF]);
  }

  /**
   * The initial repository: a git bundle (its HEAD becomes the base of the
   * snapshot branch) or a tar.gz (unpacked inside the sandbox, committed as
   * `write: source upload (tar.gz)`); see importSource. Only into a sandbox
   * nothing has been written to.
   */
  async upload(
    caller: Principal,
    scope: WorkspaceScope,
    name: string,
    type: 'git-bundle' | 'tar.gz',
    body: Readable,
  ): Promise<SandboxRecord> {
    const sandbox = await this.get(scope, name);
    if (sandbox.source !== 'empty' || (await this.repository.snapshots(scope, sandbox.id, { take: 1 })).length > 0) {
      body.resume();
      throw new ConflictError(
        'SANDBOX_SOURCE_EXISTS',
        `Sandbox "${sandbox.name}" has files already; a source goes only into a new sandbox`,
      );
    }
    const dir = mkdtempSync(join(tmpdir(), 'aileron-source-'));
    const file = join(dir, type === 'git-bundle' ? 'source.bundle' : 'source.tar.gz');
    try {
      await pipeline(body, limitTo(this.config.sandboxes.sourceMaxBytes), createWriteStream(file, { mode: 0o600 }));
      await this.change(
        scope,
        sandbox,
        () => importSource(this.driver, specOf(sandbox), type, file),
        () =>
          type === 'tar.gz' ? { trigger: 'write', subject: 'source upload (tar.gz)', author: authorOf(caller) } : null,
      );
      await this.settled(sandbox);
      await this.repository.setSource(scope, sandbox.id, type);
      return { ...sandbox, source: type };
    } catch (error) {
      if (error instanceof SourceTooLarge)
        throw new DomainError(
          'SANDBOX_SOURCE_TOO_LARGE',
          `The source is larger than ${this.config.sandboxes.sourceMaxBytes} bytes (AILERON_SANDBOX_SOURCE_MAX_BYTES)`,
        );
      if (error instanceof SandboxSourceError) throw new DomainError('SANDBOX_SOURCE_INVALID', error.message);
      throw error;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /** Shell rules are per workspace; the bash tool reads them at each call. */
  shellRules(scope: WorkspaceScope): ReturnType<SandboxesRepository['shellRules']> {
    return this.repository.shellRules(scope);
  }

  /** `scope`: the caller's, whose use this is (its tenant is the sandbox's: the sandbox was found with it) */
  private keepAwake(scope: WorkspaceScope, sandbox: SandboxRecord): void {
    this.forgetIdle(sandbox.id);
    const timer = setTimeout(() => {
      this.idle.delete(sandbox.id);
      // a change in flight keeps it up; the stop comes at its next idle period
      if (this.tails.has(sandbox.id)) return this.keepAwake(scope, sandbox);
      void this.driver
        .stop(specOf(sandbox))
        .then(() => this.logger.log({ msg: 'sandbox stopped (idle)', sandbox: sandbox.name }));
    }, this.config.sandboxes.idleSeconds * 1000);
    timer.unref();
    this.idle.set(sandbox.id, timer);
    // `last_used_at` is for people: once a minute is exact enough, and spares a write per call
    if (!this.touched.due(sandbox.id)) return;
    void this.repository.touch(scope, sandbox.id, this.clock.date()).catch(() => undefined);
  }

  private forgetIdle(id: string): void {
    const timer = this.idle.get(id);
    if (timer) clearTimeout(timer);
    this.idle.delete(id);
  }
}

/** The commit author for a caller: an agent session by its name, anyone else as the audit log names them. */
export function authorOf(caller: Principal): ChangeAuthor {
  if (caller.agentSession)
    return {
      name: caller.name,
      email: `session-${caller.agentSession.id}@sessions.aileron.invalid`,
      agentSessionId: caller.agentSession.id,
    };
  const who = describePrincipal(caller);
  return {
    name: caller.name || who,
    email: `${who.replace(/[^A-Za-z0-9._-]/g, '-')}@aileron.invalid`,
    agentSessionId: null,
  };
}

class SourceTooLarge extends Error {}

function limitTo(max: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > max) done(new SourceTooLarge());
      else done(null, chunk);
    },
  });
}
