import { describe, expect, it } from 'vitest';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { BoundedEventStore } from './bounded-event-store';

const note = (n: number): JSONRPCMessage => ({ jsonrpc: '2.0', method: 'notifications/message', params: { n } });

async function replay(store: BoundedEventStore, after: string): Promise<{ streamId: string; seen: number[] }> {
  const seen: number[] = [];
  const streamId = await store.replayEventsAfter(after, {
    send: async (_id, message) => void seen.push((message as unknown as { params: { n: number } }).params.n),
  });
  return { streamId, seen };
}

describe('BoundedEventStore', () => {
  it('replays, in order, what one stream sent after the event the client last saw', async () => {
    const store = new BoundedEventStore();
    const ids: string[] = [];
    for (let n = 1; n <= 6; n++) ids.push(await store.storeEvent(n % 2 === 0 ? 'even' : 'odd', note(n)));
    expect(await store.getStreamIdForEventId(ids[1]!)).toBe('even');
    expect(await replay(store, ids[1]!)).toEqual({ streamId: 'even', seen: [4, 6] });
    expect(await replay(store, ids[4]!)).toEqual({ streamId: 'odd', seen: [] });
  });

  it('keeps only the latest 500 events however long the session lives', async () => {
    const store = new BoundedEventStore();
    const first = await store.storeEvent('s', note(1));
    for (let n = 2; n <= 1200; n++) await store.storeEvent('s', note(n));
    const { seen } = await replay(store, first);
    expect(seen).toHaveLength(500);
    expect(seen[0]).toBe(701);
    expect(seen.at(-1)).toBe(1200);
  });
});
