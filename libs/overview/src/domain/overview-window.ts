import type { CallCounts } from '@aileron/audit';

/** The spans the overview shows, each cut into buckets the database counts calls in. */
export const OVERVIEW_WINDOWS = {
  '1h': { buckets: 60, bucketSeconds: 60 },
  '1d': { buckets: 24, bucketSeconds: 3600 },
} as const;
export type OverviewWindow = keyof typeof OVERVIEW_WINDOWS;

export interface Bucket {
  /** ms since the epoch */
  start: number;
  calls: number;
  allowed: number;
  denied: number;
  approval: number;
}

/**
 * The window's range as of `now` (ms): whole buckets, the last one the
 * bucket `now` is in (so the current minute or hour shows as it fills).
 */
export function windowRange(window: OverviewWindow, now: number): { from: Date; to: Date; bucketSeconds: number } {
  const { buckets, bucketSeconds } = OVERVIEW_WINDOWS[window];
  const size = bucketSeconds * 1000;
  const last = Math.floor(now / size) * size;
  return { from: new Date(last - (buckets - 1) * size), to: new Date(last + size), bucketSeconds };
}

/** Every bucket of the range, those without a call at zero: a chart's x axis does not skip quiet minutes. */
export function fillBuckets(range: { from: Date; to: Date; bucketSeconds: number }, counts: CallCounts[]): Bucket[] {
  const byStart = new Map(counts.map((c) => [c.start, c]));
  const size = range.bucketSeconds * 1000;
  const buckets: Bucket[] = [];
  for (let start = range.from.getTime(); start < range.to.getTime(); start += size) {
    const c = byStart.get(start);
    const calls = c?.calls ?? 0;
    const denied = c?.denied ?? 0;
    const approval = c?.approval ?? 0;
    buckets.push({ start, calls, allowed: calls - denied - approval, denied, approval });
  }
  return buckets;
}
