import { describe, expect, it } from 'vitest';
import { endUnfinished, JournalEntry } from './execution-journal';

const record = (
  id: string,
  type: JournalEntry['type'],
  execution: string | undefined,
  data: Record<string, unknown> = {},
): JournalEntry => ({
  id,
  type,
  time: '2026-01-01T00:00:00.000Z',
  organizationId: 'org',
  workspaceId: 'ws',
  workspaceSlug: 'team',
  sessionId: 'session',
  actor: 'token:1',
  server: 'srv',
  tool: 'tool',
  decision: 'allow',
  data: { ...(execution ? { execution_id: execution } : {}), ...data },
});

describe('endUnfinished: the calls a dead process was still running', () => {
  const now = new Date('2026-01-01T00:01:00.000Z');

  it('ends each call that started and did not end, and no other', () => {
    const records = [
      record('a1', 'execution.started', 'a', { instance: 'i-1', version: '1.0.0', arguments: { q: 1 } }),
      record('b1', 'execution.started', 'b'),
      record('b2', 'execution.succeeded', 'b'),
      record('c1', 'execution.started', 'c', { approval_id: 'ap-1' }),
      record('d', 'execution.failed', undefined, { error: 'denied by policy' }),
    ];
    const failures = endUnfinished(records, now);
    expect(failures.map((f) => f.data.execution_id)).toEqual(['a', 'c']);
    expect(failures[0]).toMatchObject({
      type: 'execution.failed',
      time: now.toISOString(),
      sessionId: 'session',
      tool: 'tool',
      decision: 'allow',
    });
    // what the start said about the instance, never its arguments again
    expect(failures[0]!.data).toEqual({
      instance: 'i-1',
      version: '1.0.0',
      execution_id: 'a',
      error: expect.stringContaining('stopped'),
    });
    expect(failures[1]!.data.approval_id).toBe('ap-1');
  });

  it('gives a failure the same id every time, so a replay done twice records it once', () => {
    const records = [record('a1', 'execution.started', 'a')];
    const [first] = endUnfinished(records, now);
    const [again] = endUnfinished(records, new Date());
    expect(first!.id).toBe(again!.id);
    expect(first!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(first!.id).not.toBe(endUnfinished([record('a2', 'execution.started', 'a')], now)[0]!.id);
  });
});
