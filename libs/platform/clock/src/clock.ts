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
}
