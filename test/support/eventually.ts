import { vi } from 'vitest';

export interface PollOptions {
  /** a bound that only catches a hang, never a speed claim (default 30 s) */
  timeoutMs?: number;
  /** between two probes (default 50 ms) */
  intervalMs?: number;
}

/** What a probe answers while the awaited state has not come yet. */
type NotYet = undefined | null | false;

/**
 * Polls `probe` until it answers something other than undefined, null or
 * false, and returns that. A probe that throws is tried again too (so it may
 * hold `expect`s); at the timeout the last failure is what the test reports,
 * named after `what`.
 */
export async function eventually<T>(
  what: string,
  probe: () => T | Promise<T>,
  options: PollOptions = {},
): Promise<Exclude<T, NotYet>> {
  const { timeoutMs = 30_000, intervalMs = 50 } = options;
  return vi
    .waitFor(
      async () => {
        let value: T;
        try {
          value = await probe();
        } catch (error) {
          throw new Error(`timed out waiting for ${what}: ${error instanceof Error ? error.message : String(error)}`, {
            cause: error,
          });
        }
        if (value === undefined || value === null || value === false) throw new Error(`timed out waiting for ${what}`);
        return value as Exclude<T, NotYet>;
      },
      { timeout: timeoutMs, interval: intervalMs },
    )
    .catch((error: unknown) => {
      // a probe still running at the timeout leaves vi.waitFor nothing to name
      throw error instanceof Error && error.message.startsWith('timed out waiting for')
        ? error
        : new Error(`timed out waiting for ${what} (${timeoutMs} ms)`, { cause: error });
    });
}
