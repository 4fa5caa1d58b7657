import { describe, expect, it } from 'vitest';
import { fillBuckets, windowRange } from './overview-window';

const at = (iso: string) => new Date(iso).getTime();

describe('the overview window', () => {
  it('ends with the bucket now is in, and holds whole buckets', () => {
    const hour = windowRange('1h', at('2030-06-01T12:34:56.789Z'));
    expect(hour).toEqual({
      from: new Date('2030-06-01T11:35:00.000Z'),
      to: new Date('2030-06-01T12:35:00.000Z'),
      bucketSeconds: 60,
    });
    const day = windowRange('1d', at('2030-06-01T12:34:56.789Z'));
    expect(day).toEqual({
      from: new Date('2030-05-31T13:00:00.000Z'),
      to: new Date('2030-06-01T13:00:00.000Z'),
      bucketSeconds: 3600,
    });
  });

  it('fills quiet buckets with zeros and tells allowed calls from denied and held ones', () => {
    const range = windowRange('1h', at('2030-06-01T12:34:56.789Z'));
    const buckets = fillBuckets(range, [
      { start: at('2030-06-01T12:00:00.000Z'), calls: 5, denied: 2, approval: 1 },
      { start: at('2030-06-01T12:34:00.000Z'), calls: 1, denied: 0, approval: 0 },
    ]);
    expect(buckets).toHaveLength(60);
    expect(buckets[0]!.start).toBe(at('2030-06-01T11:35:00.000Z'));
    expect(buckets.find((b) => b.start === at('2030-06-01T12:00:00.000Z'))).toEqual({
      start: at('2030-06-01T12:00:00.000Z'),
      calls: 5,
      allowed: 2,
      denied: 2,
      approval: 1,
    });
    expect(buckets[59]).toMatchObject({ start: at('2030-06-01T12:34:00.000Z'), calls: 1, allowed: 1 });
    expect(buckets.reduce((n, b) => n + b.calls, 0)).toBe(6);
  });
});
