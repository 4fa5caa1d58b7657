import { describe, expect, it } from 'vitest';
import { pauseReason } from './endpoint-health';

const policy = { pauseAfterSeconds: 86_400, pauseAfterFailedDeliveries: 20 };
const now = new Date('2026-11-24T12:00:00.000Z');
const ago = (seconds: number): Date => new Date(now.getTime() - seconds * 1000);

describe('pausing an endpoint that keeps failing', () => {
  it('keeps trying while the streak is short and few deliveries failed', () => {
    expect(pauseReason({ failingSince: ago(3600), failedDeliveries: 19 }, now, policy)).toBeNull();
    expect(pauseReason({ failingSince: ago(86_400), failedDeliveries: 0 }, now, policy)).toBeNull();
  });

  it('pauses after failing for longer than the setting, naming since when', () => {
    expect(pauseReason({ failingSince: ago(86_401), failedDeliveries: 0 }, now, policy)).toMatch(
      /since 2026-11-23T11:59:59.000Z \(longer than 86400 s\)/,
    );
  });

  it('pauses after that many deliveries in a row failed, however recent the streak', () => {
    expect(pauseReason({ failingSince: ago(60), failedDeliveries: 20 }, now, policy)).toBe(
      '20 deliveries in a row failed',
    );
  });
});
