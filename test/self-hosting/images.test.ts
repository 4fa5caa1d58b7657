import { execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POOL_POD_HOME, POOL_POD_UID } from '@aileron/pool/kubernetes';
import { ensureBuilt } from './build';
import { dockerIgnored, ParsedDockerfile, type Stage } from './dockerfiles';
import { codeSpans, readmeSection, ROOT, serverModeCommand, tableRows } from './readme';

/**
 * The images, without a Docker engine: each Dockerfile is parsed and linted
 * (dockerfile-ast and the Docker language server's validator), held to what
 * the issue and the README promise, and the files its last stage copies are
 * laid out as the image would hold them and run from there.
 */

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
};

interface ImageRow {
  image: string;
  dockerfile: ParsedDockerfile;
  /** the README's start command of the image, as argv */
  starts: string[];
}

const IMAGES: ImageRow[] = tableRows(readmeSection('Images')).map((cells) => ({
  image: codeSpans(cells[0]!)[0]!,
  dockerfile: new ParsedDockerfile(join(ROOT, codeSpans(cells[1]!)[0]!)),
  starts: codeSpans(cells[2]!)[0]!.split(' '),
}));

function image(name: string): ParsedDockerfile {
  const row = IMAGES.find((r) => r.image === `ghcr.io/aileron/${name}`);
  if (!row) throw new Error(`README.md's images table has no ghcr.io/aileron/${name}`);
  return row.dockerfile;
}

/** ENTRYPOINT after the init, then CMD: what the container runs. */
function startCommand(stage: Stage): string[] {
  const entrypoint = stage.execForm('ENTRYPOINT') ?? [];
  return [...entrypoint.slice(2), ...(stage.execForm('CMD') ?? [])];
}

/** Where a file a build stage made is on this machine: under the stage's WORKDIR it is the repository's (after `npm run build`). */
function hostPath(build: Stage, source: string, elsewhere: Record<string, string> = {}): string {
  const workdir = build.workdir();
  if (source === workdir || source.startsWith(`${workdir}/`)) return join(ROOT, posix.relative(workdir, source));
  for (const [prefix, host] of Object.entries(elsewhere))
    if (source.startsWith(prefix)) return join(host, source.slice(prefix.length));
  throw new Error(`no place on this machine stands for ${source} of stage ${build.name}`);
}

/**
 * Lays out what the last stage copies from the build stage under `into`, as
 * the image's file system would hold it (node_modules linked, not copied,
 * where `linkNodeModules` says so).
 */
function assemble(
  dockerfile: ParsedDockerfile,
  into: string,
  options: { elsewhere?: Record<string, string>; linkNodeModules?: boolean } = {},
): void {
  for (const copy of dockerfile.final.copies()) {
    const build = dockerfile.stage(copy.from!);
    for (const source of copy.sources) {
      const from = hostPath(build, source, options.elsewhere);
      const to = join(into, copy.destination);
      mkdirSync(dirname(to), { recursive: true });
      if (options.linkNodeModules && source.endsWith('/node_modules')) symlinkSync(from, to);
      else cpSync(from, to, { recursive: true });
    }
  }
}

/** The packages compiled code requires (static `require`, `require.resolve` and `import()`), by file. */
function requiredPackages(dir: string): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.js')) {
        const text = readFileSync(path, 'utf8');
        for (const match of text.matchAll(/(?:require(?:\.resolve)?|import)\("([^".][^"]*)"\)/g)) {
          const specifier = match[1]!;
          const name = specifier.startsWith('@')
            ? specifier.split('/').slice(0, 2).join('/')
            : specifier.split('/')[0]!;
          if (!found.has(name)) found.set(name, relative(ROOT, path));
        }
      }
    }
  };
  walk(dir);
  return found;
}

const scratch: string[] = [];
function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

