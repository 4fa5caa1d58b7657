import { Injectable } from '@nestjs/common';

/**
 * The time that expiry and backoff decisions read: when a token, an approval
 * or a session lapses, and how long an endpoint has been failing. One
 * injectable instance, so a test moves it instead of waiting out a real
 * deadline; everywhere else it is the system clock.
 */
@Injectable()
export class Clock {
  /** milliseconds since the epoch, as Date.now() */
  now(): number {
    return Date.now();
  }

  date(): Date {
    return new Date(this.now());
  }

  /**
   * Resolves after `ms`, or at once when `signal` aborts (never rejects: the
   * caller looks at the signal). The timer alone never keeps the process
   * alive: a pause in a loop must not hold up an exit.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      timer.unref();
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
