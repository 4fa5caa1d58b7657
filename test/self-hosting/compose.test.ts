import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { ADMIN_TOKEN_FILE, loadConfig, SETTINGS } from '@aileron/config';
import { createPostgresDatabase } from '../support/databases';
import { eventually } from '../support/eventually';
import { freePort } from '../support/services';
import { ensureBuilt } from './build';
import { ParsedDockerfile } from './dockerfiles';
import { readmeSection, ROOT, serverModeCommand, shellLines } from './readme';

/**
 * docker-compose.yml, read as Compose reads it (YAML with merge keys) and
 * held to the issue: everything from the built image, health checks and
 * depends_on conditions, the root key from a file, the owner token written
 * to a volume only the migration mounts, sandboxes that can run. No Docker
 * engine runs here, so the one-shot first start runs as its script, against
 * a real PostgreSQL.
 */

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test?: string[]; disable?: boolean };
  ports?: string[];
  read_only?: boolean;
  tmpfs?: string[];
  cap_drop?: string[];
  security_opt?: string[];
}

const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const services = compose.services;
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const REPLICAS = ['control-plane'];
const AILERON = ['migrate', ...REPLICAS, 'worker'];

/** `volume:/path[:ro]` of a service, by container path. */
function mounts(service: Service): { source: string; target: string; readOnly: boolean }[] {
  return (service.volumes ?? []).map((spec) => {
    const [source, target, mode] = spec.split(':');
    return { source: source!, target: target!, readOnly: mode === 'ro' };
  });
}

const controlPlaneImage = new ParsedDockerfile(join(ROOT, 'images', 'control-plane', 'Dockerfile')).final;

/** Directories the image makes for its user (`install -d -o UID …`): where an empty volume takes that owner. */
function imageOwnedDirs(): string[] {
  const uid = (controlPlaneImage.last('USER')?.getArgumentsContent() ?? '').split(':')[0];
  return controlPlaneImage
    .runs()
    .flatMap((run) =>
      [...run.matchAll(new RegExp(`install -d -o ${uid} -g \\d+ -m \\d+ ([^&\\\\]+)`, 'g'))].flatMap((match) =>
        match[1]!.trim().split(/\s+/),
      ),
    );
}

/** The image's AILERON_DATA_DIR (ENV). */
function imageDataDir(): string {
  const env = controlPlaneImage
    .keyword('ENV')
    .map((i) => i.getArgumentsContent())
    .join(' ');
  return /AILERON_DATA_DIR=(\S+)/.exec(env)![1]!;
}

