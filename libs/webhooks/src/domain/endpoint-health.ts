/**
 * When an endpoint that keeps failing is paused. A receiver that is down for
 * a day, or has refused many deliveries in a row, is not coming back by
 * itself: retrying only piles up work and log rows, so deliveries stop until
 * someone resumes the endpoint.
 */
export interface PausePolicy {
  /** failing without a success in between for longer than this */
  pauseAfterSeconds: number;
  /** this many deliveries in a row failed for good */
  pauseAfterFailedDeliveries: number;
}

export interface FailureState {
  failingSince: Date;
  /** deliveries that failed for good since failingSince */
  failedDeliveries: number;
}

/** Why the endpoint should be paused now, or null to keep trying. */
export function pauseReason(state: FailureState, now: Date, policy: PausePolicy): string | null {
  const failingMs = now.getTime() - state.failingSince.getTime();
  if (failingMs > policy.pauseAfterSeconds * 1000) {
    return `deliveries have failed since ${state.failingSince.toISOString()} (longer than ${policy.pauseAfterSeconds} s)`;
  }
  if (state.failedDeliveries >= policy.pauseAfterFailedDeliveries) {
    return `${state.failedDeliveries} deliveries in a row failed`;
  }
  return null;
}
