import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The nearest directory above this file with a package.json: the same from the sources and from dist/. */
function projectRoot(): string {
  for (let dir = __dirname; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
  }
  throw new Error(`no package.json above ${__dirname}`);
}

/**
 * The compiled bridge, which the local driver runs (its `bridgeScript`). The
 * driver runs JavaScript, not TypeScript, so even tests use the build output.
 */
export function compiledBridgePath(): string {
  return join(projectRoot(), 'dist', 'libs', 'pool', 'src', 'bridge', 'main.js');
}

/**
 * For tests: builds the project, under the build lock every session shares, when
 * the compiled bridge is missing or older than its source; returns its path.
 */
export function ensureBridgeBuilt(): string {
  const root = projectRoot();
  const script = compiledBridgePath();
  const source = join(root, 'libs', 'pool', 'src', 'bridge', 'main.ts');
  const fresh = () => existsSync(script) && statSync(script).mtimeMs >= statSync(source).mtimeMs;
  if (fresh()) return script;
  let output = '';
  try {
    execFileSync('flock', ['/tmp/aileron-build.lock', 'npm', 'run', 'build', '--silent'], { cwd: root, encoding: 'utf8', stdio: 'pipe' });
  } catch (error) {
    // tsc still emits when another file has a type error; only a bridge that did not build is fatal here
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    output = `${stdout ?? ''}${stderr ?? ''}`;
  }
  if (!fresh()) throw new Error(`could not build the bridge:\n${output}`);
  return script;
}
