import type { RecordedCall } from '@aileron/audit';
import { describe, expect, it } from 'vitest';
import { compilePolicy } from './policy-engine';
import { parsePolicyDocument, PolicyDocument } from './policy-document';
import { replayCalls } from './policy-replay';

function draft(document: unknown): ReturnType<typeof compilePolicy> {
  const parsed = parsePolicyDocument(document);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return compilePolicy(parsed.document as PolicyDocument, { defaultEffect: 'deny' });
}

let seq = 0;
function call(overrides: Partial<RecordedCall>): RecordedCall {
  seq++;
  return {
    id: `r${seq}`,
    seq,
    occurredAt: new Date('2030-06-01T12:00:00.000Z'),
    server: 'github',
    tool: 'get_issue',
    arguments: {},
    executionMode: 'remote',
    actor: 'user:ada',
    principal: { user: 'user:ada' },
    session: null,
    decision: 'allow',
    rules: [],
    policyVersion: 1,
    ...overrides,
  };
}

describe('replaying recorded calls', () => {
  it('lists the calls whose decision changes, with the draft rules responsible, in their order', () => {
    const calls = [
      call({ tool: 'get_issue' }),
      call({ tool: 'delete_repo', arguments: { repo: 'prod-api' } }),
      call({ tool: 'delete_repo', arguments: { repo: 'sandbox' }, decision: 'deny', rules: ['no-deletes'] }),
      call({ tool: 'merge_pr', decision: 'approval' }),
    ];
    const differences = replayCalls(
      draft({
        rules: [
          { id: 'reads', effect: 'allow', tools: ['get_*'] },
          {
            id: 'prod-deletes',
            effect: 'deny',
            tools: ['delete_repo'],
            arguments: [{ path: 'repo', regex: '^prod-' }],
          },
          { id: 'other-deletes', effect: 'approval', tools: ['delete_repo'] },
          { id: 'merges', effect: 'allow', tools: ['merge_pr'] },
        ],
      }),
      calls,
    );
    expect(differences.map((d) => [d.call.id, `${d.call.decision} → ${d.draft.decision}`, d.draft.rules])).toEqual([
      [calls[1]!.id, 'allow → deny', ['prod-deletes']],
      [calls[2]!.id, 'deny → approval', ['other-deletes']],
      [calls[3]!.id, 'approval → allow', ['merges']],
    ]);
  });

  it('is no difference when the same effect comes from another rule or the default', () => {
    const calls = [call({ decision: 'deny', rules: ['old-rule'] }), call({ decision: 'allow', rules: [] })];
    const differences = replayCalls(
      draft({
        default: 'allow',
        rules: [{ id: 'new-rule', effect: 'deny', tools: ['get_issue'], principals: { users: ['user:bob'] } }],
      }),
      [calls[1]!],
    );
    expect(differences).toEqual([]);
    expect(replayCalls(draft({ rules: [{ id: 'new-rule', effect: 'deny' }] }), [calls[0]!])).toEqual([]);
  });

  it('decides with the recorded execution mode and caller', () => {
    const local = call({ executionMode: 'local', principal: { user: 'user:dev', gateway: 'g1', session: 's1' } });
    const remote = call({});
    const differences = replayCalls(
      draft({
        rules: [
          { id: 'everything', effect: 'allow' },
          { id: 'laptops-ask', effect: 'approval', execution_mode: 'local', principals: { gateways: ['g1'] } },
        ],
      }),
      [local, remote],
    );
    expect(differences.map((d) => d.call.id)).toEqual([local.id]);
  });
});
