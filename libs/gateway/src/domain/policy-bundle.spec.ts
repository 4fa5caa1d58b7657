import { describe, expect, it } from 'vitest';
import { offlineAction, offlineRule, OFFLINE_MODES } from './policy-bundle';

const EXPIRES = '2026-11-22T11:00:00.000Z';
const before = new Date('2026-11-22T10:59:59.999Z');
const atExpiry = new Date(EXPIRES);
const after = new Date('2026-11-23T11:00:00.000Z');

describe('the offline rule a bundle carries', () => {
  it('spells each mode out: what to do out of contact, and from valid_until on', () => {
    expect(offlineRule('fail_closed', EXPIRES)).toEqual({
      mode: 'fail_closed',
      valid_until: EXPIRES,
      while_unreachable: 'deny',
      after_expiry: 'deny',
    });
    expect(offlineRule('cached', EXPIRES)).toEqual({
      mode: 'cached',
      valid_until: EXPIRES,
      while_unreachable: 'enforce',
      after_expiry: 'deny',
    });
    expect(offlineRule('fail_open', EXPIRES)).toEqual({
      mode: 'fail_open',
      valid_until: EXPIRES,
      while_unreachable: 'allow',
      after_expiry: 'allow',
    });
  });

  it('never enforces a bundle past valid_until, in any mode, in contact or not', () => {
    for (const mode of OFFLINE_MODES) {
      const rule = offlineRule(mode, EXPIRES);
      for (const now of [atExpiry, after])
        for (const inContact of [true, false]) expect(offlineAction(rule, now, inContact)).not.toBe('enforce');
    }
  });

  it('cached: the held bundle stands in while the control plane is away, then every call is denied', () => {
    const rule = offlineRule('cached', EXPIRES);
    expect(offlineAction(rule, before, true)).toBe('enforce');
    expect(offlineAction(rule, before, false)).toBe('enforce');
    expect(offlineAction(rule, atExpiry, false)).toBe('deny');
    expect(offlineAction(rule, after, false)).toBe('deny');
  });

  it('fail_closed denies out of contact at once; fail_open allows; both enforce the bundle in contact', () => {
    expect(offlineAction(offlineRule('fail_closed', EXPIRES), before, true)).toBe('enforce');
    expect(offlineAction(offlineRule('fail_closed', EXPIRES), before, false)).toBe('deny');
    expect(offlineAction(offlineRule('fail_open', EXPIRES), before, true)).toBe('enforce');
    expect(offlineAction(offlineRule('fail_open', EXPIRES), before, false)).toBe('allow');
    expect(offlineAction(offlineRule('fail_open', EXPIRES), after, false)).toBe('allow');
  });
});
