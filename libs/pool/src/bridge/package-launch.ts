/**
 * A catalog command `npx [-y] <package> [args…]` resolved once, not per
 * session: `npx` starts `npm exec` (a whole npm, ~100 MB) for every child,
 * which checks the registry and then stays as the child's parent for as long
 * as the session lasts. Here the package is installed once into a cache
 * under the instance's home and each session's child is its program alone,
 * `node <bin>`. This runs where the bridge runs (inside the local sandbox,
 * in the Kubernetes pod), as the instance's user with the instance's
 * environment: the install is sandboxed exactly as the server is.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, renameSync, writeFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { createInterface } from 'node:readline';

export interface Launch {
  command: string;
  args: string[];
}

export interface PackageLaunchOptions {
  /** where packages are installed, one directory per package spec (under the instance's home) */
  cacheDir: string;
  /** the server's whole environment: npm reads its registry and credentials there, as npx would */
  env: NodeJS.ProcessEnv;
  /** the node that runs the package's program (the bridge's own) */
  nodeBinary: string;
  log: (line: string) => void;
  /** stops an install under way (the bridge is closing) */
  signal?: AbortSignal;
  /** default 300 s: a registry that never answers must not hold sessions for ever */
  installTimeoutMs?: number;
}

/** What `npx` may be given before the package for us to resolve it; anything else runs as written. */
const NPX_FLAGS = new Set(['-y', '--yes', '-q', '--quiet', '--silent']);

/**
 * The package and its program's arguments when `command args` is a plain
 * `npx [-y] <package> [args…]`. Undefined otherwise: `-p`, `-c`, `--no-install`
 * and the like, or a path relative to the working directory, keep npx.
 */
export function npxPackage(command: string, args: readonly string[]): { spec: string; rest: string[] } | undefined {
  if (basename(command) !== 'npx') return undefined;
  let at = 0;
  while (at < args.length && NPX_FLAGS.has(args[at]!)) at++;
  const spec = args[at];
  if (spec === undefined || spec === '' || spec.startsWith('-') || spec.startsWith('.')) return undefined;
  return { spec, rest: args.slice(at + 1) };
}

/** `name@1.2.3`: the same files whatever the registry says later, so an installed copy is used without asking it. */
const EXACT_VERSION = /^(@[a-z0-9][\w.~-]*\/)?[a-z0-9][\w.~-]*@\d+\.\d+\.\d+(?:-[\w.-]+)?(?:\+[\w.-]+)?$/i;

interface Resolved {
  spec: string;
  bin: string;
  /** the program is JavaScript for node (a node shebang, or a .js file without one) */
  node: boolean;
}

const RECORD = 'aileron-launch.json';

/**
 * How each session's child starts. A plain `npx` command is resolved to its
 * package's program: an exact version already installed is used at once
 * (no npm at all); otherwise npm installs it (a range or tag: once per start
 * of the instance, so a new release is picked up as npx would). When npm
 * fails, the copy installed before is used; without one the command runs
 * as written, through npx, as it did before.
 */
export async function packageLaunch(command: string, args: string[], options: PackageLaunchOptions): Promise<Launch> {
  const npx = npxPackage(command, args);
  if (!npx) return { command, args };
  const dir = installDir(options.cacheDir, npx.spec);
  const launch = (resolved: Resolved): Launch =>
    resolved.node
      ? { command: options.nodeBinary, args: [resolved.bin, ...npx.rest] }
      : { command: resolved.bin, args: npx.rest };

  const before = installed(dir, npx.spec);
  if (before && EXACT_VERSION.test(npx.spec)) {
    options.log(`${npx.spec}: runs ${before.bin} (installed before)`);
    return launch(before);
  }
  const started = performance.now();
  const npm = isAbsolute(command) ? join(dirname(command), 'npm') : 'npm';
  const failure = await install(npm, dir, npx.spec, options);
  const resolved = failure ? undefined : programOf(dir, npx.spec);
  if (resolved && typeof resolved !== 'string') {
    const record = join(dir, `${RECORD}.${process.pid}`);
    writeFileSync(record, JSON.stringify(resolved));
    renameSync(record, join(dir, RECORD));
    options.log(`${npx.spec}: runs ${resolved.bin} (installed in ${Math.round(performance.now() - started)} ms)`);
    return launch(resolved);
  }
  const why = failure ?? (resolved as string);
  if (before) {
    options.log(`${npx.spec}: ${why}; runs the copy installed before, ${before.bin}`);
    return launch(before);
  }
  options.log(`${npx.spec}: ${why}; each session runs it through npx`);
  return { command, args };
}

