import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';

// What the kubelet records of a pod, read for the drivers' decisions and, in
// words, for people. A pod of several containers is read container by
// container, and the words name the container.

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
  return (
    pod?.status?.phase === 'Running' &&
    (pod.status.conditions ?? []).some((condition) => condition.type === 'Ready' && condition.status === 'True')
  );
}

/**
 * A pod with `restartPolicy: Never` that never runs whole again: it ran to its
 * end or failed, or one of its containers ended while another still runs
 * (the phase stays Running then, the pod is not Ready again).
 */
export function hasEnded(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded') return true;
  return pod.spec?.restartPolicy === 'Never' && statuses(pod).some((status) => status.state?.terminated !== undefined);
}

/** Why a container will not start without someone changing something; undefined while it still may. */
export function hopelessReason(pod: V1Pod): string | undefined {
  for (const status of statuses(pod)) {
    const waiting = status.state?.waiting;
    if (waiting?.reason && HOPELESS_WAITING.has(waiting.reason))
      return named(pod, status, joinReason(waiting.reason, waiting.message));
  }
  return undefined;
}

/**
 * Why a pod ended, from what the kubelet recorded. The container's own
 * termination message is left out: it is whatever the process wrote, and
 * that may be a credential.
 */
export function exitReason(pod: V1Pod): string {
  const phase = pod.status?.phase ?? 'Unknown';
  const ended = statuses(pod).find((status) => status.state?.terminated !== undefined);
  const terminated = ended?.state?.terminated;
  if (ended && terminated) {
    const code = terminated.exitCode;
    if (terminated.reason && terminated.reason !== 'Error' && terminated.reason !== 'Completed') {
      return `pod ${phase}: ${named(pod, ended, `${terminated.reason} (exit code ${code})`)}`;
    }
    return `pod ${phase}: ${named(pod, ended, `exited with code ${code}`)}`;
  }
  if (pod.status?.reason) return `pod ${phase}: ${joinReason(pod.status.reason, pod.status.message)}`;
  return `pod ${phase}`;
}

/** What a pod that is not ready yet is waiting for: a container's waiting reason, else why it is not scheduled. */
export function pendingReason(pod: V1Pod | undefined): string {
  if (!pod) return 'no status yet';
  const waiting = statuses(pod).find((status) => status.state?.waiting?.reason);
  if (waiting) return named(pod, waiting, joinReason(waiting.state!.waiting!.reason!, waiting.state!.waiting!.message));
  const unscheduled = pod.status?.conditions?.find(
    (condition) => condition.type === 'PodScheduled' && condition.status === 'False',
  );
  if (unscheduled) return joinReason(unscheduled.reason ?? 'Unschedulable', unscheduled.message);
  const phase = pod.status?.phase ?? 'Pending';
  return phase === 'Running' ? 'Running, readiness probe not passing' : phase;
}

function statuses(pod: V1Pod): V1ContainerStatus[] {
  return pod.status?.containerStatuses ?? [];
}

/** In a pod of one container the container goes without saying. */
function named(pod: V1Pod, status: V1ContainerStatus, text: string): string {
  return (pod.spec?.containers.length ?? 1) > 1 ? `container ${status.name}: ${text}` : text;
}

function joinReason(reason: string, message: string | undefined): string {
  return message ? `${reason}: ${message}` : reason;
}
