/**
 * What a client waits at most for any answer while a dependency is away
 * (issue 22 promises 2 s for a request and 1 s for /readyz; generous, as the
 * machines the tests run on are shared).
 */
export const BOUND_MS = 3_000;

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
