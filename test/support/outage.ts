/**
 * What a client waits at most for any answer while a dependency is away. The
 * product answers within 2 s (1 s for /readyz), and the figures the outage
 * tests print say how fast it was; the bound itself only tells an answer from
 * a hang (a connect the kernel retries for minutes, a query waiting out its
 * 30 s timeout), so a loaded shared machine never fails it by being slow.
 */
export const BOUND_MS = 10_000;

/** `promise`, or a rejection once a client would have given up on it: a hang fails the test instead of stalling it. */
export function bounded<T>(promise: Promise<T>, ms = BOUND_MS, what = 'an answer'): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms)),
  );
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** How long `run` took to settle, in ms, with what it gave. */
export async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await run();
  return { value, ms: performance.now() - started };
}
