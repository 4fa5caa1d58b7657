import { describe, expect, it } from 'vitest';
import { CallRecordRow, recordedCallOf } from './recorded-call';

const AT = new Date('2030-06-01T12:00:00.000Z');

function row(overrides: Partial<CallRecordRow>): CallRecordRow {
  return {
    seq: 7,
    id: 'record-7',
    type: 'execution.started',
    occurredAt: AT,
    source: 'pool',
    actor: 'user:ada',
    principal: 'user:ada',
    executionMode: 'remote',
    server: 'github',
    tool: 'merge_pr',
    decision: 'allow',
    sessionId: 'mcp-session-1',
    data: { arguments: { repo: 'payments' }, execution_id: 'e1' },
    ...overrides,
  };
}

describe('a recorded call', () => {
  it('is a pool call as the policy was asked it: the caller as user, no session, its arguments and mode', () => {
    expect(recordedCallOf(row({}))).toEqual({
      id: 'record-7',
      seq: 7,
      occurredAt: AT,
      server: 'github',
      tool: 'merge_pr',
      arguments: { repo: 'payments' },
      executionMode: 'remote',
      actor: 'user:ada',
      principal: { user: 'user:ada' },
      session: 'mcp-session-1',
      decision: 'allow',
      rules: [],
      policyVersion: null,
    });
  });

  it('names a gateway that called through the pool as the gateway, not a user', () => {
    const call = recordedCallOf(row({ actor: 'gateway:g1', principal: 'gateway:g1' }))!;
    expect(call.principal).toEqual({ gateway: 'g1' });
  });

  it("reads a denial's rules and version from the record", () => {
    const call = recordedCallOf(
      row({ type: 'execution.failed', decision: 'deny', data: { rules: ['no-merges'], policy_version: 3 } }),
    )!;
    expect(call).toMatchObject({ decision: 'deny', rules: ['no-merges'], policyVersion: 3, arguments: {} });
  });

  it("takes a gateway's local call with its person, its gateway and its session, and its one rule", () => {
    const call = recordedCallOf(
      row({
        type: 'execution.denied',
        source: 'gateway',
        actor: 'gateway:g2',
        principal: 'user:dev@example.com',
        executionMode: 'local',
        decision: 'deny',
        sessionId: 'local-1',
        data: { rule: 'no-force-push', arguments: { force: true } },
      }),
    )!;
    expect(call).toMatchObject({
      principal: { user: 'user:dev@example.com', gateway: 'g2', session: 'local-1' },
      executionMode: 'local',
      decision: 'deny',
      rules: ['no-force-push'],
      arguments: { force: true },
    });
  });

  it('reads an approval request from its data, where the columns are empty', () => {
    const call = recordedCallOf(
      row({
        type: 'approval.requested',
        source: 'api',
        actor: 'gateway:g3',
        principal: null,
        executionMode: null,
        server: null,
        tool: null,
        decision: null,
        sessionId: null,
        data: {
          server: 'deploy',
          tool: 'release',
          arguments: { version: '2.4.1' },
          requester: 'user:rita',
          session: 's-9',
          execution_mode: 'local',
          rules: ['releases-need-approval'],
          policy_version: 5,
        },
      }),
    )!;
    expect(call).toMatchObject({
      server: 'deploy',
      tool: 'release',
      arguments: { version: '2.4.1' },
      executionMode: 'local',
      principal: { user: 'user:rita', gateway: 'g3' },
      session: 's-9',
      decision: 'approval',
      rules: ['releases-need-approval'],
      policyVersion: 5,
    });
    // a request recorded before it carried the mode: decided without one
    expect(
      recordedCallOf(row({ type: 'approval.requested', data: { server: 'deploy', tool: 'release' } }))!.executionMode,
    ).toBeNull();
  });

  it('is no call without a server and a tool', () => {
    expect(recordedCallOf(row({ server: null }))).toBeNull();
    expect(recordedCallOf(row({ type: 'approval.requested', data: { server: 'deploy' } }))).toBeNull();
  });
});
