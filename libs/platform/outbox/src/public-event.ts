import type { OutboxMessage } from './outbox-message';

/**
 * An event as subscribers see it (webhooks, the SSE stream): the outbox
 * message in the shape docs/webhooks.md § The envelope promises. `id` is stable across redeliveries,
 * so receivers drop repeats by it.
 */
export interface PublicEvent {
  id: string;
  type: string;
  time: string;
  organization_id: string | null;
  workspace_id: string | null;
  /** the workspace's slug, where the event belongs to one */
  workspace: string | null;
  session: string | null;
  execution_mode?: string;
  data: Record<string, unknown>;
}

export function eventId(messageId: string): string {
  return `evt_${messageId}`;
}

export function toPublicEvent(message: OutboxMessage): PublicEvent {
  const {
    workspace,
    session,
    execution_mode: mode,
    ...data
  } = message.payload as Record<string, unknown> & {
    workspace?: unknown;
    session?: unknown;
    execution_mode?: unknown;
  };
  return {
    id: eventId(message.id),
    type: message.topic,
    time: message.createdAt.toISOString(),
    organization_id: message.organizationId ?? null,
    workspace_id: message.workspaceId ?? null,
    workspace: typeof workspace === 'string' ? workspace : null,
    session: typeof session === 'string' ? session : null,
    ...(typeof mode === 'string' ? { execution_mode: mode } : {}),
    data,
  };
}
