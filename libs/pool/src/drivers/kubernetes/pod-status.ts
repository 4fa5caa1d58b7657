import type { V1Pod } from '@kubernetes/client-node';
import { CONTAINER } from './manifests';

// What the kubelet records of a pod, read for the driver's decisions and, in
// words, for people.

/**
 * Waiting reasons the kubelet reports for a container that will not start
 * without someone changing something: failing now beats a user waiting out the
 * whole start timeout. ErrImagePull is left out: the kubelet retries it, and a
 * lasting failure turns into ImagePullBackOff.
 */
const HOPELESS_WAITING = new Set([
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

export function isReady(pod: V1Pod | undefined): boolean {
  return pod?.status?.phase === 'Running' && (pod.status.conditions ?? []).some((condition) => condition.type === 'Ready' && condition.status === 'True');
}

/** A pod with `restartPolicy: Never` whose container ran to its end, or failed: it never runs again. */
export function hasEnded(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Failed' || phase === 'Succeeded';
}

/** Why the container will not start without someone changing something; undefined while it still may. */
export function hopelessReason(pod: V1Pod): string | undefined {
  const waiting = containerStatus(pod)?.state?.waiting;
  return waiting?.reason && HOPELESS_WAITING.has(waiting.reason) ? joinReason(waiting.reason, waiting.message) : undefined;
}

/**
 * Why a pod ended, from what the kubelet recorded. The container's own
 * termination message is left out: it is whatever the process wrote, and
 * that may be a credential.
 */
export function exitReason(pod: V1Pod): string {
  const phase = pod.status?.phase ?? 'Unknown';
  const terminated = containerStatus(pod)?.state?.terminated;
  if (terminated) {
    const code = terminated.exitCode;
    if (terminated.reason && terminated.reason !== 'Error' && terminated.reason !== 'Completed') {
      return `pod ${phase}: ${terminated.reason} (exit code ${code})`;
    }
    return `pod ${phase}: exited with code ${code}`;
  }
  if (pod.status?.reason) return `pod ${phase}: ${joinReason(pod.status.reason, pod.status.message)}`;
  return `pod ${phase}`;
}

/** What a pod that is not ready yet is waiting for: the container's waiting reason, else why it is not scheduled. */
export function pendingReason(pod: V1Pod | undefined): string {
  if (!pod) return 'no status yet';
  const waiting = containerStatus(pod)?.state?.waiting;
  if (waiting?.reason) return joinReason(waiting.reason, waiting.message);
  const unscheduled = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled' && condition.status === 'False');
  if (unscheduled) return joinReason(unscheduled.reason ?? 'Unschedulable', unscheduled.message);
  const phase = pod.status?.phase ?? 'Pending';
  return phase === 'Running' ? 'Running, readiness probe not passing' : phase;
}

function containerStatus(pod: V1Pod) {
  return pod.status?.containerStatuses?.find((status) => status.name === CONTAINER);
}

function joinReason(reason: string, message: string | undefined): string {
  return message ? `${reason}: ${message}` : reason;
}
