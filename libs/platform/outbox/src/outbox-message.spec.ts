import { describe, expect, it } from 'vitest';
import { withFields } from './outbox-message';

describe('withFields', () => {
  it('copies a record with its fields added, and a payload built on first read stays unbuilt until then', () => {
    let built = 0;
    const record = { topic: 'execution.started', workspaceId: 'w-1' } as {
      topic: string;
      workspaceId: string;
      payload: object;
    };
    Object.defineProperty(record, 'payload', { get: () => ({ n: ++built }), enumerable: true });

    const message = withFields(record, { id: '7', delivered: [] as string[] });
    expect(built).toBe(0);
    expect(message).toMatchObject({ topic: 'execution.started', workspaceId: 'w-1', id: '7', delivered: [] });
    expect(message.payload).toEqual({ n: 1 });
    expect(Object.keys(message).sort()).toEqual(['delivered', 'id', 'payload', 'topic', 'workspaceId']);
  });

  it('copies a plain record as a spread would, leaving the record as it was', () => {
    const record = { topic: 'policy.updated', payload: { version: 2 } };
    const message = withFields(record, { id: '8' });
    expect(message).toEqual({ topic: 'policy.updated', payload: { version: 2 }, id: '8' });
    expect(record).toEqual({ topic: 'policy.updated', payload: { version: 2 } });
  });
});
