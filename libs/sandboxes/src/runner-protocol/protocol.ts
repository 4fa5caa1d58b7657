import { createHash } from 'node:crypto';

/**
 * What the control plane asks of a sandbox's runner, the one process of ours
 * inside the sandbox: every file operation and command runs there, in the
 * sandbox's namespaces, so a path (`..`, a symlink the agent made,
 * `/proc/1/root`) resolves inside the sandbox and never on the host. One JSON
 * object per line each way (an answer's long strings follow its line, see
 * RawFields); answers carry the request's id.
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
  | {
      op: 'exec';
      command: string;
      workdir: string;
      timeoutMs: number;
      limits: RunnerLimits;
      /** tighter bounds than the sandbox's for this command (a client's sandbox policy); absent: the sandbox's */
      restrictions?: ExecRestrictions;
    }
  /** each name as `execve` would find it from `workdir`: a name with a `/` relative to it, others on the PATH */
  | { op: 'which'; names: string[]; workdir: string }
  /**
   * git on the sandbox's history (`--git-dir=/history --work-tree=/src`),
   * answered by the history role only. `stdin` is base64. With `stream`, git's
   * stdout comes as RunnerChunk lines before the answer, whose `stdout` is
   * then empty.
   */
  | { op: 'git'; args: string[]; stdin?: string; stream?: boolean }
  /**
   * A tar archive unpacked into /src by GNU tar, as the sandbox's user: its
   * bytes follow as RunnerInput lines, gzip-compressed when `gzip` says so.
   * tar drops a leading `/` and refuses members with `..` in their path; at
   * most `maxBytes` of (uncompressed) archive.
   */
  | { op: 'unpack'; maxBytes: number; gzip: boolean }
  /**
   * A file for git to read by path (an uploaded bundle), answered by the
   * history role only: its bytes follow as RunnerInput lines, kept in the
   * container's own scratch space (never /src or the history) until the
   * connection that sent them closes. At most `maxBytes`.
   */
  | { op: 'receive'; maxBytes: number }
  /**
   * What /src holds now, for a snapshot: every file and symlink, walked and
   * hashed here in the sandbox (git's blob ids), never by a program of the
   * history's. `.git` at any depth and `/lost+found` are left out; the
   * `.gitignore` files are honoured. When `base` is the commit this runner
   * last adopted, the answer is the changes since; otherwise every entry.
   */
  | { op: 'scan'; base: string | null; maxEntries: number }
  /** The bytes of these paths as they are now (a symlink's are its target's text), for the history to store. */
  | { op: 'blobs'; paths: string[] }
  /** The last scan (with what `blobs` read since) is now commit `base`: the next scan with that base answers changes only. */
  | { op: 'adopt'; base: string };

/**
 * Tighter bounds for one command than its sandbox's: what a client's
 * sandbox policy (`codex/sandbox-state/update`) asks. A runner that can
 * (RUNNER_ISOLATE_ENV) applies them in the command's own mount and network
 * namespaces, from inside the sandbox, so they can only take away: a path
 * resolves as the sandbox sees it, and a bind of it makes writable nothing
 * the sandbox could not write already.
 */
export interface ExecRestrictions {
  /**
   * The only places the command may write, absolute paths inside the
   * sandbox; /src, /tmp and the home directory are read-only but for them.
   * Each must exist, lie in one of those three, and pass through no symbolic
   * link; the runner ignores any other and says so on the command's stderr.
   * Inside each, a top-level `.git` or `.codex` directory stays read-only (as
   * Codex keeps them). Absent: wherever the sandbox may write.
   */
  writable?: string[];
  /** false: no network at all, even in an `egress` sandbox */
  network: boolean;
  /** the command's TMPDIR (made if missing); absent: /tmp */
  tmpdir?: string;
}

/** The TMPDIR of a command whose policy keeps /tmp read-only but its TMPDIR writable (exclude_slash_tmp alone). */
export const SANDBOX_TMPDIR = '/tmp/tmpdir';

/** Per-process limits of a command (rlimits: CPU seconds, data size, processes): what a machine without cgroup delegation can enforce. */
export interface RunnerLimits {
  cpuSeconds?: number;
  memoryMb?: number;
  pids?: number;
  /** set by the local driver while the sandbox's /src is over its bound (0: no file may grow), never by a request */
  fileSizeBytes?: number;
}

