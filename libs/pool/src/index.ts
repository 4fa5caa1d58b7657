export { PoolModule, kubernetesPoolOptions } from './pool.module';
export { PoolInstances, Instance, PoolError } from './instances.service';
export { PoolSessions } from './sessions.service';
export { BuiltinServers } from './builtin-servers';
export type { BuiltinServer } from './builtin-servers';
export { ExecutionJournal } from './execution-journal';
export { InstanceStartError } from './drivers/driver';
export type { InstanceDriver, InstanceSpec, RunningInstance, InstanceEndpoint, InstanceExit } from './drivers/driver';
export { KubernetesDriver } from './drivers/kubernetes/kubernetes-driver';
export type { KubernetesDriverOptions } from './drivers/kubernetes/kubernetes-driver';
export { LocalDriver } from './drivers/local/local-driver';
export type { LocalDriverOptions } from './drivers/local/local-driver';
// what the Kubernetes driver's pods expect of the cluster and the runner image: the Helm chart and the images are tested against these
export { CONTROL_PLANE_SELECTOR, EGRESS_EXCEPT_V4, EGRESS_EXCEPT_V6, HOME as POOL_POD_HOME, MANAGED_BY, RUN_AS as POOL_POD_UID } from './drivers/kubernetes/manifests';
// the Kubernetes driver's parts the sandboxes' Kubernetes driver shares: its pods follow the same rules
export { PodNotReady, PodWatch } from './drivers/kubernetes/pod-watch';
export type { PodFollower, PodWatchOptions } from './drivers/kubernetes/pod-watch';
export { exitReason, hasEnded } from './drivers/kubernetes/pod-status';
export { apiRequestOptions, deleteIgnoringAbsent, describeApiError, isApiStatus } from './drivers/kubernetes/kubernetes-api';
export { controlPlanePeer, egressRules, restrictedContainerSecurityContext, restrictedPodSecurityContext } from './drivers/kubernetes/manifests';
