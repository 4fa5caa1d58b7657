import { databaseUnavailableReason, RetryingLoopLog } from '@aileron/database';
import { RedisUnavailableError } from '@aileron/redis';

/** The part of a Nest logger a queue's failures go to. */
interface QueueLogger {
  warn(message: unknown, ...rest: unknown[]): void;
  debug(message: unknown, ...rest: unknown[]): void;
}

/**
 * How a failed job attempt that will be retried is logged. While the
 * database is away every job fails the same way on every attempt: that is one
 * line a minute for the whole queue (RetryingLoopLog), naming the reason,
 * instead of a stack trace per attempt that buries everything else. Redis
 * being away is RedisService's to say, once per outage. Any other failure is
 * logged in full, every time; so is a job that gives up (the caller's).
 */
export class JobFailureLog {
  private readonly outage: RetryingLoopLog;

  constructor(private readonly logger: QueueLogger) {
    this.outage = new RetryingLoopLog(logger, 'job attempts');
  }

  attemptFailed(
    fields: { job: string; jobId?: string; attempt?: number; retryInMs?: number },
    error: unknown,
    message: string,
  ): void {
    if (error instanceof RedisUnavailableError) this.logger.debug(`${message} (${fields.job}): ${error.message}`);
    else if (databaseUnavailableReason(error)) this.outage.failed(error);
    else this.logger.warn({ ...fields, err: error }, message);
  }
}