beforeAll(() =>
  ensureBuilt(['dist/apps/control-plane/src/main.js', 'dist/apps/mcp-bridge/src/main.js', 'dist/aileron-mcp.cjs']),
);
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('every image', () => {
  it('the README lists the three images, each with its Dockerfile under images/', () => {
    expect(IMAGES.map((row) => row.image)).toEqual([
      'ghcr.io/aileron/control-plane',
      'ghcr.io/aileron/mcp-runner',
      'ghcr.io/aileron/sandbox-base',
    ]);
    for (const row of IMAGES) expect(relative(ROOT, row.dockerfile.path)).toMatch(/^images\/[a-z-]+\/Dockerfile$/);
  });

  describe.each(IMAGES)('$image', ({ dockerfile, starts }) => {
    const final = dockerfile.final;

    it('parses, and the Dockerfile linter finds nothing', () => {
      expect(dockerfile.stages.length).toBeGreaterThan(0);
      expect(dockerfile.problems()).toEqual([]);
    });

    it('is built in one stage and holds only what the last copies from it (multi-stage)', () => {
      expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
      const build = dockerfile.stage('build');
      expect(build.runs().some((run) => run.includes('npm run build'))).toBe(true);
      expect(final.copies().length).toBeGreaterThan(0);
      for (const copy of final.copies()) expect(copy.from, `COPY ${copy.sources.join(' ')}`).toBe('build');
    });

    it('runs on Node 20 or newer, slim', () => {
      for (const stage of dockerfile.stages) {
        const [, major] = /^node:(\d+)[\w.-]*-slim$/.exec(dockerfile.expand(stage.image)) ?? [];
        expect(Number(major), stage.image).toBeGreaterThanOrEqual(20);
      }
    });

    it('runs as a numeric non-root user, and its code belongs to root', () => {
      const user = final.last('USER')?.getArgumentsContent() ?? '';
      expect(user).toMatch(/^[1-9]\d*:[1-9]\d*$/);
      // a process that can rewrite its own code outlives any fix
      for (const copy of final.copies()) expect(copy.flags, copy.destination).not.toHaveProperty('chown');
    });

    it('starts under tini, which forwards signals and reaps children', () => {
      expect(final.execForm('ENTRYPOINT')?.slice(0, 2)).toEqual(['/usr/bin/tini', '--']);
      expect(final.runs().some((run) => /apt-get install[^&]*\btini\b/.test(run))).toBe(true);
    });

    it('carries the OCI labels, with the version of package.json', () => {
      const labels = final.labels();
      for (const key of ['title', 'description', 'source', 'licenses', 'version', 'revision']) {
        expect(dockerfile.expand(labels[`org.opencontainers.image.${key}`] ?? '', final), key).not.toBe('');
      }
      expect(dockerfile.expand(labels['org.opencontainers.image.version']!, final)).toBe(pkg.version);
    });

    it('starts with the command the README gives', () => {
      expect(startCommand(final)).toEqual(starts);
    });

    it('copies only what exists: sources of the build context (not left out by .dockerignore), and what the build made', () => {
      const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8');
      for (const stage of dockerfile.stages) {
        for (const copy of stage.copies()) {
          for (const source of copy.sources) {
            if (copy.from === undefined) {
              expect(existsSync(join(ROOT, source)), `${source} (build context)`).toBe(true);
              expect(dockerIgnored(ignore, source), `${source} is in .dockerignore`).toBeUndefined();
            } else {
              const build = dockerfile.stage(copy.from);
              const workdir = build.workdir();
              if (source.startsWith(`${workdir}/`))
                expect(existsSync(hostPath(build, source)), `${source} after npm run build`).toBe(true);
              // anything else the build stage makes itself, by a command that names it
              else
                expect(
                  build.runs().some((run) => run.includes(posix.dirname(source))),
                  `${source}: made by a RUN of stage ${copy.from}`,
                ).toBe(true);
            }
          }
        }
      }
    });
  });
});

