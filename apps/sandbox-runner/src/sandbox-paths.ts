import { resolve } from 'node:path';
import { SANDBOX_WORKDIR } from '@aileron/sandboxes/runner-protocol';

/** the PATH of every program the runner starts for the sandbox (a command, grep, tar) */
export const COMMAND_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';

/** A request's path in the sandbox: a relative one is under /src. */
export function inSandbox(path: string): string {
  return resolve(SANDBOX_WORKDIR, path);
}
