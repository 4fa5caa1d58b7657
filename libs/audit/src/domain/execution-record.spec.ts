import { describe, expect, it } from 'vitest';
import { formatPath } from '@aileron/errors';
import {
  announcedExecution,
  decisionsMatching,
  executionEventOf,
  executionEventPayload,
  executionRecord,
  gatewayExecution,
  nestsDeeperThan,
} from './execution-record';

const GATEWAY = 'gateway:g-1';
type Columns = { execution_mode: string; server: string | null; tool: string | null; session: string | null };
const columns: Columns = { execution_mode: 'local', server: 'github', tool: 'get_issue', session: 'sess-1' };

/** A gateway's record through the ingest's mapping; throws with the issues when it is refused. */
function local(event: { id?: string; type?: string; decision?: string; principal?: string }, data = {}) {
  const parsed = gatewayExecution(
    { id: 'e-1', type: 'execution.succeeded', decision: 'allow', ...event },
    columns,
    data,
    GATEWAY,
  );
  if (!parsed.success)
    throw new Error(parsed.error.issues.map((i) => `${formatPath(i.path)}: ${i.message}`).join('; '));
  return parsed.data;
}

function refusal(event: { type?: string; decision?: string }, data = {}, cols: Columns = columns): string[] {
  const parsed = gatewayExecution({ id: 'e-1', type: 'execution.succeeded', ...event }, cols, data, GATEWAY);
  expect(parsed.success).toBe(false);
  return parsed.error!.issues.map((i) => `${formatPath(i.path)}: ${i.message}`);
}

describe('an execution record', () => {
  it("is what the pool writes: a remote call's columns and data, in the current names", () => {
    const record = executionRecord({
      type: 'execution.started',
      execution_mode: 'remote',
      server: 'github',
      tool: 'get_issue',
      decision: 'approved',
      principal: 'token:t-1',
      session: 'mcp-1',
      data: { execution_id: 'x-1', rules: ['reads'], policy_version: 4, approval_id: 'ap-1', mcp_session: 'mcp-1' },
    });
    expect(record).toMatchObject({ decision: 'approved', data: { rules: ['reads'], policy_version: 4 } });
  });

  it('refuses, as a defect, a pool record that is not of the shape', () => {
    expect(() =>
      executionRecord({
        type: 'execution.succeeded',
        execution_mode: 'remote',
        server: 'github',
        tool: 'get_issue',
        decision: 'approval' as 'approved',
        principal: 'token:t-1',
        session: null,
        data: { execution_id: 'x-1' },
      }),
    ).toThrow(/decision/);
  });

  it("reads an older gateway's names as the current ones", () => {
    const record = local({ decision: 'approval' }, { rule: 'reads-need-a-look', result_size: 120, latency_ms: 4 });
    expect(record).toEqual({
      type: 'execution.succeeded',
      execution_mode: 'local',
      server: 'github',
      tool: 'get_issue',
      decision: 'approved',
      principal: GATEWAY,
      session: 'sess-1',
      data: { execution_id: 'e-1', rules: ['reads-need-a-look'], result_bytes: 120, latency_ms: 4 },
    });
  });

  it('reads execution.denied as the failure of a denied call', () => {
    expect(local({ type: 'execution.denied', decision: 'deny' })).toMatchObject({
      type: 'execution.failed',
      decision: 'deny',
    });
    expect(local({ type: 'execution.denied', decision: undefined })).toMatchObject({ decision: 'deny' });
  });

  it('keeps the current names as sent, and a rule already among the rules once', () => {
    const record = local(
      { decision: 'approved', principal: 'user:ada' },
      { execution_id: 'call-9', rules: ['a', 'b'], rule: 'b', result_bytes: 7, result_size: 99 },
    );
    expect(record.principal).toBe('user:ada');
    expect(record.data).toEqual({ execution_id: 'call-9', rules: ['a', 'b'], result_bytes: 7 });
    expect(local({}, { rules: ['a'], rule: 'z' }).data.rules).toEqual(['z', 'a']);
  });

  it('keeps keys of its own a gateway adds to data', () => {
    expect(local({}, { host: 'laptop-7' }).data).toEqual({ execution_id: 'e-1', host: 'laptop-7' });
  });

  it('refuses a record without what every call has, naming each field', () => {
    expect(refusal({ decision: undefined }, {}, { ...columns, server: null, tool: null })).toEqual([
      'server: required in an execution record',
      'tool: required in an execution record',
      expect.stringMatching(/^decision: .*allow, approved, deny/),
    ]);
  });

  it('refuses known fields of the wrong type, at their path in data', () => {
    expect(refusal({ decision: 'allow' }, { rules: ['ok', 3], result_bytes: -1, arguments: ['a'] })).toEqual([
      'data.arguments: must be an object',
      expect.stringMatching(/^data\.rules\[1\]: /),
      expect.stringMatching(/^data\.result_bytes: /),
    ]);
  });

  it('is announced with its own columns, whatever keys its data carries', () => {
    const record = local({}, { workspace: 'elsewhere', server: 'spoofed', session: 'other', latency_ms: 3 });
    const payload = executionEventPayload(record, {
      workspace: 'payments',
      actor: GATEWAY,
      occurredAt: new Date('2030-01-01T00:00:00.000Z'),
    });
    expect(payload).toMatchObject({
      workspace: 'payments',
      server: 'github',
      session: 'sess-1',
      execution_mode: 'local',
      execution_id: 'e-1',
      decision: 'allow',
      principal: GATEWAY,
      actor: GATEWAY,
      occurred_at: '2030-01-01T00:00:00.000Z',
      latency_ms: 3,
    });
  });
});

