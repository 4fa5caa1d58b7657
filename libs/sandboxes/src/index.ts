export type { SandboxDriver, SandboxRunner, SandboxSpec, GitResult } from './drivers/driver';
export { SandboxStartError } from './drivers/driver';
export { LocalSandboxDriver, RunnerError, SNAPSHOT_BRANCH } from './drivers/local-driver';
export type { RunnerRequest, RunnerResult, RunnerLimits } from './runner/protocol';
