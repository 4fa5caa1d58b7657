import { describe, expect, it } from 'vitest';
import { Clock } from '@aileron/clock';
import { NextDue } from './next-due';

class SetClock extends Clock {
  time = Date.parse('2026-11-29T12:00:00Z');
  override now(): number {
    return this.time;
  }
}

const BACKSTOP = 30_000;

describe('NextDue', () => {
  function setUp() {
    const clock = new SetClock();
    const gate = new NextDue(clock, BACKSTOP);
    let looks = 0;
    let inData: Date | null = null;
    const tick = () =>
      gate.run(async () => {
        looks++;
        return inData;
      });
    return {
      clock,
      gate,
      tick,
      looks: () => looks,
      holds: (at: Date | null) => (inData = at),
      at: (ms: number) => new Date(clock.time + ms),
    };
  }

  it('looks at the first tick, then not again until the earliest deadline it found has passed', async () => {
    const { clock, tick, looks, holds, at } = setUp();
    holds(at(10_000));
    await tick();
    expect(looks()).toBe(1);
    clock.time += 9_999;
    await tick();
    expect(looks()).toBe(1);
    clock.time += 1;
    await tick();
    expect(looks()).toBe(2);
  });

  it('with nothing due in the data, looks once a backstop for what other processes wrote', async () => {
    const { clock, tick, looks } = setUp();
    await tick();
    for (let i = 0; i < 14; i++) {
      clock.time += 2_000;
      await tick();
    }
    expect(looks()).toBe(1);
    clock.time += 2_000;
    await tick();
    expect(looks()).toBe(2);
  });

  it('looks at a deadline this process wrote, also one told while a look was under way', async () => {
    const { clock, gate, looks, at } = setUp();
    await gate.run(async () => null);
    gate.expect(at(5_000));
    clock.time += 5_000;
    expect(gate.due).toBe(true);

    // a look whose query read before a commit that was told during it keeps what it was told
    await gate.run(async () => {
      gate.expect(at(3_000));
      return null;
    });
    clock.time += 2_999;
    expect(gate.due).toBe(false);
    clock.time += 1;
    expect(gate.due).toBe(true);
    expect(looks()).toBe(0);
  });

  it('stays due after a look that failed, and a clock moved past a deadline makes it due', async () => {
    const { clock, gate, tick, looks, holds, at } = setUp();
    await expect(gate.run(() => Promise.reject(new Error('the database is away')))).rejects.toThrow();
    expect(gate.due).toBe(true);
    holds(at(3_600_000));
    await tick();
    expect(gate.due).toBe(false);
    clock.time += 3_600_000;
    await tick();
    expect(looks()).toBe(2);
  });
});
