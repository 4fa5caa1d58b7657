import { describe, expect, it } from 'vitest';
import { bounded } from './bounded';

describe('bounded', () => {
  it("gives the check's answer when it comes in time", async () => {
    expect(await bounded(async () => true, 1000)).toBe(true);
    expect(await bounded(async () => false, 1000)).toBe(false);
  });

  it('is false when the check fails', async () => {
    expect(await bounded(() => Promise.reject(new Error('ECONNREFUSED')), 1000)).toBe(false);
  });

  it('is false once the time is up, whatever the check does after', async () => {
    const started = performance.now();
    expect(await bounded(() => new Promise<boolean>(() => {}), 50)).toBe(false);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