describe('control plane image', () => {
  const dockerfile = image('control-plane');
  const final = dockerfile.final;

  it("runs the README's server-mode start command; the worker and migrations are other commands of the same image", () => {
    expect(startCommand(final)).toEqual(serverModeCommand('dist/apps/control-plane/src/main.js'));
    const row = tableRows(readmeSection('Images')).find((cells) => cells[0]!.includes('control-plane'))!;
    const spans = codeSpans(row[2]!);
    expect(spans).toContain(serverModeCommand('dist/apps/worker/src/main.js').join(' '));
    expect(spans).toContain(serverModeCommand('bin/aileron-cp.js', 'migrate').join(' '));
  });

  it('checks its health on /healthz, at the port it listens on', () => {
    const healthcheck = final.last('HEALTHCHECK')?.getArgumentsContent() ?? '';
    expect(healthcheck).toMatch(/^CMD /);
    expect(healthcheck).toContain('/healthz');
    expect(healthcheck).toContain('process.env.PORT');
  });

  it('writes only to its data dir (a volume it owns) and /tmp', () => {
    const env = final
      .keyword('ENV')
      .map((i) => i.getArgumentsContent())
      .join(' ');
    expect(env).toMatch(/AILERON_DATA_DIR=\/var\/lib\/aileron\b/);
    expect(final.keyword('VOLUME').map((i) => i.getArgumentsContent())).toContain('["/var/lib/aileron"]');
    const uid = (final.last('USER')?.getArgumentsContent() ?? '').split(':')[0];
    expect(
      final.runs().some((run) => new RegExp(`install -d -o ${uid} -g \\d+ -m 0700 /var/lib/aileron`).test(run)),
    ).toBe(true);
  });

  it('carries what local sandboxes need: bubblewrap, and git for their histories (run on a bare repository by the control plane, and inside the sandbox)', () => {
    const installs = final
      .runs()
      .filter((run) => /apt-get install/.test(run))
      .join(' ');
    // Debian's packages put them where the local drivers and the runner look: /usr/bin/bwrap, /usr/bin/git
    for (const tool of ['bubblewrap', 'git']) expect(installs).toMatch(new RegExp(`\\b${tool}\\b`));
  });

  it('holds production dependencies only, and the compiled code needs no other package', () => {
    const build = dockerfile.stage('build');
    expect(build.runs().some((run) => /npm prune --omit=dev/.test(run))).toBe(true);
    const builtins = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]));
    const missing = [
      ...requiredPackages(join(ROOT, 'dist', 'apps')),
      ...requiredPackages(join(ROOT, 'dist', 'libs')),
    ].filter(([name]) => !builtins.has(name) && !(name in pkg.dependencies));
    expect(missing.map(([name, file]) => `${name} (required by ${file})`)).toEqual([]);
  });

  it('migrates a database from the files the image holds, through the CLI', () => {
    const root = scratchDir('aileron-image-cp-');
    assemble(dockerfile, root, { linkNodeModules: true });
    const data = join(root, 'var', 'lib', 'aileron');
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: root, AILERON_DATA_DIR: data, LOG_LEVEL: 'warn' };
    const output = execFileSync('node', serverModeCommand('bin/aileron-cp.js', 'migrate').slice(1), {
      cwd: join(root, 'app'),
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(output).toMatch(/applied \S+/);
    expect(statSync(data).isDirectory()).toBe(true);
  }, 180_000);
});

