import { DomainError } from '@aileron/errors';

/** How soon a caller refused for want of Redis may try again (Retry-After). */
const REDIS_RETRY_AFTER_SECONDS = 5;

/**
 * What needs Redis answers this, at once, while Redis cannot be reached:
 * a 503 a client may retry, never a request left hanging.
 */
export class RedisUnavailableError extends DomainError {
  constructor(what: string, cause?: unknown) {
    super(
      'REDIS_UNAVAILABLE',
      `${what} needs Redis, which cannot be reached right now; retry in ${REDIS_RETRY_AFTER_SECONDS} s`,
      {
        extensions: { retry_after_seconds: REDIS_RETRY_AFTER_SECONDS },
        cause,
      },
    );
  }
}
