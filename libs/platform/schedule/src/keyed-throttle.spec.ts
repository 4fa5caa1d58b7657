import { describe, expect, it } from 'vitest';
import { Clock } from '@aileron/clock';
import { KeyedThrottle } from './keyed-throttle';

class SetClock extends Clock {
  time = Date.parse('2026-11-29T12:00:00Z');
  override now(): number {
    return this.time;
  }
}

const MINUTE = 60_000;

describe('a keyed throttle (last-seen writes of gateways and sandboxes)', () => {
  it('allows each key once per interval, and again once the interval has passed', () => {
    const clock = new SetClock();
    const throttle = new KeyedThrottle(clock, MINUTE);
    expect(throttle.due('gw-1')).toBe(true);
    expect(throttle.due('gw-1')).toBe(false);
    expect(throttle.due('gw-2')).toBe(true);
    clock.time += MINUTE - 1;
    expect(throttle.due('gw-1')).toBe(false);
    clock.time += 1;
    expect(throttle.due('gw-1')).toBe(true);
    expect(throttle.due('gw-1')).toBe(false);
  });

  it('remembers only the keys of the last interval, however many keys it has seen', () => {
    const clock = new SetClock();
    const throttle = new KeyedThrottle(clock, MINUTE);
    // 10,000 gateways poll over ten minutes, a thousand a minute
    for (let minute = 0; minute < 10; minute++) {
      for (let g = 0; g < 1_000; g++) {
        expect(throttle.due(`gw-${minute * 1_000 + g}`)).toBe(true);
        clock.time += MINUTE / 1_000;
      }
      expect(throttle.size).toBeLessThanOrEqual(1_000);
    }
    // the first ones come back: due again, and nothing of them was kept meanwhile
    expect(throttle.due('gw-0')).toBe(true);
    expect(throttle.due('gw-9999')).toBe(false);
  });

  it('past its bound forgets the oldest key first, which then only costs that key an early write', () => {
    const clock = new SetClock();
    const throttle = new KeyedThrottle(clock, MINUTE, 3);
    for (const key of ['a', 'b', 'c']) {
      expect(throttle.due(key)).toBe(true);
      clock.time += 1_000;
    }
    expect(throttle.due('d')).toBe(true);
    expect(throttle.size).toBe(3);
    // 'a', the oldest, was dropped; the others are still held back
    expect(throttle.due('b')).toBe(false);
    expect(throttle.due('c')).toBe(false);
    expect(throttle.due('d')).toBe(false);
    expect(throttle.due('a')).toBe(true);
    expect(throttle.due('a')).toBe(false);
  });
});
