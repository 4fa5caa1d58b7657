import { describe, expect, it } from 'vitest';
import type { PolicyDocument } from './policy-document';
import { SharedPolicies } from './shared-policies';

const TEMPLATE: PolicyDocument = { rules: [{ id: 'no-deletes', effect: 'deny', tools: ['delete_*'] }] };
const call = (tool: string) => ({ server: 'github', tool });

describe('SharedPolicies', () => {
  it('compiles a document once for every workspace enforcing it under the same default', () => {
    const policies = new SharedPolicies();
    // each workspace's document arrives as its own parsed copy
    const first = policies.of('sha256:template', structuredClone(TEMPLATE), 'allow');
    const second = policies.of('sha256:template', structuredClone(TEMPLATE), 'allow');
    expect(second).toBe(first);
    expect(second.compiled).toBe(first.compiled);
    expect(policies.size).toBe(1);
    expect(second.compiled.evaluate(call('delete_repo')).decision).toBe('deny');
    expect(second.compiled.evaluate(call('list_repos')).decision).toBe('allow');
  });

  it('keeps documents and defaults apart: a workspace decides by its own', () => {
    const policies = new SharedPolicies();
    const allowing = policies.of('sha256:template', TEMPLATE, 'allow');
    const denying = policies.of('sha256:template', TEMPLATE, 'deny');
    const other = policies.of('sha256:empty', { rules: [] }, 'allow');
    expect(new Set([allowing, denying, other]).size).toBe(3);
    expect(allowing.compiled.evaluate(call('list_repos')).decision).toBe('allow');
    expect(denying.compiled.evaluate(call('list_repos')).decision).toBe('deny');
    expect(other.compiled.evaluate(call('delete_repo')).decision).toBe('allow');
  });
});
