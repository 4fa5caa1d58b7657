import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledGitHelperPath, compiledRunnerPath } from '@aileron/sandboxes';
import { blobId } from '@aileron/sandboxes/runner-protocol';
import { ROOT } from '../self-hosting/readme';
import { ensureBuilt } from '../self-hosting/build';

/**
 * The sandbox runner and the local driver's git helper as they are run: one
 * bundled file each, copied into an empty directory (the runner's is bound
 * into a sandbox, or baked into the sandbox image, with nothing beside it).
 */
const scratch = mkdtempSync(join(tmpdir(), 'aileron-bundles-'));

/** `bundle` copied alone into a directory of its own under the scratch directory */
function alone(bundle: string, name: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir);
  copyFileSync(bundle, join(dir, basename(bundle)));
  return join(dir, basename(bundle));
}

/**
 * Runs `file` with node from its own directory, with no environment but PATH
 * and `env`; sends one request line and reads the first answer line, then
 * closes its stdin (as a driver that is done does) and waits for its exit.
 */
async function askOnce(
  file: string,
  request: unknown,
  env: Record<string, string> = {},
): Promise<{ answer: unknown; code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [file], {
    cwd: dirname(file),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
  const first = new Promise<string | undefined>((resolve) => {
    lines.once('line', resolve);
    lines.once('close', () => resolve(undefined));
  });
  child.stdin.on('error', () => undefined);
  child.stdin.write(`${JSON.stringify(request)}\n`);
  const line = await first;
  child.stdin.end();
  const code = await exited;
  return { answer: line === undefined ? undefined : JSON.parse(line), code, stderr };
}

beforeAll(() => ensureBuilt([relative(ROOT, compiledRunnerPath()), relative(ROOT, compiledGitHelperPath())]));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the bundled sandbox runner and git helper', () => {
  it('need nothing but Node: every module they load is a built-in, and the runner is alone in the directory a sandbox is given', () => {
    expect(readdirSync(dirname(compiledRunnerPath()))).toEqual([basename(compiledRunnerPath())]);
    for (const bundle of [compiledRunnerPath(), compiledGitHelperPath()]) {
      const loaded = [...readFileSync(bundle, 'utf8').matchAll(/\brequire\(\s*["'`]([^"'`]+)["'`]\s*\)/g)].map(
        (found) => found[1]!,
      );
      expect(loaded.length, bundle).toBeGreaterThan(0);
      expect(
        loaded.filter((name) => !name.startsWith('node:')),
        bundle,
      ).toEqual([]);
    }
  });

  it('the runner answers a ping over its stdio lines from a directory with no node_modules, with the version it was given, and exits when its stdin closes', async () => {
    const runner = alone(compiledRunnerPath(), 'runner');
    const { answer, code, stderr } = await askOnce(
      runner,
      { id: 1, op: 'ping' },
      { AILERON_MCP_VERSION: '9.9.9-bundle' },
    );
    expect(answer, stderr).toEqual({ id: 1, result: { pid: expect.any(Number), version: '9.9.9-bundle' } });
    expect(code, stderr).toBe(0);
  });

  it('the git helper runs one git from a directory with no node_modules: its input in, its output and exit code back', async () => {
    const helper = alone(compiledGitHelperPath(), 'git-helper');
    const input = Buffer.from('hello\n');
    const request = {
      id: 7,
      file: '/usr/bin/git',
      args: ['hash-object', '--stdin'],
      cwd: '/',
      env: { PATH: '/usr/bin:/bin' },
      stdin: input.toString('base64'),
    };
    const { answer, code, stderr } = await askOnce(helper, request);
    expect(answer, stderr).toEqual({
      id: 7,
      code: 0,
      stdout: Buffer.from(`${blobId(input)}\n`).toString('base64'),
      stderr: '',
    });
    expect(code, stderr).toBe(0);
  });
});
