import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { DatabaseService } from '@aileron/database';
import { OutboxService } from '@aileron/outbox';
import { SecretChange, SecretChanges } from '@aileron/vault';
import { PoolInstances, StoppedHolder } from './pool-instances.service';

/**
 * Rotation reaches running instances: when a secret gets a new version (or is
 * deleted), every replica stops the instances it runs that were started with
 * an older value, and their sessions carry on at their next request on a new
 * instance that reads the new one. Each stop is a `pool.credentials_rotated`
 * event naming the secret's path and versions, never its value.
 */
@Injectable()
export class SecretRotation implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Pool');
  private stopListening: (() => void) | undefined;

  constructor(
    private readonly changes: SecretChanges,
    private readonly instances: PoolInstances,
    private readonly db: DatabaseService,
    private readonly outbox: OutboxService,
  ) {}

  onApplicationBootstrap(): void {
    this.stopListening = this.changes.listen((change) => void this.follow(change));
  }

  onApplicationShutdown(): void {
    this.stopListening?.();
  }

  private async follow(change: SecretChange | null): Promise<void> {
    try {
      if (change === null) {
        // the bus was away: a change may have been missed, so what runs is checked against the vault
        await this.announce(await this.instances.replaceStaleSecretHolders());
        return;
      }
      await this.announce(await this.instances.replaceSecretHolders(change, change.path, change.version));
    } catch (error) {
      this.logger.warn({ err: error, path: change?.path }, 'could not replace instances holding an older secret');
    }
  }

  private async announce(stopped: StoppedHolder[]): Promise<void> {
    if (stopped.length === 0) return;
    await this.db.transaction(async (tx) => {
      for (const s of stopped) {
        this.logger.log({
          msg: 'instance replaced for a rotated secret',
          server: s.server,
          instance: s.instance,
          path: s.path,
        });
        await this.outbox.record(tx, {
          topic: 'pool.credentials_rotated',
          organizationId: s.scope.organizationId,
          workspaceId: s.scope.workspaceId,
          payload: {
            workspace: s.scope.workspaceSlug,
            server: s.server,
            version: s.version,
            instance: s.instance,
            path: s.path,
            held_version: s.held,
            secret_version: s.newest,
            actor: 'system',
          },
        });
      }
    });
  }
}
