import { Logger } from '@nestjs/common';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { RedisUnavailableError } from '@aileron/redis';
import { eventually } from '../../../../test/support/eventually';
import { InProcessQueue } from './in-process.queue';

const unreachable = () => Object.assign(new Error("Can't reach database server at 127.0.0.1:5432"), { code: 'P1001' });

/** A queue whose one job fails with `failure()` on its first `failing` attempts; returns the queue's warn lines once it succeeded. */
async function warningsOfAJobFailing(failing: number, failure: () => Error): Promise<unknown[][]> {
  const warn = vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  const queue = new InProcessQueue();
  let runs = 0;
  let done = false;
  await queue.startWorkers([
    {
      name: 'test.flaky',
      payload: z.object({}),
      handle: async () => {
        if (++runs <= failing) throw failure();
        done = true;
      },
    },
  ]);
  await queue.enqueue('test.flaky', {}, { jobId: 'flaky', attempts: failing + 1, backoffMs: 1 });
  await eventually('the job to succeed', () => done);
  await queue.close();
  return warn.mock.calls;
}

describe('failed job attempts in the log', () => {
  afterEach(() => vi.restoreAllMocks());

  it('say a database outage in one line, not one per attempt', async () => {
    const lines = await warningsOfAJobFailing(6, unreachable);
    expect(lines).toEqual([
      [expect.stringMatching(/^job attempts failed; will retry: the database is unavailable \(.*P1001.*\)/)],
    ]);
  });

  it('leave Redis being away to RedisService, which says it once', async () => {
    expect(await warningsOfAJobFailing(3, () => new RedisUnavailableError('Publishing an event'))).toEqual([]);
  });

  it('log any other failure in full, every attempt', async () => {
    const lines = await warningsOfAJobFailing(2, () => new TypeError('x is undefined'));
    expect(lines).toEqual([
      [
        { job: 'test.flaky', jobId: 'flaky', attempt: 1, retryInMs: 1, err: expect.any(TypeError) },
        'job failed, will retry',
      ],
      [
        { job: 'test.flaky', jobId: 'flaky', attempt: 2, retryInMs: 2, err: expect.any(TypeError) },
        'job failed, will retry',
      ],
    ]);
  });
});
