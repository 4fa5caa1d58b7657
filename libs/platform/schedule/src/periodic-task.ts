import { Clock } from '@aileron/clock';
import { databaseUnavailableReason } from '@aileron/database';

/** The part of a Nest logger a task's failures go to. */
export interface TaskLogger {
  log(message: unknown, ...rest: unknown[]): void;
  warn(message: unknown, ...rest: unknown[]): void;
  debug(message: unknown, ...rest: unknown[]): void;
}

export interface PeriodicTaskOptions {
  /** what the log lines call it: "approval expiry sweep" */
  name: string;
  /** the pause from the end of one run to the start of the next */
  everyMs: number;
  /** one pass; a rejection is a failed run, retried at the next one */
  run: () => unknown;
  logger: TaskLogger;
  /** whose time the pauses and the outage's length are read from (default: the system's) */
  clock?: Clock;
  /** the pause before the first run (default everyMs) */
  firstAfterMs?: number;
  /** failures another part already reports (Redis away: RedisService says so once): debug lines, not an outage of this task */
  expected?: (error: unknown) => boolean;
}

/**
 * A pass that repeats in the background (a sweep, a catch-up, a probe), the
 * same way everywhere:
 *
 * - single-flight: the next run starts `everyMs` after the previous one
 *   ended, never while it is under way, however slow it is;
 * - `runNow()` runs it at once, or once more right after the run under way
 *   (several calls meanwhile make one run): for "something changed, look";
 * - a failing run is retried at the next one; the first failure of a streak
 *   is logged (a database outage in one line, naming the reason; anything
 *   else with its error), the rest of the streak is not, and its end is: an
 *   outage of a minute is two lines, not thirty stack traces;
 * - `stop()` ends it and waits for the run under way (shutdown);
 * - its pauses never keep the process alive on their own.
 */
export class PeriodicTask {
  private readonly clock: Clock;
  private loop: Promise<void> | undefined;
  private stopped = false;
  /** aborted to end the current pause early (runNow, stop) */
  private wake: AbortController | undefined;
  private again = false;
  private failing: { since: number; runs: number } | undefined;

  constructor(private readonly options: PeriodicTaskOptions) {
    this.clock = options.clock ?? new Clock();
  }

  /** Started and not stopped: its runs are coming. */
  get running(): boolean {
    return this.loop !== undefined && !this.stopped;
  }

  /** Starts the runs, once; a no-op after stop(). */
  start(): void {
    if (this.loop !== undefined || this.stopped) return;
    this.loop = this.repeat();
  }

  /** A run now, or right after the one under way. Before start() or after stop(), nothing. */
  runNow(): void {
    if (!this.running) return;
    this.again = true;
    this.wake?.abort();
  }

  /** No run starts after this; resolves once the run under way (if any) has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.abort();
    await this.loop;
  }

  private async repeat(): Promise<void> {
    let pause = this.options.firstAfterMs ?? this.options.everyMs;
    while (!this.stopped) {
      if (!this.again) {
        this.wake = new AbortController();
        await this.clock.sleep(pause, this.wake.signal);
        if (this.stopped) return;
      }
      this.again = false;
      await this.runOnce();
      pause = this.options.everyMs;
    }
  }

  private async runOnce(): Promise<void> {
    try {
      await this.options.run();
    } catch (error) {
      this.failed(error);
      return;
    }
    if (this.failing === undefined) return;
    const { since, runs } = this.failing;
    this.failing = undefined;
    this.options.logger.log(
      `${this.options.name} works again after ${Math.round((this.clock.now() - since) / 1000)} s (${runs} failed ${runs === 1 ? 'run' : 'runs'})`,
    );
  }

  private failed(error: unknown): void {
    const { name, logger, expected } = this.options;
    if (expected?.(error)) {
      logger.debug(`${name} failed: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    if (this.failing !== undefined) {
      this.failing.runs++;
      return;
    }
    this.failing = { since: this.clock.now(), runs: 1 };
    const retry = `retried every ${this.options.everyMs / 1000} s; its return is logged`;
    const reason = databaseUnavailableReason(error);
    if (reason) logger.warn(`${name} failed: the database is unavailable (${reason}); ${retry}`);
    else logger.warn({ err: error }, `${name} failed; ${retry}`);
  }
}
