export type { SandboxDriver, SandboxRunner, SandboxSpec, GitResult } from './drivers/driver';
export { RunnerError, SandboxStartError } from './drivers/driver';
export { LocalSandboxDriver, SNAPSHOT_BRANCH } from './drivers/local-driver';
export { KubernetesSandboxDriver } from './drivers/kubernetes/kubernetes-driver';
export type { KubernetesSandboxOptions } from './drivers/kubernetes/kubernetes-driver';
export type { RunnerRequest, RunnerResult, RunnerLimits } from './runner/protocol';