/** One directory per spec: a name that says nothing of it, and that no spec can climb out of. */
export function installDir(cacheDir: string, spec: string): string {
  return join(cacheDir, createHash('sha256').update(spec).digest('hex').slice(0, 16));
}

function installed(dir: string, spec: string): Resolved | undefined {
  try {
    const record = JSON.parse(readFileSync(join(dir, RECORD), 'utf8')) as Resolved;
    return record.spec === spec && existsSync(record.bin) ? record : undefined;
  } catch {
    return undefined;
  }
}

/** Runs `npm install` of the spec into dir; resolves with why it failed, or undefined. */
function install(npm: string, dir: string, spec: string, options: PackageLaunchOptions): Promise<string | undefined> {
  mkdirSync(dir, { recursive: true });
  // a project of its own for npm to install into; not --prefix, which also moves npm's global
  // configuration (<prefix>/etc/npmrc) and so loses the system's (a registry, its CA)
  const manifest = join(dir, 'package.json');
  if (!existsSync(manifest)) writeFileSync(manifest, '{ "private": true }\n');
  return new Promise((resolve) => {
    const child = spawn(npm, ['install', '--no-audit', '--no-fund', '--no-update-notifier', '--loglevel=error', spec], {
      env: options.env,
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    createInterface({ input: child.stderr!, crlfDelay: Infinity }).on('line', (line) =>
      options.log(`npm install ${spec}: ${line}`),
    );
    const stop = () => child.kill('SIGKILL');
    const timer = setTimeout(stop, options.installTimeoutMs ?? 300_000);
    options.signal?.addEventListener('abort', stop, { once: true });
    let done = false;
    const finish = (why: string | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', stop);
      resolve(why);
    };
    child.once('error', (error: NodeJS.ErrnoException) =>
      finish(`npm could not be started (${error.code ?? 'error'})`),
    );
    child.once('close', (code, signal) =>
      finish(code === 0 ? undefined : `npm install failed (${signal ? `killed by ${signal}` : `exit code ${code}`})`),
    );
  });
}

/** The program npm exec would run for the one package installed in dir (its bin of its own name, or its only one). */
function programOf(dir: string, spec: string): Resolved | string {
  try {
    const dependencies = Object.keys(
      (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> })
        .dependencies ?? {},
    );
    if (dependencies.length !== 1) return `npm installed ${dependencies.length} packages, expected one`;
    const packageDir = join(dir, 'node_modules', dependencies[0]!);
    const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
      name: string;
      bin?: string | Record<string, string>;
    };
    const unscoped = manifest.name.replace(/^@[^/]+\//, '');
    const bins = typeof manifest.bin === 'string' ? { [unscoped]: manifest.bin } : (manifest.bin ?? {});
    const paths = new Set(Object.values(bins));
    const chosen = paths.size === 1 ? [...paths][0] : bins[unscoped];
    if (!chosen) return `${manifest.name} has no program npx could choose`;
    const bin = join(packageDir, chosen);
    return { spec, bin, node: runsOnNode(bin) };
  } catch (error) {
    return `the installed package could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
  }
}

function runsOnNode(file: string): boolean {
  const head = Buffer.alloc(256);
  const fd = openSync(file, 'r');
  let length: number;
  try {
    length = readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  const first = head.subarray(0, length).toString('utf8').split('\n')[0]!;
  return first.startsWith('#!') ? /\bnode(\s|$)/.test(first) : /\.[cm]?js$/.test(file);
}
