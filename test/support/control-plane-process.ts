import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

/** The built server (`npm start` runs this file) and CLI. */
export const MAIN = resolve('dist/apps/control-plane/src/main.js');
export const CLI = resolve('bin/aileron-cp.js');

/** Tests of the server as a process need it built (npm test builds it first). */
export function requireBuild(): void {
  if (!existsSync(MAIN)) throw new Error('build first: npm run build (npm test does)');
}

export interface ControlPlaneProcess {
  child: ChildProcess;
  url: string;
  /** everything it has printed so far */
  output(): string;
}

/**
 * The built server as a user runs it, in a process of its own that a test
 * may stop or kill; embedded mode unless `env` names a database. Resolves
 * once it says where it listens.
 */
export async function startControlPlaneProcess(
  dataDir: string,
  port: number,
  env: Record<string, string> = {},
): Promise<ControlPlaneProcess> {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      AILERON_DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      REDIS_URL: '',
      ...env,
    },
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  // a bound that catches a hang, not a speed: an embedded start migrates PGlite, slow on a loaded machine
  const deadline = Date.now() + 120_000;
  while (!/listening on (\S+)/.test(out)) {
    if (child.exitCode !== null) throw new Error(`server exited ${child.exitCode}: ${out}`);
    if (Date.now() > deadline) {
      // a process that did not start in time must not outlive the test (nor hold its port and data directory)
      child.kill('SIGKILL');
      throw new Error(`server did not start: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, url: /listening on (\S+)/.exec(out)![1]!, output: () => out };
}

/** Stops a process with SIGTERM, as an operator would; its exit code. */
export async function stopProcess(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill('SIGTERM');
  return new Promise((r) => child.once('exit', (code) => r(code)));
}
