import { databaseUnavailableReason } from './prisma-errors';

/** The part of a Nest logger a loop's failures go to. */
interface WarnLogger {
  warn(message: unknown, ...rest: unknown[]): void;
}

const QUIET_MS = 60_000;

/**
 * The failures of work that retries by itself outside a PeriodicTask (the
 * queue's job attempts, a write retried until it lands). While the database
 * is away every attempt fails the same way: that is one line a minute,
 * naming the reason, instead of a stack trace per attempt that buries
 * everything else in the log. Any other failure is logged in full.
 */
export class RetryingLoopLog {
  private quietUntil = 0;

  constructor(
    private readonly logger: WarnLogger,
    private readonly what: string,
  ) {}

  failed(error: unknown): void {
    const reason = databaseUnavailableReason(error);
    if (!reason) {
      this.logger.warn({ err: error }, `${this.what} failed; will retry`);
      return;
    }
    // a rate for the log, not a time anyone reads: monotonic, so a clock step cannot silence it
    const now = performance.now();
    if (now < this.quietUntil) return;
    this.quietUntil = now + QUIET_MS;
    this.logger.warn(
      `${this.what} failed; will retry: the database is unavailable (${reason}); said again in a minute if it still is`,
    );
  }
}