/** An nginx size (`257m`) in bytes. */
function nginxBytes(size: string): number {
  const [, number, unit] = /^(\d+)([kKmMgG]?)$/.exec(size)!;
  return (
    Number(number) * ({ '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 } as Record<string, number>)[unit!.toLowerCase()]!
  );
}

function nginxConfig(): string {
  const [config] = mounts(services.proxy!).filter((mount) => mount.target.startsWith('/etc/nginx/'));
  return readFileSync(join(ROOT, config!.source), 'utf8');
}

/** The migration's shell script, as Compose hands it to sh (`$$` is Compose's escape for `$`). */
function migrateScript(): string {
  const command = services.migrate!.command!;
  expect(command.slice(0, 2)).toEqual(['sh', '-c']);
  return command[2]!.replaceAll('$$', '$');
}

describe('docker-compose.yml', () => {
  it('runs every Aileron process from the control-plane image built from its Dockerfile: no sources mounted, no npm at start', () => {
    expect(
      Object.keys(services)
        .filter((name) => services[name]!.image?.startsWith('ghcr.io/aileron/'))
        .sort(),
    ).toEqual([...AILERON].sort());
    for (const name of AILERON) {
      const service = services[name]!;
      expect(service.image, name).toBe(`ghcr.io/aileron/control-plane:${pkg.version}`);
      expect(service.build, name).toEqual({ context: '.', dockerfile: 'images/control-plane/Dockerfile' });
      expect(existsSync(join(ROOT, service.build!.dockerfile))).toBe(true);
      for (const mount of mounts(service))
        expect(mount.source, `${name} mounts ${mount.source}`).toMatch(/^[a-z][a-z0-9-]*$/);
      expect(JSON.stringify(service.command ?? [])).not.toMatch(/npm/);
    }
  });

  it("starts each process with the README's command: the replicas with the image's, the worker and the migration with theirs", () => {
    const cmd = controlPlaneImage.execForm('CMD');
    expect(cmd).toEqual(serverModeCommand('dist/apps/control-plane/src/main.js'));
    for (const name of REPLICAS) expect(services[name]!.command, name).toBeUndefined();
    expect(services.worker!.command).toEqual(serverModeCommand('dist/apps/worker/src/main.js'));
    const script = migrateScript();
    expect(script).toContain(serverModeCommand('bin/aileron-cp.js', 'migrate').join(' '));
    expect(script).toContain(serverModeCommand('bin/aileron-cp.js', 'bootstrap').join(' '));
  });

  it('waits for what each needs: PostgreSQL and Redis healthy, the migration finished', () => {
    expect(services.migrate!.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    for (const name of [...REPLICAS, 'worker']) {
      expect(services[name]!.depends_on, name).toEqual({
        migrate: { condition: 'service_completed_successfully' },
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
      });
    }
    expect(services.proxy!.depends_on).toEqual(
      Object.fromEntries(REPLICAS.map((name) => [name, { condition: 'service_healthy' }])),
    );
  });

  it("checks health: PostgreSQL, Redis and the proxy by their own test, the replicas by the image's /healthz; nothing checks what serves no HTTP", () => {
    for (const name of ['postgres', 'redis', 'proxy'])
      expect(services[name]!.healthcheck?.test?.length, name).toBeGreaterThan(1);
    expect(services.proxy!.healthcheck!.test!.join(' ')).toContain('/healthz');
    const image = controlPlaneImage;
    expect(image.last('HEALTHCHECK')?.getArgumentsContent()).toContain('/healthz');
    for (const name of REPLICAS) expect(services[name]!.healthcheck, name).toBeUndefined();
    for (const name of ['migrate', 'worker']) expect(services[name]!.healthcheck, name).toEqual({ disable: true });
  });

  it('gives every process a read-only root file system, writable only in its data volume and /tmp', () => {
    for (const name of AILERON) {
      expect(services[name]!.read_only, name).toBe(true);
      expect(services[name]!.tmpfs, name).toEqual(['/tmp']);
    }
  });

  it('takes the root key from a file the migration makes, never from the environment, read-only to the replicas and the worker', () => {
    for (const [name, service] of Object.entries(services)) {
      expect(Object.keys(service.environment ?? {}), name).not.toContain('AILERON_ROOT_KEY');
    }
    const made = services.migrate!.environment!.AILERON_ROOT_KEY_FILE!;
    const migrateMount = mounts(services.migrate!).find((mount) => made.startsWith(`${mount.target}/`))!;
    expect(migrateMount.readOnly).toBe(false);
    expect(compose.volumes).toHaveProperty(migrateMount.source);
    for (const name of [...REPLICAS, 'worker']) {
      const file = services[name]!.environment!.AILERON_ROOT_KEY_FILE!;
      const mount = mounts(services[name]!).find((m) => file.startsWith(`${m.target}/`));
      expect(mount, `${name}: ${file} is on no volume`).toBeDefined();
      expect(mount!.source, name).toBe(migrateMount.source);
      expect(mount!.readOnly, name).toBe(true);
      expect(posix.relative(mount!.target, file)).toBe(posix.relative(migrateMount.target, made));
    }
  });

  it('passes only settings the configuration knows', () => {
    for (const name of AILERON) {
      for (const variable of Object.keys(services[name]!.environment ?? {}))
        expect(SETTINGS, `${name}: ${variable}`).toHaveProperty(variable);
    }
  });

  it('runs the control plane behind one port on this machine', () => {
    expect(services.proxy!.ports).toEqual(['127.0.0.1:8080:8080']);
    const nginx = nginxConfig();
    expect([...nginx.matchAll(/^\s*server (\S+);/gm)].map((match) => match[1])).toEqual(
      REPLICAS.map((name) => `${name}:8080`),
    );
    expect(nginx).toMatch(/listen 8080;/);
    // server-sent events, MCP streams and ?wait=60 long polls
    expect(nginx).toMatch(/proxy_buffering off;/);
  });

  it('keeps the owner token (a platform operator’s) to the migration: no process that serves requests or runs sandboxes mounts the volume it is written to', () => {
    const token = `${imageDataDir()}/${ADMIN_TOKEN_FILE}`;
    const holding = mounts(services.migrate!).find((mount) => token.startsWith(`${mount.target}/`))!;
    expect(holding).toBeDefined();
    // nor the root key's volume: the migration moves a token an earlier release left there (tested below)
    expect(holding.source).not.toBe(
      mounts(services.migrate!).find((mount) =>
        services.migrate!.environment!.AILERON_ROOT_KEY_FILE!.startsWith(`${mount.target}/`),
      )!.source,
    );
    for (const [name, service] of Object.entries(services)) {
      if (name === 'migrate') continue;
      expect(
        mounts(service).map((mount) => mount.source),
        name,
      ).not.toContain(holding.source);
    }
  });

  it('runs sandboxes: one control plane, the local drivers (bubblewrap) keeping their files on a volume, with the Docker restrictions bubblewrap cannot work under lifted for it alone', () => {
    // the local driver keeps a sandbox with the process that runs it: one control plane, not replicas behind a balancer
    const controlPlanes = AILERON.filter((name) => services[name]!.command === undefined);
    expect(controlPlanes).toEqual(['control-plane']);
    const service = services['control-plane']!;
    const config = loadConfig({ ...service.environment, AILERON_DATA_DIR: imageDataDir() });
    expect(config.sandboxes.driver).toBe('local');
    expect(config.pool.driver).toBe('local');
    // their files, histories and the pool's journal live in the data dir, on a named volume the image's user owns
    const data = mounts(service).find((mount) => mount.target === imageDataDir());
    expect(data).toMatchObject({ readOnly: false });
    expect(compose.volumes).toHaveProperty(data!.source);
    // user, PID and mount namespaces and a new /proc: refused by Docker's default seccomp and AppArmor profiles and its masked /proc paths
    expect(service.security_opt).toEqual(
      expect.arrayContaining(['seccomp=unconfined', 'apparmor=unconfined', 'systempaths=unconfined']),
    );
    // what stays: no capabilities, no new privileges (bubblewrap needs neither: it runs unprivileged, tested below)
    expect(service.security_opt).toContain('no-new-privileges:true');
    expect(service.cap_drop).toEqual(['ALL']);
    for (const [name, other] of Object.entries(services)) {
      if (name !== 'control-plane')
        expect(
          (other.security_opt ?? []).filter((opt) => opt.endsWith('=unconfined')),
          name,
        ).toEqual([]);
    }
  });

  it('takes a sandbox source through the proxy: nginx admits a body larger than the largest source the control plane accepts, and streams it on', () => {
    const config = loadConfig({ ...services['control-plane']!.environment, AILERON_DATA_DIR: imageDataDir() });
    const nginx = nginxConfig();
    const sizes = [...nginx.matchAll(/^\s*client_max_body_size (\S+);/gm)].map((match) => nginxBytes(match[1]!));
    expect(sizes).toHaveLength(1);
    // larger, so a source over the limit gets the control plane's 413 problem+json rather than nginx's page
    expect(sizes[0]).toBeGreaterThan(config.sandboxes.sourceMaxBytes);
    expect(nginx).toMatch(/proxy_request_buffering off;/);
  });

  it('mounts every volume a process writes to where the image makes a directory its user owns, so a fresh volume is writable', () => {
    const owned = imageOwnedDirs();
    expect(owned).toContain(imageDataDir());
    for (const name of AILERON) {
      for (const mount of mounts(services[name]!).filter((m) => !m.readOnly))
        expect(owned, `${name}: ${mount.source} on ${mount.target}`).toContain(mount.target);
    }
  });

  it("is what the README's compose section runs: the owner token read by a one-off migration container, the API on the proxy's port", () => {
    const lines = shellLines(readmeSection('Run with docker compose'));
    expect(lines[0]).toBe('docker compose up -d --build');
    // -T: no terminal, so no carriage returns in $TOKEN; --no-deps: the running services are left alone
    const [, service, file] = /^TOKEN=\$\(docker compose run --rm --no-deps -T (\S+) cat (\S+)\)$/.exec(lines[1]!)!;
    expect(service).toBe('migrate');
    // the migration writes the token into its data dir, the image's AILERON_DATA_DIR, where it mounts the token's volume
    const mount = mounts(services.migrate!).find((m) => file!.startsWith(`${m.target}/`))!;
    expect(mount.target).toBe(imageDataDir());
    expect(posix.relative(mount.target, file!)).toBe(ADMIN_TOKEN_FILE);
    expect(migrateScript()).toContain(`token="$AILERON_DATA_DIR/${ADMIN_TOKEN_FILE}"`);
    const port = services.proxy!.ports![0]!.split(':').slice(0, 2).join(':');
    expect(lines[2]).toContain(`http://${port}/v1/me`);
  });

  /**
   * The control-plane service without Docker: its environment and the image's, as the image's
   * user (10001) with no capabilities, an empty bounding set and no new privileges (what
   * `cap_drop: [ALL]` and `no-new-privileges` leave), from the repository's files (the image's
   * layout, tests of images.test.ts). What Docker's profiles would add is lifted in the file;
   * this shows that bubblewrap and git then have what they need, unprivileged.
   */
  describe('a sandbox on the control-plane service, run as far as this machine can run it', () => {
    const UID = Number((controlPlaneImage.last('USER')?.getArgumentsContent() ?? '').split(':')[0]);
    let database: { url: string; drop(): Promise<void> };
    let scratch: string;
    let child: ChildProcess | undefined;
    let url: string;
    let token: string;
    let output = '';

    beforeAll(async () => {
      ensureBuilt([
        'dist/apps/control-plane/src/main.js',
        'dist/apps/cli/src/main.js',
        'dist/sandbox-runner/runner.cjs',
        'dist/git-helper.cjs',
      ]);
      database = await createPostgresDatabase();
      scratch = mkdtempSync(join(tmpdir(), 'aileron-compose-cp-'));
      chmodSync(scratch, 0o755);
      // the volumes: the root key read-only to the service, its data dir its own
      const keys = join(scratch, 'aileron-secrets');
      const data = join(scratch, 'aileron-data');
      mkdirSync(keys, { mode: 0o700 });
      mkdirSync(data, { mode: 0o700 });
      const keyFile = join(keys, 'root-keys');
      writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
      for (const path of [keys, keyFile, data]) chownSync(path, UID, UID);
      const port = await freePort();
      url = `http://127.0.0.1:${port}`;
      const env: Record<string, string> = {
        PATH: '/usr/local/bin:/usr/bin:/bin',
        // the image's ENV, but on loopback only: this is a shared machine
        NODE_ENV: 'production',
        HOST: '127.0.0.1',
        PORT: String(port),
        AILERON_DATA_DIR: data,
        ...services['control-plane']!.environment,
        DATABASE_URL: database.url,
        REDIS_URL: inject('redisUrl'),
        AILERON_ROOT_KEY_FILE: keyFile,
        AILERON_QUEUE_PREFIX: `t-compose-${randomBytes(4).toString('hex')}`,
        LOG_LEVEL: 'warn',
      };
      // the migration's part, then the service under the image's user with nothing more
      execFileSync('node', serverModeCommand('bin/aileron-cp.js', 'migrate').slice(1), {
        cwd: ROOT,
        env,
        encoding: 'utf8',
        timeout: 120_000,
      });
      token = execFileSync('node', serverModeCommand('bin/aileron-cp.js', 'bootstrap').slice(1), {
        cwd: ROOT,
        env,
        encoding: 'utf8',
        timeout: 120_000,
      }).trim();
      const start = serverModeCommand('dist/apps/control-plane/src/main.js');
      child = spawn(
        'setpriv',
        [
          `--reuid=${UID}`,
          `--regid=${UID}`,
          '--clear-groups',
          '--inh-caps=-all',
          '--bounding-set=-all',
          '--no-new-privs',
          '--',
          ...start,
        ],
        { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await eventually(
        'the control plane to answer /healthz',
        async () => {
          if (child!.exitCode !== null) throw new Error(`it exited (${child!.exitCode}): ${output}`);
          return (await fetch(`${url}/healthz`).catch(() => undefined))?.ok;
        },
        { timeoutMs: 120_000, intervalMs: 200 },
      );
    }, 300_000);
    afterAll(async () => {
      if (child && child.exitCode === null) {
        const exited = new Promise((resolve) => child!.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await database?.drop();
      if (scratch) rmSync(scratch, { recursive: true, force: true });
    });

    function call(
      method: string,
      path: string,
      body?: Buffer | object,
      contentType = 'application/json',
    ): Promise<Response> {
      const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body);
      return fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(payload ? { 'content-type': contentType } : {}) },
        ...(payload ? { body: payload } : {}),
      });
    }

    it('takes a tar.gz source (unpacked by tar under bubblewrap), commits it with git, and runs git inside the sandbox', async () => {
      expect((await call('PUT', '/v1/workspaces/default/policy', { default: 'allow', rules: [] })).status).toBe(200);
      const created = await call('POST', '/v1/workspaces/default/sandboxes', { name: 'compose-check' });
      expect(created.status, await created.clone().text()).toBe(201);

      const tree = join(scratch, 'tree');
      mkdirSync(tree);
      writeFileSync(join(tree, 'README.md'), '# from compose\n');
      const archive = join(scratch, 'source.tar.gz');
      execFileSync('tar', ['-czf', archive, '-C', tree, '.']);
      const uploaded = await call(
        'PUT',
        '/v1/workspaces/default/sandboxes/compose-check/source',
        readFileSync(archive),
        'application/gzip',
      );
      expect(uploaded.ok, `${uploaded.status} ${await uploaded.text()}\n${output}`).toBe(true);
      // the bundle waits for the last snapshot: then the history shows the source's commit
      expect((await call('GET', '/v1/workspaces/default/sandboxes/compose-check/bundle')).status).toBe(200);
      const listed = (await (await call('GET', '/v1/workspaces/default/sandboxes/compose-check/snapshots')).json()) as {
        snapshots: { files: { path: string }[] }[];
      };
      expect(listed.snapshots.flatMap((snapshot) => snapshot.files.map((file) => file.path))).toContain('README.md');

      const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp/default/sandbox`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      });
      const client = new Client({ name: 'compose-check', version: '1.0.0' });
      await client.connect(transport);
      try {
        const ran = (await client.callTool({
          name: 'bash',
          arguments: { sandbox: 'compose-check', command: 'git --version && cat README.md && id -u' },
        })) as { structuredContent?: { stdout: string; exitCode: number }; content: { text?: string }[] };
        const text = JSON.stringify(ran);
        expect(text, text).toMatch(/git version \d/);
        expect(text).toContain('# from compose');
      } finally {
        await client.close();
      }
      // the sandbox's files are on the data volume, the service's own
      expect(statSync(join(scratch, 'aileron-data', 'sandboxes')).uid).toBe(UID);
    }, 180_000);
  });

  describe('the first start (the migration service, run as Compose runs it)', () => {
    let database: { url: string; drop(): Promise<void> };
    /** a directory standing for each volume the migration mounts, by volume name */
    let volumes: Record<string, string>;

    beforeAll(async () => {
      ensureBuilt(['dist/apps/cli/src/main.js']);
      database = await createPostgresDatabase();
      volumes = Object.fromEntries(
        mounts(services.migrate!).map((mount) => [
          mount.source,
          mkdtempSync(join(tmpdir(), `aileron-compose-${mount.source}-`)),
        ]),
      );
    });
    afterAll(async () => {
      await database?.drop();
      for (const dir of Object.values(volumes ?? {})) rmSync(dir, { recursive: true, force: true });
    });

    /** Where a path of the migration's container is on this machine. */
    function onHost(path: string): string {
      const mount = mounts(services.migrate!).find((m) => path.startsWith(`${m.target}/`))!;
      return join(volumes[mount.source]!, posix.relative(mount.target, path));
    }

    /** The script with each volume where the service mounts it, from the image's working directory (the repository's layout). */
    function firstStart() {
      const service = services.migrate!;
      const env = {
        PATH: process.env.PATH,
        HOME: tmpdir(),
        AILERON_DATA_DIR: onHost(`${imageDataDir()}/${ADMIN_TOKEN_FILE}`).slice(0, -ADMIN_TOKEN_FILE.length - 1),
        DATABASE_URL: database.url,
        AILERON_ROOT_KEY_FILE: onHost(service.environment!.AILERON_ROOT_KEY_FILE!),
      };
      expect(Object.keys(service.environment!).sort()).toEqual(['AILERON_ROOT_KEY_FILE', 'DATABASE_URL']);
      const result = spawnSync('sh', ['-c', migrateScript()], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
      return { status: result.status, output: `${result.stdout}${result.stderr}` };
    }

    it('makes the root key and the owner token (mode 0600) once, keeps them after, and survives a lost token', () => {
      const tokenFile = onHost(`${imageDataDir()}/${ADMIN_TOKEN_FILE}`);
      const keyFile = onHost(services.migrate!.environment!.AILERON_ROOT_KEY_FILE!);

      const first = firstStart();
      expect(first.status, first.output).toBe(0);
      expect(first.output).toContain('generated the root key');
      expect(first.output).toContain('owner API token written');
      const token = readFileSync(tokenFile, 'utf8').trim();
      expect(token).toMatch(/^ail_api_[A-Za-z0-9_-]{43}$/);
      const key = readFileSync(keyFile, 'utf8').trim();
      expect(Buffer.from(key, 'base64')).toHaveLength(32);
      for (const file of [tokenFile, keyFile]) expect(statSync(file).mode & 0o777, file).toBe(0o600);
      // the token is a secret: it goes to the file only
      expect(first.output).not.toContain(token);

      const again = firstStart();
      expect(again.status, again.output).toBe(0);
      expect(readFileSync(tokenFile, 'utf8').trim()).toBe(token);
      expect(readFileSync(keyFile, 'utf8').trim()).toBe(key);

      unlinkSync(tokenFile);
      const lost = firstStart();
      expect(lost.status, lost.output).toBe(0);
      expect(lost.output).toContain('already has its organisation');
      expect(existsSync(tokenFile)).toBe(false);
      expect(existsSync(`${tokenFile}.new`)).toBe(false);
      // the token never lands beside the root key, which the control plane and the worker mount
      expect(readdirSync(dirname(keyFile))).toEqual(['root-keys']);
    }, 300_000);

    it('moves the owner token an earlier release left beside the root key, where the control plane and the worker could read it', () => {
      const tokenFile = onHost(`${imageDataDir()}/${ADMIN_TOKEN_FILE}`);
      const keyFile = onHost(services.migrate!.environment!.AILERON_ROOT_KEY_FILE!);
      const earlier = join(dirname(keyFile), ADMIN_TOKEN_FILE);
      const token = `ail_api_${'x'.repeat(43)}`;
      rmSync(tokenFile, { force: true });
      writeFileSync(earlier, `${token}\n`, { mode: 0o600 });

      const upgraded = firstStart();
      expect(upgraded.status, upgraded.output).toBe(0);
      expect(upgraded.output).toContain('moved the owner API token');
      expect(readFileSync(tokenFile, 'utf8').trim()).toBe(token);
      expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
      expect(existsSync(earlier)).toBe(false);
      expect(upgraded.output).not.toContain(token);
    }, 300_000);
  });
});
