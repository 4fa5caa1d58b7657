import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

const KEEP = 500;

/**
 * Resumption for one session (a client reconnecting with Last-Event-ID gets
 * what its broken stream missed). Bounded: a session that streams a lot keeps
 * only its latest messages, so memory stays flat however long it lives.
 */
export class BoundedEventStore implements EventStore {
  /** a ring: event n sits at n % KEEP, so storing never moves the others (each call stores two) */
  private readonly events: ({ id: string; streamId: string; message: JSONRPCMessage } | undefined)[] = new Array(KEEP);
  private next = 0;

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    const id = `${streamId}_${++this.next}`;
    this.events[this.next % KEEP] = { id, streamId, message };
    return id;
  }

  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return streamOf(eventId);
  }

  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    const streamId = streamOf(lastEventId) ?? '';
    const after = Number(lastEventId.slice(lastEventId.lastIndexOf('_') + 1));
    // oldest first: what is still kept of the events after the one the client saw
    for (let n = Math.max(after + 1, this.next - KEEP + 1); n <= this.next; n++) {
      const event = this.events[n % KEEP];
      if (event?.streamId === streamId) await send(event.id, event.message);
    }
    return streamId;
  }
}

function streamOf(eventId: string): string | undefined {
  const at = eventId.lastIndexOf('_');
  return at > 0 ? eventId.slice(0, at) : undefined;
}
