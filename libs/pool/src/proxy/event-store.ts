import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

const KEEP = 500;

/**
 * Resumption for one session (a client reconnecting with Last-Event-ID gets
 * what its broken stream missed). Bounded: a session that streams a lot keeps
 * only its latest messages, so memory stays flat however long it lives.
 */
export class BoundedEventStore implements EventStore {
  private readonly events: { id: string; streamId: string; message: JSONRPCMessage }[] = [];
  private next = 0;

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    const id = `${streamId}_${++this.next}`;
    this.events.push({ id, streamId, message });
    if (this.events.length > KEEP) this.events.splice(0, this.events.length - KEEP);
    return id;
  }

  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return this.events.find((e) => e.id === eventId)?.streamId ?? streamOf(eventId);
  }

  async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> }): Promise<string> {
    const streamId = streamOf(lastEventId) ?? '';
    const after = Number(lastEventId.slice(lastEventId.lastIndexOf('_') + 1));
    for (const event of this.events) {
      if (event.streamId === streamId && Number(event.id.slice(event.id.lastIndexOf('_') + 1)) > after) await send(event.id, event.message);
    }
    return streamId;
  }
}

function streamOf(eventId: string): string | undefined {
  const at = eventId.lastIndexOf('_');
  return at > 0 ? eventId.slice(0, at) : undefined;
}
