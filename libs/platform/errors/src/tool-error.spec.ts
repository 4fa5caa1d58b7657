import { describe, expect, it } from 'vitest';
import { toolError, toolErrorOf } from './tool-error';

describe('toolError', () => {
  it('puts the code before the text and, with the message and details, in _meta', () => {
    const result = toolError('POLICY_DENIED', 'Denied by policy (rule r1)', { rules: ['r1'] });
    expect(result).toEqual({
      content: [{ type: 'text', text: 'POLICY_DENIED: Denied by policy (rule r1)' }],
      _meta: { 'aileron/refusal': { code: 'POLICY_DENIED', message: 'Denied by policy (rule r1)', rules: ['r1'] } },
      isError: true,
    });
    expect(toolErrorOf(result)).toEqual({
      code: 'POLICY_DENIED',
      message: 'Denied by policy (rule r1)',
      rules: ['r1'],
    });
  });

  it('never sends a code outside the convention, and a detail cannot replace the code', () => {
    expect(toolErrorOf(toolError('not a code', 'x'))!.code).toBe('TOOL_ERROR');
    expect(toolErrorOf(toolError('ENOENT', 'x', { code: 'OTHER' }))!.code).toBe('ENOENT');
    expect(toolErrorOf({ content: [], isError: false })).toBeUndefined();
  });
});
