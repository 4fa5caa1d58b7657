import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { decode } from 'jsonwebtoken';
import { Clock } from '@aileron/clock';
import { databaseUnavailableReason } from '@aileron/database';
import { PeriodicTask } from '@aileron/schedule';
import { looksLikeBrowserSessionToken } from './domain/browser-session';
import type { Principal } from './domain/principal';
import { BearerCredentials } from './bearer-credentials';
import { PrincipalCache } from './principal-cache.service';
import { PrincipalResolver } from './principal.resolver';

/** the backstop should a bus message about a revocation be lost; the same bound as the principal cache's */
const RECHECK_EVERY_MS = 30_000;

/** One long-lived answer and how to judge its caller again. */
interface Held {
  token: string;
  /** when the credential itself runs out (a JWT's `exp`), in ms */
  expiresAt: number | null;
  /** throws when the refreshed caller may no longer have what the stream gives */
  check: (principal: Principal) => Promise<unknown>;
  /** ends the stream: its caller lost access (`access`), or this process is shutting down (`shutdown`) */
  end: (reason: string, cause: StreamEnd) => void;
}

export type StreamEnd = 'access' | 'shutdown';

const SHUTTING_DOWN = 'the control plane is shutting down: reconnect, to another replica or once it is back';

/**
 * Long-lived answers (the event stream, an MCP session's stream of server
 * messages) outlive the check made when they opened. Whenever access may have
 * changed anywhere (a revoked token or gateway, a membership, a user: the
 * caches hear of it on every replica), and every 30 s as a backstop, each
 * holder's credential is resolved again exactly as a new request's would be
 * and the stream's own check rerun; one that no longer passes is ended. A
 * recheck that meets a database outage ends nothing: the judgment waits for
 * the next recheck after it (30 s at most), it is not skipped.
 */
@Injectable()
export class StreamAccess implements OnModuleDestroy {
  private readonly logger = new Logger('StreamAccess');
  private readonly held = new Set<Held>();
  private closing = false;
  private readonly rechecks: PeriodicTask;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly bearer: BearerCredentials,
    private readonly principals: PrincipalResolver,
    cache: PrincipalCache,
    private readonly clock: Clock,
  ) {
    this.rechecks = new PeriodicTask({
      name: 'stream access recheck',
      everyMs: RECHECK_EVERY_MS,
      run: () => Promise.all([...this.held].map((held) => this.judge(held))),
      logger: this.logger,
      clock,
    });
    this.rechecks.start();
    this.unsubscribe = cache.onChange(() => this.recheck());
  }

  /**
   * Ends every stream still open: the HTTP server's close waits for each
   * answer under way, so one client holding a stream would hold the shutdown
   * (a rolling restart, `npm start` stopped with Ctrl-C) for as long as it
   * stayed. Nest runs this before it closes the server; a stream opened after
   * it is ended as it opens.
   */
  async onModuleDestroy(): Promise<void> {
    this.closing = true;
    this.unsubscribe();
    await this.rechecks.stop();
    const open = [...this.held];
    this.held.clear();
    for (const held of open) held.end(SHUTTING_DOWN, 'shutdown');
  }

  /**
   * Watches a stream opened with `token` (the bearer credential or browser
   * session it was opened with) until the returned function is called (the stream closed).
   */
  hold(token: string, check: Held['check'], end: Held['end']): () => void {
    const payload = token.split('.').length === 3 ? decode(token, { json: true }) : null;
    const held: Held = { token, expiresAt: typeof payload?.exp === 'number' ? payload.exp * 1000 : null, check, end };
    if (this.closing) {
      end(SHUTTING_DOWN, 'shutdown');
      return () => undefined;
    }
    this.held.add(held);
    return () => this.held.delete(held);
  }

  /** Rechecks every open stream soon, once however many changes arrive together (and once more after a recheck under way). */
  recheck(): void {
    if (this.held.size > 0) this.rechecks.runNow();
  }

  private async judge(held: Held): Promise<void> {
    let reason: string | null = null;
    try {
      if (held.expiresAt !== null && held.expiresAt <= this.clock.now()) reason = 'the credential has expired';
      else await held.check(await this.resolve(held.token));
    } catch (error) {
      // the database being away says nothing about access: the stream stays, and a later recheck judges it
      if (databaseUnavailableReason(error)) return;
      reason = error instanceof Error ? error.message : 'access was withdrawn';
    }
    if (reason === null || !this.held.delete(held)) return;
    this.logger.log({ reason }, 'ended a stream whose caller no longer has access');
    held.end(reason, 'access');
  }

  /** The caller as a request with this credential would be resolved now (the JWT's signature was checked when the stream opened). */
  private async resolve(token: string): Promise<Principal> {
    if (looksLikeBrowserSessionToken(token)) return this.principals.fromBrowserSession(token);
    const direct = this.bearer.resolve(token);
    if (direct) return direct;
    const payload = decode(token, { json: true });
    if (!payload) throw new Error('the credential is not valid');
    return this.principals.fromJwt(payload);
  }
}
