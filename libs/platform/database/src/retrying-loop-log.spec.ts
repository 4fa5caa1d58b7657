import { afterEach, describe, expect, it, vi } from 'vitest';
import { RetryingLoopLog } from './retrying-loop-log';

const unreachable = Object.assign(new Error("Can't reach database server at 127.0.0.1:5432"), { code: 'P1001' });

describe('RetryingLoopLog', () => {
  afterEach(() => vi.useRealTimers());

  it('says a database outage once a minute per loop, in one line without a stack', () => {
    vi.useFakeTimers({ now: new Date('2026-11-26T12:00:00Z') });
    const lines: unknown[][] = [];
    const log = new RetryingLoopLog({ warn: (...args: unknown[]) => lines.push(args) }, 'outbox sweep');
    for (let pass = 0; pass <= 300; pass++) {
      log.failed(unreachable);
      vi.advanceTimersByTime(200);
    }
    // a pass every 200 ms for a minute: the first pass and the one a minute later say it
    expect(lines).toHaveLength(2);
    expect(lines[0]).toEqual([
      expect.stringMatching(/^outbox sweep failed; will retry: the database is unavailable \(.*P1001.*\)/),
    ]);
  });

  it('logs any other failure in full, every time', () => {
    const lines: unknown[][] = [];
    const log = new RetryingLoopLog({ warn: (...args: unknown[]) => lines.push(args) }, 'audit sweep');
    const bug = new TypeError('x is undefined');
    log.failed(bug);
    log.failed(bug);
    expect(lines).toEqual([
      [{ err: bug }, 'audit sweep failed; will retry'],
      [{ err: bug }, 'audit sweep failed; will retry'],
    ]);
  });
});
