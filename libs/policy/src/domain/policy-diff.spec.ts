import { describe, expect, it } from 'vitest';
import { diffPolicies } from './policy-diff';
import type { PolicyDocument, PolicyRule } from './policy-document';

function rule(id: string, overrides: Partial<PolicyRule> = {}): PolicyRule {
  return { id, effect: 'allow', ...overrides };
}

describe('policy diff', () => {
  it('lists added, removed and changed rules by id, in id order', () => {
    const before: PolicyDocument = {
      rules: [rule('keep'), rule('z-drop'), rule('edit', { tools: ['a'] }), rule('a-drop')],
    };
    const after: PolicyDocument = {
      rules: [rule('new-b'), rule('edit', { tools: ['a', 'b'] }), rule('keep'), rule('new-a', { effect: 'deny' })],
    };
    expect(diffPolicies(before, after)).toEqual({
      settings: [],
      added: [rule('new-a', { effect: 'deny' }), rule('new-b')],
      removed: [rule('a-drop'), rule('z-drop')],
      changed: [{ id: 'edit', before: rule('edit', { tools: ['a'] }), after: rule('edit', { tools: ['a', 'b'] }) }],
    });
  });

  it('ignores key order and rule order, but not the order inside a list', () => {
    const written = {
      id: 'r',
      effect: 'deny',
      servers: ['a', 'b'],
      arguments: [{ path: 'x', equals: { p: 1, q: 2 } }],
    } as PolicyRule;
    const reordered = {
      arguments: [{ equals: { q: 2, p: 1 }, path: 'x' }],
      servers: ['a', 'b'],
      effect: 'deny',
      id: 'r',
    } as PolicyRule;
    expect(diffPolicies({ rules: [written, rule('s')] }, { rules: [rule('s'), reordered] })).toEqual({
      settings: [],
      added: [],
      removed: [],
      changed: [],
    });
    const swapped = { ...written, servers: ['b', 'a'] };
    expect(diffPolicies({ rules: [written] }, { rules: [swapped] }).changed.map((change) => change.id)).toEqual(['r']);
  });

  it('reports the document settings, an absent one as null', () => {
    expect(
      diffPolicies({ default: 'allow', rules: [] }, { default: 'deny', on_error: 'approval', rules: [] }).settings,
    ).toEqual([
      { field: 'default', before: 'allow', after: 'deny' },
      { field: 'on_error', before: null, after: 'approval' },
    ]);
    expect(diffPolicies({ on_error: 'deny', rules: [] }, { on_error: 'deny', rules: [] }).settings).toEqual([]);
  });

  it('treats a description edit as a change', () => {
    const diff = diffPolicies({ rules: [rule('r')] }, { rules: [rule('r', { description: 'why' })] });
    expect(diff.changed).toHaveLength(1);
  });
});
