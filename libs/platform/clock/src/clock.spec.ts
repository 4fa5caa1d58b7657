import { afterEach, describe, expect, it, vi } from 'vitest';
import { Clock } from './clock';

describe('Clock.sleep', () => {
  afterEach(() => vi.useRealTimers());

  it('resolves after its time, or at once when its signal aborts, and never rejects', async () => {
    vi.useFakeTimers();
    const clock = new Clock();
    let slept = false;
    void clock.sleep(1000).then(() => (slept = true));
    await vi.advanceTimersByTimeAsync(999);
    expect(slept).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(slept).toBe(true);

    const abort = new AbortController();
    let woken = false;
    // the worker's other timers (a control plane another file shares) are faked too: follow this sleep's own
    const set = vi.spyOn(globalThis, 'setTimeout');
    const cleared = vi.spyOn(globalThis, 'clearTimeout');
    void clock.sleep(60_000, abort.signal).then(() => (woken = true));
    const timer = set.mock.results.at(-1)!.value as unknown;
    abort.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(woken).toBe(true);
    expect(cleared).toHaveBeenCalledWith(timer);
    set.mockRestore();
    cleared.mockRestore();
    await expect(clock.sleep(60_000, abort.signal)).resolves.toBeUndefined();
  });
});
