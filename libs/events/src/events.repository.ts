import { Injectable } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { Repository } from '@aileron/database';
import { OutboxMessage, storedMessage } from '@aileron/outbox';

/** The outbox read as the workspace's event history, for clients that reconnect. */
@Injectable()
export class EventsRepository extends Repository {
  async after(scope: WorkspaceScope, afterId: bigint, limit: number): Promise<OutboxMessage[]> {
    const rows = await this.client.outboxMessage.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id: { gt: afterId } },
      orderBy: { id: 'asc' },
      take: limit,
    });
    // events that announce an audit record come back with only the rest of their payload: OutboxService fills it in
    return rows.map(storedMessage);
  }
}
