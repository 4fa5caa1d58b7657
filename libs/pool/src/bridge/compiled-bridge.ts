import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The nearest directory above this file with a package.json: the same from the sources and from dist/. */
function projectRoot(): string {
  for (let dir = __dirname; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
  }
  throw new Error(`no package.json above ${__dirname}`);
}

/**
 * The compiled bridge program (`apps/mcp-bridge`), which the local driver runs
 * (its `bridgeScript`). The driver runs JavaScript, not TypeScript, so even
 * tests use the build output.
 */
export function compiledBridgePath(): string {
  return join(projectRoot(), 'dist', 'apps', 'mcp-bridge', 'src', 'main.js');
}

/** What the program is compiled from, relative to the project root: the program, these parts and the transport. */
function bridgeSources(root: string): string[] {
  const parts = readdirSync(join(root, 'libs', 'pool', 'src', 'bridge'))
    .filter((name) => name.endsWith('.ts') && !name.endsWith('.spec.ts'))
    .map((name) => join('libs', 'pool', 'src', 'bridge', name));
  return [
    join('apps', 'mcp-bridge', 'src', 'main.ts'),
    ...parts,
    join('libs', 'pool', 'src', 'node-streamable-http-transport.ts'),
  ];
}

/**
 * For tests: builds the project, under the build lock every session shares, when
 * a compiled file of the bridge is missing or older than its source; returns
 * the program's path.
 */
export function ensureBridgeBuilt(): string {
  const root = projectRoot();
  const script = compiledBridgePath();
  // file by file: an incremental build leaves an output alone when its source did not change
  const fresh = () =>
    bridgeSources(root).every((source) => {
      const output = join(root, 'dist', source.replace(/\.ts$/, '.js'));
      return existsSync(output) && statSync(output).mtimeMs >= statSync(join(root, source)).mtimeMs;
    });
  if (fresh()) return script;
  let output = '';
  try {
    execFileSync('flock', ['/tmp/aileron-build.lock', 'npm', 'run', 'build', '--silent'], {
      cwd: root,
      encoding: 'utf8',
      stdio: 'pipe',
    });
  } catch (error) {
    // tsc still emits when another file has a type error; only a bridge that did not build is fatal here
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    output = `${stdout ?? ''}${stderr ?? ''}`;
  }
  if (!fresh()) throw new Error(`could not build the bridge:\n${output}`);
  return script;
}