describe("an execution's event stored as a reference to its record", () => {
  const record = executionRecord({
    type: 'execution.started',
    execution_mode: 'remote',
    server: 'github',
    tool: 'get_issue',
    decision: 'approved',
    principal: 'user:u-1',
    session: 'sess-1',
    data: { execution_id: 'x-1', arguments: { repo: 'acme/api', n: 7 }, approval_id: 'a-1', rules: ['look'] },
  });
  const context = { workspace: 'payments', actor: 'token:t-1', occurredAt: new Date('2030-01-01T00:00:00.123Z') };

  it('keeps for its row only the reference and the workspace, none of the call', () => {
    const { fromAuditRecord } = announcedExecution({}, record, context, 'r-1');
    expect(fromAuditRecord).toEqual({ id: 'r-1', rest: { workspace: 'payments' } });
  });

  it('carries its envelope, and one payload however often and however it is read', () => {
    const announced = announcedExecution({ topic: 'execution.started', audited: false }, record, context, 'r-1');
    expect(announced).toMatchObject({ topic: 'execution.started', audited: false });
    expect(announced.payload).toBe(announced.payload);
    expect({ ...announced }.payload).toBe(announced.payload);
    expect(JSON.parse(JSON.stringify(announced)).payload).toEqual(announced.payload);
    expect(announced.payload).toMatchObject({ execution_id: 'x-1', workspace: 'payments', tool: 'get_issue' });
  });

  it('is rebuilt from the record as stored into the payload its hearers got at once', () => {
    const { payload, fromAuditRecord } = announcedExecution({}, record, context, 'r-1');
    // the columns the journal writes the record with (ExecutionJournal), as read back
    const stored = {
      type: record.type,
      executionMode: record.execution_mode,
      server: record.server,
      tool: record.tool,
      decision: record.decision,
      principal: record.principal,
      sessionId: record.session,
      data: JSON.parse(JSON.stringify(record.data)) as Record<string, unknown>,
      actor: context.actor,
      occurredAt: new Date(context.occurredAt.getTime()),
    };
    expect(executionEventOf(stored, fromAuditRecord.rest)).toStrictEqual(payload);
  });
});

describe('a search by decision', () => {
  it('finds approved calls under either name, and other decisions as they are', () => {
    expect(decisionsMatching('approved')).toEqual(['approved', 'approval']);
    expect(decisionsMatching('approval')).toEqual(['approved', 'approval']);
    expect(decisionsMatching('deny')).toEqual(['deny']);
  });
});

describe('nestsDeeperThan', () => {
  const nested = (levels: number): unknown => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`);

  it('counts objects and arrays, not what they hold', () => {
    expect(nestsDeeperThan({ a: [{ b: 'x' }] }, 3)).toBe(false);
    expect(nestsDeeperThan({ a: [{ b: ['x'] }] }, 3)).toBe(true);
    expect(nestsDeeperThan('text', 0)).toBe(false);
    expect(nestsDeeperThan(null, 0)).toBe(false);
    expect(nestsDeeperThan(nested(64), 64)).toBe(false);
    expect(nestsDeeperThan(nested(65), 64)).toBe(true);
  });

  it('answers for a value nested far past what a recursive walk survives', () => {
    expect(nestsDeeperThan(nested(200_000), 64)).toBe(true);
  });
});
