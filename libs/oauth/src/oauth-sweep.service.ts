import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { Clock } from '@aileron/clock';
import { PeriodicTask } from '@aileron/schedule';
import { OauthGrants } from './oauth-grants.service';
import { OauthRepository } from './oauth.repository';

const EVERY_MS = 10 * 60_000;
/** consents ended per pass: the rest are the next pass's */
const LAPSED_PER_PASS = 200;
// expired protocol records of every tenant: nobody's request, the process's own housekeeping
const SWEEP = SystemScopes.system('oauth expiry sweep');

/**
 * Deletes the provider's records past their expiry (codes, access tokens,
 * interactions, rotated refresh tokens): they are never read again, and
 * without this the table only grows. Then ends the consents whose grant ran
 * out of time (recorded as `oauth.client_disconnected`, reason `expired`).
 * Every replica sweeps; a consent another replica ended first is skipped.
 */
@Injectable()
export class OauthSweep implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('OauthSweep');
  private readonly task: PeriodicTask;

  constructor(
    private readonly repository: OauthRepository,
    private readonly grants: OauthGrants,
    private readonly clock: Clock,
  ) {
    this.task = new PeriodicTask({
      name: 'oauth expiry sweep',
      everyMs: EVERY_MS,
      run: () => this.pass(),
      logger: this.logger,
      clock,
    });
  }

  /** One pass, as the periodic task runs it (a test runs one after moving the clock). */
  async pass(): Promise<void> {
    const now = this.clock.date();
    const removed = await this.repository.sweepExpiredEntries(SWEEP, now);
    if (removed > 0) this.logger.debug(`removed ${removed} expired OAuth records`);
    for (const grant of await this.repository.lapsedGrants(SWEEP, now, LAPSED_PER_PASS))
      await this.grants.expire(SystemScopes.organization(grant.organizationId), grant);
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
  }
}
