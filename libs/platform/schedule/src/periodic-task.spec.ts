import { describe, expect, it } from 'vitest';
import { Clock } from '@aileron/clock';
import { PeriodicTask, type TaskLogger } from './periodic-task';

/** A clock whose time moves only when told: a pause ends when advance() passes its end, or when its signal aborts. */
class FakeClock extends Clock {
  private time = Date.parse('2026-11-26T12:00:00Z');
  private sleepers: { until: number; wake: () => void }[] = [];

  override now(): number {
    return this.time;
  }

  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const sleeper = { until: this.time + ms, wake: () => resolve() };
      this.sleepers.push(sleeper);
      signal?.addEventListener('abort', () => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        resolve();
      });
    });
  }

  /** Moves the time on, waking each pause that ends meanwhile and letting what it starts run, in order. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      await settle();
      const next = this.sleepers.filter((s) => s.until <= end).sort((a, b) => a.until - b.until)[0];
      if (!next) break;
      this.time = next.until;
      this.sleepers = this.sleepers.filter((s) => s !== next);
      next.wake();
    }
    this.time = end;
    await settle();
  }

  get pauses(): number {
    return this.sleepers.length;
  }
}

/** Lets every promise chain that can go on do so (no timers involved). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** A run whose end the test decides. */
function controllable() {
  const runs: { end: (error?: Error) => void }[] = [];
  const run = () =>
    new Promise<void>((resolve, reject) => {
      runs.push({ end: (error) => (error ? reject(error) : resolve()) });
    });
  return { runs, run };
}

function aLogger() {
  const lines: { level: 'log' | 'warn' | 'debug'; args: unknown[] }[] = [];
  const logger: TaskLogger = {
    log: (...args) => lines.push({ level: 'log', args }),
    warn: (...args) => lines.push({ level: 'warn', args }),
    debug: (...args) => lines.push({ level: 'debug', args }),
  };
  return { lines, logger };
}

const unreachable = Object.assign(new Error("Can't reach database server at 127.0.0.1:5432"), { code: 'P1001' });

describe('PeriodicTask', () => {
  it('never overlaps itself: a slow run holds back the next, which comes a whole interval after it ended', async () => {
    const clock = new FakeClock();
    const { runs, run } = controllable();
    const task = new PeriodicTask({ name: 'sweep', everyMs: 1000, run, clock, logger: aLogger().logger });
    task.start();
    await clock.advance(999);
    expect(runs).toHaveLength(0);
    await clock.advance(1);
    expect(runs).toHaveLength(1);
    // ten intervals pass while the first run is still under way: no second run
    await clock.advance(10_000);
    expect(runs).toHaveLength(1);
    runs[0]!.end();
    await clock.advance(999);
    expect(runs).toHaveLength(1);
    await clock.advance(1);
    expect(runs).toHaveLength(2);
    runs[1]!.end();
    await task.stop();
  });

  it('runNow runs at once, or once more right after the run under way however often it is asked', async () => {
    const clock = new FakeClock();
    const { runs, run } = controllable();
    const task = new PeriodicTask({ name: 'sweep', everyMs: 60_000, run, clock, logger: aLogger().logger });
    task.runNow();
    await settle();
    // not started: nothing
    expect(runs).toHaveLength(0);
    task.start();
    task.runNow();
    await settle();
    expect(runs).toHaveLength(1);
    task.runNow();
    task.runNow();
    task.runNow();
    await settle();
    expect(runs).toHaveLength(1);
    runs[0]!.end();
    await settle();
    expect(runs).toHaveLength(2);
    runs[1]!.end();
    await settle();
    // and then the interval again
    expect(runs).toHaveLength(2);
    await clock.advance(60_000);
    expect(runs).toHaveLength(3);
    runs[2]!.end();
    await task.stop();
  });

  it('stop waits for the run under way and starts no other; its pauses end with it', async () => {
    const clock = new FakeClock();
    const { runs, run } = controllable();
    const task = new PeriodicTask({ name: 'sweep', everyMs: 1000, run, clock, logger: aLogger().logger });
    task.start();
    await clock.advance(1000);
    expect(runs).toHaveLength(1);
    let stopped = false;
    const stopping = task.stop().then(() => (stopped = true));
    await clock.advance(5000);
    expect(stopped, 'stop() resolved while a run was under way').toBe(false);
    runs[0]!.end();
    await stopping;
    expect(task.running).toBe(false);
    await clock.advance(10_000);
    expect(runs).toHaveLength(1);
    task.start();
    task.runNow();
    await settle();
    expect(runs).toHaveLength(1);

    // stopped in a pause: at once, nothing left waiting
    const idle = new PeriodicTask({ name: 'idle', everyMs: 1000, run, clock, logger: aLogger().logger });
    idle.start();
    expect(clock.pauses).toBe(1);
    await idle.stop();
    expect(clock.pauses).toBe(0);
  });

  it('logs an outage once, in one line for the database, and its end with how long it lasted', async () => {
    const clock = new FakeClock();
    const { lines, logger } = aLogger();
    let failure: Error | null = unreachable;
    const task = new PeriodicTask({
      name: 'approval expiry sweep',
      everyMs: 2000,
      clock,
      logger,
      run: () => {
        if (failure) throw failure;
      },
    });
    task.start();
    // a minute of failing runs, one every 2 s
    await clock.advance(60_000);
    expect(lines).toEqual([
      {
        level: 'warn',
        args: [
          expect.stringMatching(
            /^approval expiry sweep failed: the database is unavailable \(.*P1001.*\); retried every 2 s; its return is logged$/,
          ),
        ],
      },
    ]);
    failure = null;
    await clock.advance(2000);
    expect(lines.slice(1)).toEqual([
      { level: 'log', args: ['approval expiry sweep works again after 60 s (30 failed runs)'] },
    ]);

    // another kind of failure, another outage: logged with its error, once
    const bug = new TypeError('x is undefined');
    failure = bug;
    await clock.advance(10_000);
    expect(lines.slice(2)).toEqual([
      { level: 'warn', args: [{ err: bug }, 'approval expiry sweep failed; retried every 2 s; its return is logged'] },
    ]);
    failure = null;
    await clock.advance(2000);
    expect(lines.slice(3)).toEqual([
      { level: 'log', args: ['approval expiry sweep works again after 10 s (5 failed runs)'] },
    ]);
    await task.stop();
  });

  it('an expected failure (said elsewhere) is a debug line, not an outage', async () => {
    const clock = new FakeClock();
    const { lines, logger } = aLogger();
    class Away extends Error {}
    let fail = true;
    const task = new PeriodicTask({
      name: 'webhook sweep',
      everyMs: 1000,
      clock,
      logger,
      expected: (error) => error instanceof Away,
      run: () => {
        if (fail) throw new Away('Redis is away');
      },
    });
    task.start();
    await clock.advance(3000);
    fail = false;
    await clock.advance(1000);
    expect(lines.map((l) => l.level)).toEqual(['debug', 'debug', 'debug']);
    await task.stop();
  });
});
