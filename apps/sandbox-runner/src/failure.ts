import type { RunnerFailure } from '@aileron/sandboxes/runner-protocol';

/** A runner error with a stable code, answered to the control plane as `{ code, message }`. */
export class Failure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What a failed request answers: a Failure's own code, a system error's code with words fit for the agent. */
export function failureOf(error: unknown, path?: string): RunnerFailure {
  if (error instanceof Failure) return { code: error.code, message: error.message };
  const code = (error as NodeJS.ErrnoException).code ?? 'FAILED';
  const where = path ? `${path}: ` : '';
  const known: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EISDIR: 'is a directory',
    ENOTDIR: 'not a directory',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EROFS: 'read-only file system (only /src, /tmp and the home directory are writable)',
    ENOSPC: 'no space left on device',
    ELOOP: 'too many levels of symbolic links',
  };
  return { code, message: `${where}${known[code] ?? (error instanceof Error ? error.message : String(error))}` };
}
