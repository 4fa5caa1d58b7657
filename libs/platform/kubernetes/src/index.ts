// What every driver that runs pods needs of Kubernetes (the pool's instances, the sandboxes):
// the API's calls bounded and their failures in words, one watch on a driver's pods, what a
// pod's status means, pods locked down as the `restricted` standard wants, who may connect.
export { apiRequestOptions, deleteIgnoringAbsent, describeApiError, isApiStatus } from './kubernetes-api';
export { loadKubeConfig } from './kube-config';
export { CONTROL_PLANE_SELECTOR, controlPlanePeer, egressRules } from './network-policy';
export { POD_UID, restrictedContainerSecurityContext, restrictedPodSecurityContext } from './pod-security';
export { exitReason, hasEnded, hopelessReason, isReady, pendingReason } from './pod-status';
export { PodNotReady, PodWatch, watchDriverPods } from './pod-watch';
export type { PodFollower, PodWatchOptions } from './pod-watch';
