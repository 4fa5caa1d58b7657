import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { Clock } from '@aileron/clock';
import { PeriodicTask } from '@aileron/schedule';
import { OauthRepository } from './oauth.repository';

const EVERY_MS = 10 * 60_000;
// expired protocol records of every tenant: nobody's request, the process's own housekeeping
const SWEEP = SystemScopes.system('oauth expiry sweep');

/**
 * Deletes the provider's records past their expiry (codes, access tokens,
 * interactions, rotated refresh tokens): they are never read again, and
 * without this the table only grows. Every replica sweeps; each pass is one
 * idempotent delete.
 */
@Injectable()
export class OauthSweep implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('OauthSweep');
  private readonly task: PeriodicTask;

  constructor(repository: OauthRepository, clock: Clock) {
    this.task = new PeriodicTask({
      name: 'oauth expiry sweep',
      everyMs: EVERY_MS,
      run: async () => {
        const removed = await repository.sweepExpiredEntries(SWEEP, clock.date());
        if (removed > 0) this.logger.debug(`removed ${removed} expired OAuth records`);
      },
      logger: this.logger,
      clock,
    });
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
  }
}
