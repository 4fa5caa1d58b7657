import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SANDBOX_CAVEAT_NAME } from '@aileron/sessions/caveat-token';
import { sandboxSlug } from './slug';

describe('sandboxSlug', () => {
  it('property: every slug it makes is a name a session caveat accepts, and every such name is its own slug', () => {
    const names = fc.oneof(fc.string({ maxLength: 100 }), fc.stringMatching(/^[A-Za-z0-9 _.-]{0,80}$/));
    fc.assert(
      fc.property(names, (name) => {
        const slug = sandboxSlug(name);
        if (slug !== '') expect(slug).toMatch(SANDBOX_CAVEAT_NAME);
        if (SANDBOX_CAVEAT_NAME.test(name)) expect(slug).toBe(name);
      }),
      { numRuns: 20_000 },
    );
    expect(SANDBOX_CAVEAT_NAME.test('a--b')).toBe(false);
    expect(SANDBOX_CAVEAT_NAME.test('x'.repeat(64))).toBe(false);
  });
});