export interface RunnerResults {
  /** `version` when the runner knows it (AILERON_MCP_VERSION, baked into the image); `role` in listen mode */
  ping: { pid: number; version?: string; role?: RunnerRole };
  read: { content: string; lines: number; totalLines: number };
  readText: { exists: boolean; content: string | null };
  write: { bytes: number; created: boolean };
  remove: { existed: boolean };
  ls: { entries: { path: string; type: 'file' | 'dir' | 'symlink' | 'other'; size: number }[]; truncated: boolean };
  walk: { files: string[]; truncated: boolean };
  grep: { matches: { path: string; line: number; text: string }[]; truncated: boolean };
  exec: { stdout: string; stderr: string; exitCode: number; timedOut: boolean; truncated: boolean };
  which: { paths: Record<string, string | null> };
  /** `stdout` base64 (empty when streamed); `code` git's exit code */
  git: { stdout: string; stderr: string; code: number };
  /** `bytes`: the unpacked archive's size */
  unpack: { bytes: number };
  /** where git finds the file, and its size */
  receive: { path: string; bytes: number };
  scan: ScanResult;
  /** `data`: the bytes of every item that is not `gone`, one after the other, `size` each */
  blobs: { items: (TreeEntry | { path: string; gone: true })[]; data: Buffer };
  adopt: Record<string, never>;
}

/** git's modes for what a snapshot keeps: a file, an executable, a symlink */
export type TreeMode = '100644' | '100755' | '120000';

/** A snapshot's entry: its path under /src, mode, git blob id and size in bytes. */
export interface TreeEntry {
  path: string;
  mode: TreeMode;
  sha: string;
  size: number;
}

/** git's id of a blob of these bytes (a TreeEntry's `sha`): the runner hashes /src with it, and the history stores what has it */
export function blobId(bytes: Buffer): string {
  return createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
}

/** A change since the adopted base: an entry now (with the blob id it had, if any), or a path that is gone. */
export type TreeChange = (TreeEntry & { before: string | null }) | { path: string; deleted: true };

export type ScanResult =
  | { full: true; entries: TreeEntry[]; skipped: string[] }
  | { full: false; changes: TreeChange[]; skipped: string[] };

export type RunnerOp = RunnerRequest['op'];
export type RunnerResult<O extends RunnerOp> = RunnerResults[O];

/** A request that failed: `code` is stable (ENOENT, EISDIR, NOT_TEXT, TOO_LARGE…), `message` fit for the agent. */
export interface RunnerFailure {
  code: string;
  message: string;
}

/**
 * A result's long strings (a file read, a command's output) travel after its
 * line as raw UTF-8 bytes, in the order `raw` lists them as [field, bytes]:
 * escaping a megabyte into JSON and parsing it back cost more than
 * everything else a read does. The reader puts them into `result` by name.
 */
export type RawFields = ([field: string, bytes: number] | [field: string, bytes: number, binary: 1])[];

/** Result fields whose raw bytes are bytes, not text: the reader keeps them as a Buffer (marked `1` in `raw`). */
export const BINARY_FIELDS: ReadonlySet<string> = new Set(['data']);

export type RunnerAnswer = { id: number; result: unknown; raw?: RawFields } | { id: number; error: RunnerFailure };

/** Part of a streamed `git` request's stdout (base64), sent before its answer. */
export interface RunnerChunk {
  id: number;
  chunk: string;
}

/** The input of a request that takes one (`unpack`, `receive`), sent after it: chunks (base64), then the end. */
export type RunnerInput = RunnerChunk | { id: number; end: true };

/**
 * Listen mode (`--listen [host:]port`, how a pod's runners are reached): a
 * connection first sends one line, the bearer token the runner has in
 * RUNNER_TOKEN_ENV, then speaks the JSON lines above. A wrong or late token is
 * answered with `{ id: -1, error: { code: 'UNAUTHORIZED' } }` and the
 * connection closed.
 *
 * Roles (`--role`): `sandbox` (the default) answers every op but `git`;
 * `history` answers only `ping`, `git` and `receive`, so the container that
 * holds the history runs nothing else.
 */
export type RunnerRole = 'sandbox' | 'history';
export const RUNNER_TOKEN_ENV = 'AILERON_RUNNER_TOKEN';
/** What the runner's ping reports as its version: the image's AILERON_MCP_VERSION, which the Kubernetes driver compares with its own */
export const RUNNER_VERSION_ENV = 'AILERON_MCP_VERSION';
/** Set to `1` by the local driver, which lets the runner give each command a pid and mount namespace of its own (see the runner's ops/exec.ts). */
export const RUNNER_ISOLATE_ENV = 'AILERON_RUNNER_ISOLATE';
/** Where the history role finds the git directory. */
export const HISTORY_DIR = '/history';

/** The workdir inside every sandbox: relative paths resolve against it. */
export const SANDBOX_WORKDIR = '/src';

/**
 * The git helper's lines (the local driver's small process that spawns the
 * history's gits, apps/git-helper): one request per line on its stdin, one
 * answer per line on its stdout, by id. `stdin` and `stdout` are base64.
 */
export interface GitHelperRequest {
  id: number;
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  stdin?: string;
}

export interface GitHelperAnswer {
  id: number;
  code: number;
  stdout: string;
  stderr: string;
}
