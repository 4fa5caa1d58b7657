import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { MESSAGE_BUS, MessageBus, Wakeups } from '@aileron/bus';

const CHANNEL = 'connections.changed';

/** Which connection changed: its id, and whose connection to which server it is. */
export interface ConnectionChange {
  id: string;
  workspaceId: string;
  server: string;
  subject: string;
}

/**
 * "This connection changed" between replicas: connected (again), refreshed,
 * marked for reconnection, deleted. Replicas drop the tokens they hold for
 * it, and calls waiting on it (a refresh another replica makes, a person
 * connecting while their call waits) wake to read the database again. Never
 * the only copy of a fact: a missed message costs a wait, not an answer.
 */
@Injectable()
export class ConnectionEvents implements OnModuleDestroy {
  private readonly byId: Wakeups;
  private readonly bySubject: Wakeups;
  private readonly listeners = new Set<(change: ConnectionChange) => void>();
  private readonly unsubscribe: () => void;

  constructor(@Inject(MESSAGE_BUS) private readonly bus: MessageBus) {
    this.byId = new Wakeups(bus, CHANNEL, (message) => (message as Partial<ConnectionChange> | null)?.id);
    this.bySubject = new Wakeups(bus, CHANNEL, (message) =>
      isChange(message) ? subjectKey(message.workspaceId, message.server, message.subject) : undefined,
    );
    this.unsubscribe = bus.subscribe(CHANNEL, (message) => {
      if (isChange(message)) for (const listener of this.listeners) listener(message);
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe();
    this.byId.close();
    this.bySubject.close();
  }

  /** Tells every replica, this one at once. */
  async changed(change: ConnectionChange): Promise<void> {
    this.byId.wake(change.id);
    this.bySubject.wake(subjectKey(change.workspaceId, change.server, change.subject));
    for (const listener of this.listeners) listener(change);
    await this.bus.publish(CHANNEL, change);
  }

  /** Resolves at the next change of connection `id` (on any replica), or after `ms`. */
  nextOf(id: string, ms: number): Promise<void> {
    return this.byId.sleep(id, ms);
  }

  /** Resolves at the next change of a subject's connection to a server, made yet or not, or after `ms`. */
  nextFor(workspaceId: string, server: string, subject: string, ms: number): Promise<void> {
    return this.bySubject.sleep(subjectKey(workspaceId, server, subject), ms);
  }

  onChanged(listener: (change: ConnectionChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

function isChange(message: unknown): message is ConnectionChange {
  const m = message as Partial<ConnectionChange> | null;
  return (
    typeof m?.id === 'string' &&
    typeof m.workspaceId === 'string' &&
    typeof m.server === 'string' &&
    typeof m.subject === 'string'
  );
}

function subjectKey(workspaceId: string, server: string, subject: string): string {
  return `${workspaceId}/${server}/${subject}`;
}
