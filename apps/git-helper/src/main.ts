/**
 * A small process that runs git for the local driver. Starting a program from
 * the control plane means forking a process of a gigabyte or more, which
 * costs tens of milliseconds each time; from this one it costs about one.
 * Snapshots run several git commands per change, so they go through here.
 *
 * One GitHelperRequest per line on stdin, one GitHelperAnswer per line on
 * stdout (@aileron/sandboxes/runner-protocol). Bundled into one file with
 * nothing but Node's built-ins (scripts/build-bundles.mjs).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { GitHelperAnswer, GitHelperRequest } from '@aileron/sandboxes/runner-protocol';

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  const request = JSON.parse(line) as GitHelperRequest;
  const child = spawn(request.file, request.args, {
    cwd: request.cwd,
    env: request.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stdout: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  child.stdin.on('error', () => undefined);
  child.stdin.end(request.stdin ? Buffer.from(request.stdin, 'base64') : undefined);
  const answer = (code: number, error?: string): void => {
    const message: GitHelperAnswer = {
      id: request.id,
      code,
      stdout: Buffer.concat(stdout).toString('base64'),
      stderr: error ?? stderr,
    };
    process.stdout.write(`${JSON.stringify(message)}\n`);
  };
  child.on('error', (error) => answer(127, error.message));
  child.on('close', (code) => answer(code ?? 1));
});
lines.on('close', () => process.exit(0));
