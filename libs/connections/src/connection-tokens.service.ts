import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import type { ConnectionMode } from '@aileron/catalog';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService } from '@aileron/database';
import { VaultService } from '@aileron/vault';
import { ConnectionEvents } from './connection-events';
import {
  changeOf,
  connectionKey,
  ConnectionFlow,
  sealTokens,
  StoredTokens,
  tokenFacts,
} from './connection-flow.service';
import { ConnectionRecord, ConnectionsRepository } from './connections.repository';
import {
  connectUrl,
  ConnectionProblem,
  problemMessage,
  refreshDue,
  stateOf,
  subjectFor,
  WORKSPACE_SUBJECT,
} from './domain/connection';
import { UpstreamAuthorization, UpstreamOauthError } from './upstream-oauth';

/** A refresh holds its lease this long: far more than one exchange may take (idpFetch gives up after 5 s). */
const LEASE_MS = 30_000;
/** How long a call waits for another replica's refresh before it stops waiting */
const WAIT_FOR_OTHERS_MS = 20_000;
/** After the authorization server could not be reached: this replica does not try again sooner (each try is audited) */
const UNREACHABLE_BACKOFF_MS = 10_000;

/** A call cannot get a token for its upstream; `code` is the tool error's. */
export class ConnectionUnavailableError extends Error {
  constructor(
    readonly code: ConnectionProblem,
    message: string,
    /** where to connect, for a person (and an MCP client's URL elicitation) */
    readonly connectUrl: string,
    readonly subject: string | null,
  ) {
    super(message);
    this.name = 'ConnectionUnavailableError';
  }
}

/**
 * The bearer credential of one MCP session's upstream session to an OAuth
 * server: the access token of the connection the caller uses, renewed before
 * it expires and once when the upstream refuses it.
 */
export interface UpstreamBearer {
  /** the `Authorization` value for the next request; throws ConnectionUnavailableError */
  authorization(): Promise<string>;
  /** the upstream answered 401 to `sent`: a renewed one, or ConnectionUnavailableError */
  rejected(sent: string): Promise<string>;
  /** the upstream refused the renewed one too: the connection needs a person again (always throws) */
  refusedAfterRenewal(sent: string): Promise<never>;
  /**
   * the upstream answered 403 insufficient_scope, asking for `scope`: the
   * connection needs its person again, to grant it (step-up; always throws)
   */
  insufficientScope(sent: string, scope: string): Promise<never>;
}

interface Held {
  id: string;
  generation: number;
  tokens: StoredTokens;
  accessExpiresAt: Date | null;
}

/**
 * The tokens the pool injects upstream. Each replica holds the tokens it
 * last read, per connection, until they are due for renewal or any replica
 * says the connection changed. Renewal is single-flight across replicas: a
 * lease on the connection's row, taken only while its tokens are of the
 * generation the taker read, so one replica presents the refresh token and
 * the others wait for the generation it writes. A refresh token that rotates
 * is therefore never presented twice, and every replica uses the new tokens.
 */
