import type {
  ExecRestrictions,
  RunnerFailure,
  RunnerLimits,
  RunnerOp,
  RunnerRequest,
  RunnerResult,
} from '../runner-protocol';

export interface SandboxSpec {
  id: string;
  organizationId: string;
  workspaceId: string;
  name: string;
  /** `egress`: the sandbox may open connections out; `none`: it has no network at all */
  network: 'none' | 'egress';
  limits: RunnerLimits;
}

/** The runner inside one running sandbox: requests in, answers out. */
export interface SandboxRunner {
  call<O extends RunnerOp>(request: Extract<RunnerRequest, { op: O }>): Promise<RunnerResult<O>>;
  /** settles when the sandbox stopped (idle, removed, crashed) */
  readonly ended: Promise<void>;
  stop(): Promise<void>;
}

/** Tighter bounds for one command than its sandbox's (a client's `codex/sandbox-state/update`): see ExecRestrictions. */
export type CommandRestrictions = ExecRestrictions;

/** What git printed, and how it ended. */
export interface GitResult {
  stdout: Buffer;
  stderr: string;
  code: number;
}

/**
 * Where sandboxes run. A sandbox's files outlive its processes: `runner`
 * starts one (or finds it running) over the files it had; `remove` deletes
 * both. The git history of its snapshots is kept where the sandbox cannot
 * see or write it, and `git` runs there.
 */
export interface SandboxDriver {
  readonly kind: 'local' | 'kubernetes';
  /** makes the sandbox's storage (an empty /src, an empty history) */
  create(spec: SandboxSpec): Promise<void>;
  runner(spec: SandboxSpec): Promise<SandboxRunner>;
  /** git on the sandbox's history, its work tree being the sandbox's /src, which it only reads (read-only there on Kubernetes) */
  git(spec: SandboxSpec, args: string[], input?: Buffer | NodeJS.ReadableStream): Promise<GitResult>;
  /** git's output as a stream (a bundle may be large) */
  gitStream(spec: SandboxSpec, args: string[]): NodeJS.ReadableStream;
  /**
   * How a command runs under tighter bounds than its sandbox's: `runner`,
   * the sandbox's own runner applies them in the command's namespaces (the
   * exec request's `restrictions`); `restricted`, a runner of its own is
   * started with them (restricted()).
   */
  readonly narrowing: 'runner' | 'restricted';
  /** a runner for commands under tighter bounds, its own, made with them (`narrowing: restricted`) */
  restricted?(spec: SandboxSpec, restrictions: CommandRestrictions): Promise<SandboxRunner>;
  /**
   * Unpacks a tar archive (gzip-compressed when `gzip`) into /src, inside the
   * sandbox, so no member's path or link lands outside it: the only way a
   * source's files reach /src, a bundle's included (SandboxSourceError when
   * it cannot).
   */
  unpack(spec: SandboxSpec, archive: NodeJS.ReadableStream, options: { gzip: boolean }): Promise<void>;
  /**
   * Lends a file of the control plane's (an uploaded bundle) to `git` on the
   * sandbox's history for as long as `use` runs, which gets the path git reads
   * it by (SandboxSourceError when it cannot be passed on).
   */
  withFileForGit<T>(spec: SandboxSpec, file: string, use: (path: string) => Promise<T>): Promise<T>;
  /** stops its processes, keeps its files */
  stop(spec: SandboxSpec): Promise<void>;
  remove(spec: SandboxSpec): Promise<void>;
  close(): Promise<void>;
}

export class SandboxStartError extends Error {}

/** An uploaded source the sandbox cannot take. */
export class SandboxSourceError extends Error {}

/** An error of the runner's, with its stable code. */
export class RunnerError extends Error {
  constructor(readonly failure: RunnerFailure) {
    super(failure.message);
  }
}
