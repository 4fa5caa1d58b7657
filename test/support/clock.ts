import { vi } from 'vitest';
import { Clock } from '../../libs/platform/clock/src';
import type { TestControlPlane } from './control-plane';

/** How far each moved clock runs ahead of the real time. */
const ahead = new WeakMap<Clock, { ms: number }>();

/**
 * Moves a control plane's clock (what its expiry and failure-streak decisions
 * read) `ms` ahead, as if that much time had passed there: a test sets the
 * clock instead of waiting out a real deadline. The clock keeps running.
 */
export function advanceClock(cp: TestControlPlane, ms: number): void {
  const clock = cp.cp.app.get(Clock);
  let offset = ahead.get(clock);
  if (!offset) {
    const moved = { ms: 0 };
    vi.spyOn(clock, 'now').mockImplementation(() => Date.now() + moved.ms);
    ahead.set(clock, (offset = moved));
  }
  offset.ms += ms;
}

/** Back to the real time (for the tests after this one on the same control plane). */
export function resetClock(cp: TestControlPlane): void {
  const clock = cp.cp.app.get(Clock);
  if (!ahead.delete(clock)) return;
  vi.mocked(clock.now).mockRestore();
}
