import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './readme';

let built = false;

/**
 * Builds the project (under the build lock every session shares) when one of
 * these paths under the root is missing, once per test file: `npm test`
 * builds before the suites, a single file run may not have. A path still
 * missing afterwards is the test's finding, not a build to retry.
 */
export function ensureBuilt(paths: string[]): void {
  if (built || paths.every((path) => existsSync(join(ROOT, path)))) return;
  built = true;
  try {
    execFileSync('flock', ['/tmp/aileron-build.lock', 'npm', 'run', 'build', '--silent'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: 'pipe',
    });
  } catch (error) {
    // tsc emits despite a type error elsewhere; the caller checks what it needs
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    process.stderr.write(`npm run build failed:\n${stdout ?? ''}${stderr ?? ''}\n`);
  }
}