@Injectable()
export class ConnectionTokens implements OnModuleDestroy {
  private readonly logger = new Logger('ConnectionTokens');
  private readonly held = new Map<string, Held>();
  /** `<workspace id>/<server>/<subject>` → the connection's id, as last read */
  private readonly ids = new Map<string, string>();
  private readonly renewing = new Map<string, Promise<Held>>();
  private readonly unreachableUntil = new Map<string, number>();
  private readonly lastTouched = new Map<string, number>();
  /** who holds a lease: this process, told apart from every other replica's */
  private readonly holder = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly unsubscribe: () => void;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly db: DatabaseService,
    private readonly repository: ConnectionsRepository,
    private readonly flow: ConnectionFlow,
    private readonly vault: VaultService,
    private readonly events: ConnectionEvents,
    private readonly clock: Clock,
  ) {
    this.unsubscribe = events.onChanged((change) => {
      this.held.delete(change.id);
      this.unreachableUntil.delete(change.id);
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe();
  }

  /**
   * The bearer for `requester`'s calls to `server` (connected `mode`). An
   * agent session's requester is its creator, so it uses its creator's
   * connection; `caller` names the caller in messages.
   */
  bearerFor(
    scope: WorkspaceScope,
    server: string,
    mode: ConnectionMode,
    requester: string,
    caller: string,
  ): UpstreamBearer {
    const subject = subjectFor(mode, requester);
    const url = connectUrl(this.config.publicUrl, scope.workspaceSlug, server);
    const fail = (code: ConnectionProblem, wanted?: string): ConnectionUnavailableError =>
      new ConnectionUnavailableError(
        code,
        problemMessage(code, {
          server,
          workspace: scope.workspaceSlug,
          mode,
          url,
          caller,
          ...(wanted ? { scope: wanted } : {}),
        }),
        url,
        subject,
      );
    const key = `${scope.workspaceId}/${server}/${subject}`;
    const current = async (rejected?: string): Promise<Held> => {
      if (subject === null) throw fail('CONNECTION_PERSON_REQUIRED');
      // on the call path: what this replica holds, while no replica has said the connection changed
      const known = this.ids.get(key);
      const fast = known === undefined ? undefined : this.held.get(known);
      if (fast && fast.tokens.access_token !== rejected && !this.due(fast)) return fast;
      const row = await this.repository.findBySubject(scope, server, subject);
      if (!row) {
        this.ids.delete(key);
        throw fail('CONNECTION_REQUIRED');
      }
      this.ids.set(key, row.id);
      const held = this.held.get(row.id);
      if (held && held.generation === row.generation && held.tokens.access_token !== rejected && !this.due(held))
        return held;
      return this.renew(scope, row, rejected, fail);
    };
    return {
      authorization: async () => {
        const held = await current();
        this.touch(scope, held.id);
        return `Bearer ${held.tokens.access_token}`;
      },
      rejected: async (sent) => {
        const held = await current(sent.replace(/^Bearer /, ''));
        return `Bearer ${held.tokens.access_token}`;
      },
      refusedAfterRenewal: async (sent) => {
        const id = this.ids.get(key);
        const row = id === undefined ? null : await this.repository.find(scope, id);
        if (row && this.held.get(row.id)?.tokens.access_token === sent.replace(/^Bearer /, ''))
          await this.needsReconnect(scope, row, 'the upstream refused a freshly renewed access token');
        throw fail('CONNECTION_NEEDS_RECONNECT');
      },
      insufficientScope: async (sent, wanted) => {
        const id = this.ids.get(key);
        const row = id === undefined ? null : await this.repository.find(scope, id);
        const granted = (row?.scope ?? '').split(' ').filter(Boolean);
        const needed = [...new Set([...granted, ...wanted.split(' ').filter(Boolean)])].join(' ');
        if (row && this.held.get(row.id)?.tokens.access_token === sent.replace(/^Bearer /, ''))
          await this.needsReconnect(
            scope,
            row,
            `the upstream asks for more access (scope "${wanted}") than the connection was given`,
            'insufficient_scope',
            { ...row.upstream, stepUpScope: needed },
          );
        throw fail('CONNECTION_NEEDS_RECONNECT', wanted);
      },
    };
  }

  /**
   * Resolves true once `requester`'s connection to `server` can be used (a
   * person connected, or connected again, on any replica), false when `ms`
   * pass first or `signal` aborts.
   */
  async awaitConnection(
    scope: WorkspaceScope,
    server: string,
    mode: ConnectionMode,
    requester: string,
    ms: number,
    signal: AbortSignal,
  ): Promise<boolean> {
    const subject = subjectFor(mode, requester);
    if (subject === null) return false;
    const deadline = this.clock.now() + ms;
    for (;;) {
      const row = await this.repository.findBySubject(scope, server, subject);
      if (row && stateOf(row, this.clock.now()) === 'connected') return true;
      const left = deadline - this.clock.now();
      if (left <= 0 || signal.aborted) return false;
      // a missed message costs at most a few seconds
      await this.events.nextFor(scope.workspaceId, server, subject, Math.min(left, 5_000));
    }
  }

  /**
   * Fresh tokens for the connection: those another replica has just written,
   * or a refresh of our own under the lease. `rejected`: the upstream refused
   * this access token, so it is renewed whatever its expiry says.
   */
  private renew(
    scope: WorkspaceScope,
    row: ConnectionRecord,
    rejected: string | undefined,
    fail: (code: ConnectionProblem) => ConnectionUnavailableError,
  ): Promise<Held> {
    let pending = this.renewing.get(row.id);
    if (!pending) {
      pending = this.renewOnce(scope, row.id, rejected, fail).finally(() => this.renewing.delete(row.id));
      this.renewing.set(row.id, pending);
    }
    return pending;
  }

  private async renewOnce(
    scope: WorkspaceScope,
    id: string,
    rejected: string | undefined,
    fail: (code: ConnectionProblem) => ConnectionUnavailableError,
  ): Promise<Held> {
    const deadline = this.clock.now() + WAIT_FOR_OTHERS_MS;
    for (;;) {
      const row = await this.repository.find(scope, id);
      if (!row) throw fail('CONNECTION_REQUIRED');
      const state = stateOf(row, this.clock.now());
      if (state !== 'connected') throw fail('CONNECTION_NEEDS_RECONNECT');
      const tokens = await this.flow.tokens(scope, id);
      if (!tokens) throw fail('CONNECTION_REQUIRED');
      const held: Held = { id, generation: row.generation, tokens, accessExpiresAt: row.accessExpiresAt };
      // what is stored is already newer than what was refused or ran out: another replica renewed it
      if (tokens.access_token !== rejected && !this.due(held)) {
        this.held.set(id, held);
        return held;
      }
      if (!tokens.refresh_token) {
        // nothing to renew with: a refused token without a refresh token needs a person
        if (rejected !== undefined)
          await this.needsReconnect(scope, row, 'the upstream refused the access token, and there is no refresh token');
        throw fail('CONNECTION_NEEDS_RECONNECT');
      }
      if ((this.unreachableUntil.get(id) ?? 0) > this.clock.now()) throw fail('CONNECTION_UNAVAILABLE');
      const now = this.clock.date();
      if (
        await this.repository.takeLease(scope, id, row.generation, this.holder, new Date(now.getTime() + LEASE_MS), now)
      )
        return this.refresh(scope, row, tokens, fail);
      // another replica is renewing it: its new generation wakes us (or the wait ends and we look again)
      if (this.clock.now() >= deadline) throw fail('CONNECTION_UNAVAILABLE');
      await this.events.nextOf(id, 1_000);
    }
  }

  /** Under the lease: presents the refresh token once, and stores what comes back before letting go. */
  private async refresh(
    scope: WorkspaceScope,
    row: ConnectionRecord,
    tokens: StoredTokens,
    fail: (code: ConnectionProblem) => ConnectionUnavailableError,
  ): Promise<Held> {
    let fresh;
    try {
      fresh = await this.flow.upstreamOAuth.refresh(
        row.upstream,
        await this.flow.clientSecret(scope, row.upstream),
        tokens.refresh_token!,
      );
    } catch (error) {
      if (!(error instanceof UpstreamOauthError)) {
        await this.repository.releaseLease(scope, row.id, this.holder);
        throw error;
      }
      if (error.refused) {
        await this.needsReconnect(
          scope,
          row,
          `the authorization server refused the refresh token (${error.oauthError})`,
          error.oauthError,
        );
        throw fail('CONNECTION_NEEDS_RECONNECT');
      }
      // the server may be back in a moment: the connection stays, this replica waits a little before trying again
      this.unreachableUntil.set(row.id, this.clock.now() + UNREACHABLE_BACKOFF_MS);
      await this.repository.releaseLease(scope, row.id, this.holder);
      await this.db.transaction((tx) =>
        this.flow.record(tx, scope, 'connection.refresh_failed', row, 'system', {
          reason: 'unreachable',
          detail: error.reason,
        }),
      );
      throw fail('CONNECTION_UNAVAILABLE');
    }
    const now = this.clock.date();
    // a server that does not rotate answers without a refresh token: the one we have stays good
    const kept = { ...fresh, refresh_token: fresh.refresh_token ?? tokens.refresh_token };
    const saved = await this.db
      .transaction(async (tx) => {
        if (
          !(await this.repository.saveRefreshed(scope, row.id, this.holder, tokenFacts(kept, row.scope, now), now, tx))
        )
          throw new LeaseLostError();
        await this.vault.keep(scope, connectionKey(row.id), sealTokens(kept), tx);
        return true;
      })
      .catch((error: unknown) => {
        if (error instanceof LeaseLostError) return false;
        throw error;
      });
    if (!saved) {
      this.logger.warn({ connection: row.id }, 'a refresh outlived its lease; its tokens were not stored');
      throw fail('CONNECTION_UNAVAILABLE');
    }
    this.logger.log({
      msg: 'connection renewed',
      connection: row.id,
      server: row.server,
      workspace: scope.workspaceSlug,
    });
    await this.events.changed(changeOf(row));
    const refreshed = await this.repository.find(scope, row.id);
    const held: Held = {
      id: row.id,
      generation: refreshed?.generation ?? row.generation + 1,
      tokens: JSON.parse(sealTokens(kept)) as StoredTokens,
      accessExpiresAt: refreshed?.accessExpiresAt ?? null,
    };
    this.held.set(row.id, held);
    return held;
  }

  private async needsReconnect(
    scope: WorkspaceScope,
    row: ConnectionRecord,
    problem: string,
    oauthError: string | null = null,
    upstream?: UpstreamAuthorization,
  ): Promise<void> {
    const marked = await this.db.transaction(async (tx) => {
      if (!(await this.repository.markNeedsReconnect(scope, row.id, row.generation, problem, tx, upstream)))
        return false;
      await this.flow.record(tx, scope, 'connection.refresh_failed', row, 'system', {
        reason: oauthError === 'insufficient_scope' ? 'insufficient_scope' : 'refused',
        ...(oauthError ? { oauth_error: oauthError } : {}),
        detail: problem,
        reconnect: row.subject === WORKSPACE_SUBJECT ? 'an admin of the workspace' : row.subject,
      });
      return true;
    });
    if (marked) await this.events.changed(changeOf(row));
  }

  private due(held: Held): boolean {
    return refreshDue(held.accessExpiresAt, held.tokens.expires_in ?? null, this.clock.now());
  }

  /** When it was last used, to the minute: enough for people, one write a minute per connection and replica. */
  private touch(scope: WorkspaceScope, id: string): void {
    const now = this.clock.now();
    if (now - (this.lastTouched.get(id) ?? 0) < 60_000) return;
    this.lastTouched.set(id, now);
    void this.repository.touch(scope, id, new Date(now)).catch(() => undefined);
  }
}

class LeaseLostError extends Error {}