describe('mcp-runner image', () => {
  const dockerfile = image('mcp-runner');
  const final = dockerfile.final;

  it("is the user and home the pool's pods run as", () => {
    expect(final.last('USER')?.getArgumentsContent()).toBe(`${POOL_POD_UID}:${POOL_POD_UID}`);
    expect(
      final
        .keyword('ENV')
        .map((i) => i.getArgumentsContent())
        .join(' '),
    ).toContain(`HOME=${POOL_POD_HOME}`);
    expect(
      final.runs().some((run) => run.includes(`--uid ${POOL_POD_UID}`) && run.includes(`--home-dir ${POOL_POD_HOME}`)),
    ).toBe(true);
  });

  it('runs the bridge by an absolute path: the pods start in the home directory', () => {
    const command = startCommand(final);
    expect(command[0]).toBe('node');
    expect(posix.isAbsolute(command[1]!)).toBe(true);
    expect(relative('/app', command[1]!)).toBe('dist/apps/mcp-bridge/src/main.js');
  });

  it('checks its health on the bridge /healthz, with the bearer token', () => {
    const healthcheck = final.last('HEALTHCHECK')?.getArgumentsContent() ?? '';
    expect(healthcheck).toContain('/healthz');
    expect(healthcheck).toContain('process.env.AILERON_BRIDGE_TOKEN');
  });

  it('serves from the files the image holds alone: the bridge and the MCP SDK', async () => {
    const root = scratchDir('aileron-image-runner-');
    // what the build stage's RUN does: the SDK and its dependencies, from the lock's install
    const runner = join(root, 'build-runner');
    execFileSync(
      'node',
      [join(ROOT, 'images', 'mcp-runner', 'runner-deps.cjs'), ROOT, runner, '@modelcontextprotocol/sdk'],
      { encoding: 'utf8' },
    );
    expect(
      dockerfile
        .stage('build')
        .runs()
        .some((run) => run.includes('runner-deps.cjs /app /runner @modelcontextprotocol/sdk')),
    ).toBe(true);
    const fs = join(root, 'fs');
    assemble(dockerfile, fs, { elsewhere: { '/runner/': runner } });
    const home = join(fs, 'home', 'mcp');
    mkdirSync(home, { recursive: true });
    const [node, script] = startCommand(final);
    const token = 'runner-test-token';
    // no NODE_PATH and nothing above the scratch dir: only the image's node_modules can resolve
    const bridge = spawn(node!, [join(fs, script!), '--host', '127.0.0.1', '--port', '0', '--', 'node', '-e', ''], {
      cwd: home,
      env: { PATH: process.env.PATH, HOME: home, AILERON_BRIDGE_TOKEN: token },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        let err = '';
        bridge.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const ready = /\{"ready":\{"port":(\d+)\}\}/.exec(out);
          if (ready) resolve(Number(ready[1]));
        });
        bridge.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
        bridge.once('exit', (code) => reject(new Error(`the bridge exited (${code}): ${err}`)));
      });
      const healthy = await fetch(`http://127.0.0.1:${port}/healthz`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(healthy.status).toBe(200);
      expect(await healthy.json()).toMatchObject({ ok: true });
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(401);
    } finally {
      bridge.kill('SIGTERM');
    }
  }, 60_000);
});

describe('sandbox-base image', () => {
  const dockerfile = image('sandbox-base');
  const final = dockerfile.final;

  it('bakes aileron-mcp in at /usr/local/bin/aileron-mcp, executable, the one bundled file', () => {
    const copy = final.copies().find((c) => c.destination === '/usr/local/bin/aileron-mcp');
    expect(copy?.sources).toEqual([`${dockerfile.stage('build').workdir()}/dist/aileron-mcp.cjs`]);
    expect(copy?.flags.chmod).toBe('0755');
  });

  it('labels the aileron-mcp version it bakes, and its build refuses a label the file does not match', () => {
    const version = dockerfile.expand(final.labels()['ai.aileron.mcp.version'] ?? '', final);
    expect(version).toBe(pkg.version);
    expect(
      execFileSync('node', [join(ROOT, 'dist', 'aileron-mcp.cjs'), '--version'], { encoding: 'utf8' }).trim(),
    ).toBe(version);
    const build = dockerfile.stage('build');
    expect(dockerfile.argDefault('AILERON_MCP_VERSION', build)).toBe(version);
    expect(
      build
        .runs()
        .some((run) => run.includes('test "$(node dist/aileron-mcp.cjs --version)" = "${AILERON_MCP_VERSION}"')),
    ).toBe(true);
  });

  it('carries the sandbox runner where the Kubernetes sandbox driver runs it, and the version its ping reports', () => {
    const copy = final.copies().find((c) => c.destination === '/opt/aileron/runner.js');
    expect(copy?.sources).toEqual([`${dockerfile.stage('build').workdir()}/dist/sandbox-runner/runner.cjs`]);
    const env = final
      .keyword('ENV')
      .map((i) => i.getArgumentsContent())
      .join(' ');
    expect(env).toContain('AILERON_MCP_VERSION=${AILERON_MCP_VERSION}');
    expect(dockerfile.argDefault('AILERON_MCP_VERSION', final)).toBe(pkg.version);
  });

  it('has a shell, git and common build tools, and no health check (nothing listens)', () => {
    const installs = final.runs().join(' ');
    for (const tool of ['bash', 'git', 'build-essential', 'ca-certificates', 'python3'])
      expect(installs).toMatch(new RegExp(`\\b${tool}\\b`));
    expect(final.last('HEALTHCHECK')?.getArgumentsContent()).toBe('NONE');
  });
});
