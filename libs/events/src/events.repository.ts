import { Injectable } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { Repository } from '@aileron/database';
import type { OutboxMessage } from '@aileron/outbox';

/** The outbox read as the workspace's event history, for clients that reconnect. */
@Injectable()
export class EventsRepository extends Repository {
  async after(scope: WorkspaceScope, afterId: bigint, limit: number): Promise<OutboxMessage[]> {
    const rows = await this.client.outboxMessage.findMany({
      where: { organizationId: scope.organizationId, workspaceId: scope.workspaceId, id: { gt: afterId } },
      orderBy: { id: 'asc' },
      take: limit,
    });
    return rows.map((r) => ({
      id: r.id.toString(),
      topic: r.topic,
      organizationId: r.organizationId ?? undefined,
      workspaceId: r.workspaceId ?? undefined,
      payload: r.payload as Record<string, unknown>,
      createdAt: r.createdAt,
    }));
  }
}
