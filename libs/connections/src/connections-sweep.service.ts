import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { Clock } from '@aileron/clock';
import { DatabaseService } from '@aileron/database';
import { PeriodicTask } from '@aileron/schedule';
import { VaultService } from '@aileron/vault';
import { ConnectionsRepository } from './connections.repository';

const EVERY_MS = 10 * 60_000;
const PER_PASS = 500;
// connections nobody finished, in every tenant: the process's own housekeeping
const SWEEP = SystemScopes.system('connection start sweep');

/**
 * Removes the connections being made that nobody finished in their ten
 * minutes, with their sealed PKCE verifiers: the callback would refuse them
 * anyway, and without this they would only pile up.
 */
@Injectable()
export class ConnectionsSweep implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('ConnectionsSweep');
  private readonly task: PeriodicTask;

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: ConnectionsRepository,
    private readonly vault: VaultService,
    private readonly clock: Clock,
  ) {
    this.task = new PeriodicTask({
      name: 'connection start sweep',
      everyMs: EVERY_MS,
      run: () => this.pass(),
      logger: this.logger,
      clock,
    });
  }

  /** One pass (a test runs one after moving the clock). */
  async pass(): Promise<number> {
    const expired = await this.repository.takeExpiredStarts(SWEEP, this.clock.date(), PER_PASS);
    for (const start of expired) {
      const scope = SystemScopes.workspace(start.organizationId, { id: start.workspaceId, slug: start.workspaceSlug });
      await this.db.transaction((tx) => this.vault.forget(scope, { in: [`connection-start:${start.id}`] }, tx));
    }
    return expired.length;
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
  }
}
