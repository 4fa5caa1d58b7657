import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { z } from 'zod';
import { MESSAGE_BUS, MessageBus } from '@aileron/bus';

/** A secret's newest version changed: a new one was written (`version`), or it was deleted (`version` null). */
export interface SecretChange {
  organizationId: string;
  workspaceId: string;
  path: string;
  version: number | null;
}

const CHANNEL = 'vault.secret-changed';
const changeMessage = z.object({
  organizationId: z.string(),
  workspaceId: z.string(),
  path: z.string(),
  version: z.number().int().nullable(),
});

/**
 * Tells every replica when a secret's newest version changes, for what holds a
 * value it resolved (the pool's running instances). The bus may lose a message
 * while it is away: when it comes back, listeners are told `null`, which means
 * "check what you hold against the database".
 */
@Injectable()
export class SecretChanges implements OnModuleDestroy {
  private readonly logger = new Logger('SecretChanges');
  private readonly listeners = new Set<(change: SecretChange | null) => void>();
  private readonly unsubscribe: () => void;
  private readonly stopWatching: () => void;

  constructor(@Inject(MESSAGE_BUS) private readonly bus: MessageBus) {
    this.unsubscribe = bus.subscribe(CHANNEL, (message) => {
      const change = changeMessage.safeParse(message);
      if (change.success) this.tell(change.data);
    });
    this.stopWatching = bus.onConnectionChange((connected) => {
      if (connected) this.tell(null);
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe();
    this.stopWatching();
    this.listeners.clear();
  }

  /** Reaches this replica's listeners too (the bus delivers to its publisher); never fails. */
  async publish(change: SecretChange): Promise<void> {
    await this.bus.publish(CHANNEL, change).catch((error: unknown) => {
      this.logger.warn({ err: error, path: change.path }, 'could not announce a secret change');
    });
  }

  /** Returns the function that stops listening. */
  listen(listener: (change: SecretChange | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private tell(change: SecretChange | null): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(change);
      } catch (error) {
        this.logger.warn({ err: error }, 'a secret change listener failed');
      }
    }
  }
}
