import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { eventually } from '../../../../test/support/eventually';
import { InProcessQueue } from './in-process.queue';

describe('InProcessQueue', () => {
  it('runs each job id once, retries failures with backoff, and gives up after the attempts', async () => {
    const queue = new InProcessQueue();
    const runs: string[] = [];
    let flaky = 0;
    await queue.startWorkers([
      {
        name: 'test.run',
        payload: z.object({ n: z.number() }),
        handle: async ({ n }, { attempt }) => {
          runs.push(`${n}:${attempt}`);
          if (n === 2 && ++flaky < 3) throw new Error('flaky');
          if (n === 3) throw new Error('always');
        },
      },
    ]);
    await queue.enqueue('test.run', { n: 1 }, { jobId: 'a' });
    await queue.enqueue('test.run', { n: 1 }, { jobId: 'a' }); // duplicate id while queued: ignored
    await queue.enqueue('test.run', { n: 2 }, { jobId: 'b', backoffMs: 5 });
    await queue.enqueue('test.run', { n: 3 }, { jobId: 'c', backoffMs: 5, attempts: 2 });
    // every run there will be: 1 once, 2 until it succeeds on the third, 3 twice
    await eventually('six runs', () => runs.length >= 6);
    expect(runs.filter((r) => r.startsWith('1:'))).toEqual(['1:1']);
    expect(runs.filter((r) => r.startsWith('2:'))).toEqual(['2:1', '2:2', '2:3']);
    expect(runs.filter((r) => r.startsWith('3:'))).toEqual(['3:1', '3:2']);
    await queue.close();
  });

  it('holds jobs until workers start (the control plane registers processors first)', async () => {
    const queue = new InProcessQueue();
    const seen: number[] = [];
    await queue.enqueue('test.later', { n: 7 }, { jobId: 'x' });
    await queue.startWorkers([
      { name: 'test.later', payload: z.object({ n: z.number() }), handle: async ({ n }) => void seen.push(n) },
    ]);
    await eventually('the held job', () => seen.length > 0);
    expect(seen).toEqual([7]);
    await queue.close();
  });
});
