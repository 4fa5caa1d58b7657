/**
 * What the control plane asks of a sandbox's runner, the one process of ours
 * inside the sandbox: every file operation and command runs there, in the
 * sandbox's namespaces, so a path (`..`, a symlink the agent made,
 * `/proc/1/root`) resolves inside the sandbox and never on the host. One JSON
 * object per line each way; answers carry the request's id.
 */
export type RunnerRequest =
  | { op: 'ping' }
  | { op: 'read'; path: string; offset: number; limit: number | null }
  | { op: 'readText'; path: string }
  | { op: 'write'; path: string; content: string }
  | { op: 'remove'; path: string }
  | { op: 'ls'; path: string; recursive: boolean }
  | { op: 'walk'; path: string }
  | { op: 'grep'; pattern: string; path: string; include: string | null }
  | { op: 'exec'; command: string; workdir: string; timeoutMs: number; limits: RunnerLimits }
  | { op: 'which'; names: string[] };

/** Per-process limits of a command (rlimits): what a machine without cgroup delegation can enforce. */
export interface RunnerLimits {
  cpuSeconds?: number;
  memoryMb?: number;
  pids?: number;
}

export interface RunnerResults {
  ping: { pid: number };
  read: { content: string; lines: number; totalLines: number };
  readText: { exists: boolean; content: string | null };
  write: { bytes: number; created: boolean };
  remove: { existed: boolean };
  ls: { entries: { path: string; type: 'file' | 'dir' | 'symlink' | 'other'; size: number }[]; truncated: boolean };
  walk: { files: string[]; truncated: boolean };
  grep: { matches: { path: string; line: number; text: string }[]; truncated: boolean };
  exec: { stdout: string; stderr: string; exitCode: number; timedOut: boolean; truncated: boolean };
  which: { paths: Record<string, string | null> };
}

export type RunnerOp = RunnerRequest['op'];
export type RunnerResult<O extends RunnerOp> = RunnerResults[O];

/** A request that failed: `code` is stable (ENOENT, EISDIR, NOT_TEXT, TOO_LARGE…), `message` fit for the agent. */
export interface RunnerFailure {
  code: string;
  message: string;
}

export type RunnerAnswer = { id: number; result: unknown } | { id: number; error: RunnerFailure };

/** The workdir inside every sandbox: relative paths resolve against it. */
export const SANDBOX_WORKDIR = '/src';
