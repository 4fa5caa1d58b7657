import type { ChildProcess } from 'node:child_process';
import { packageLaunch, type Launch } from './package-launch';

/** How long a server process has between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 2000;

/** SIGTERM now, SIGKILL after the grace period if it is still there. */
export function kill(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS).unref();
}

/** Whatever still runs of `children` gone, or the grace period and a little more passed. */
export function allExited(children: ChildProcess[]): Promise<void> {
  const running = children.filter((child) => child.exitCode === null && child.signalCode === null);
  if (running.length === 0) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let left = running.length;
    for (const child of running) child.once('exit', () => --left === 0 && resolve());
    setTimeout(resolve, KILL_GRACE_MS + 500).unref();
  });
}

export interface ServerCommand {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** where an `npx <package>` command's package is installed once (package-launch.ts); without it the command runs as written */
  packageCache?: string;
}

/**
 * What each session's child runs, resolved from the start (while the first
 * session is still on its way): every session waits for it. `signal` stops
 * an install under way.
 */
export function launchOf(server: ServerCommand, log: (line: string) => void, signal: AbortSignal): Promise<Launch> {
  return server.packageCache
    ? packageLaunch(server.command, server.args, {
        cacheDir: server.packageCache,
        env: server.env,
        nodeBinary: process.execPath,
        log,
        signal,
      })
    : Promise.resolve({ command: server.command, args: server.args });
}
