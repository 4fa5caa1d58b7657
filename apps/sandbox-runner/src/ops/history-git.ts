import { spawn } from 'node:child_process';
import {
  gitEnv,
  HISTORY_DIR,
  historyGitArgs,
  type RunnerRequest,
  type RunnerResults,
  writeHistoryInfo,
} from '@aileron/sandboxes/runner-protocol';
import { failureOf } from '../failure';
import { collector, exitCodeOf } from '../streams';

const GIT = '/usr/bin/git';

/**
 * git on the history (the history role's alone: a volume the sandbox's own
 * container never mounts), with no work tree. A streamed request hands
 * stdout to `stream` piece by piece, waiting for each to be taken.
 */
export function historyGit(
  request: Extract<RunnerRequest, { op: 'git' }>,
  stream?: (chunk: Buffer) => Promise<void>,
): Promise<RunnerResults['git']> {
  return new Promise((resolveGit) => {
    const child = spawn(GIT, historyGitArgs(request.args), {
      cwd: HISTORY_DIR,
      env: gitEnv(process.env.HOME ?? '/tmp'),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    const stderr = collector();
    child.stdout.on('data', (chunk: Buffer) => {
      if (!request.stream || !stream) return void stdout.push(chunk);
      child.stdout.pause();
      void stream(chunk).then(() => child.stdout.resume());
    });
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.stdin.on('error', () => undefined);
    child.stdin.end(request.stdin ? Buffer.from(request.stdin, 'base64') : undefined);
    child.on('error', (error) =>
      resolveGit({ stdout: '', stderr: `could not start git: ${error.message}\n`, code: 127 }),
    );
    child.on('close', (code, signal) => {
      const exitCode = exitCodeOf(code, signal);
      const answer = { stdout: Buffer.concat(stdout).toString('base64'), stderr: stderr.text(), code: exitCode };
      // at every start (init is idempotent): a history made before these files gets them too
      if (request.args[0] !== 'init' || exitCode !== 0) return resolveGit(answer);
      writeHistoryInfo(HISTORY_DIR).then(
        () => resolveGit(answer),
        (error: unknown) =>
          resolveGit({
            ...answer,
            stderr: `could not write ${HISTORY_DIR}/info: ${failureOf(error).message}\n`,
            code: 1,
          }),
      );
    });
  });
}
