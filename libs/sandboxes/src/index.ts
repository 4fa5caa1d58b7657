export type { SandboxDriver, SandboxRunner, SandboxSpec, GitResult } from './drivers/driver';
export { SandboxSourceError, SandboxStartError } from './drivers/driver';
export { LocalSandboxDriver, RunnerError, SNAPSHOT_BRANCH } from './drivers/local-driver';
export type { RunnerRequest, RunnerResult, RunnerLimits } from './runner/protocol';
export { SandboxesModule, compiledRunnerPath } from './sandboxes.module';
export { SandboxesService } from './sandboxes.service';
export { SANDBOX_SERVER } from './sandbox-tool-server';
export { sandboxSlug } from './domain/slug';
