export { PoolModule, kubernetesPoolOptions } from './pool.module';
export { PoolInstances, Instance, PoolError, INSTANCE_DRIVER } from './pool-instances.service';
export type { InstanceHealth } from './pool-instances.service';
export { McpSessions } from './mcp-sessions.service';
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
export { HOME as POOL_POD_HOME, MANAGED_BY, RUN_AS as POOL_POD_UID } from './drivers/kubernetes/manifests';
