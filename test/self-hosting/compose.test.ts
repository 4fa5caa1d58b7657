import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ADMIN_TOKEN_FILE, SETTINGS } from '@aileron/config';
import { createPostgresDatabase } from '../support/databases';
import { ensureBuilt } from './build';
import { ParsedDockerfile } from './dockerfiles';
import { readmeSection, ROOT, serverModeCommand, shellLines } from './readme';

/**
 * docker-compose.yml, read as Compose reads it (YAML with merge keys) and
 * held to the issue: everything from the built image, health checks and
 * depends_on conditions, the root key from a file, the owner token written
 * to a mounted file. No Docker engine runs here, so the one-shot first start
 * runs as its script, against a real PostgreSQL.
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
}

const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, Service>; volumes: Record<string, unknown> };
const services = compose.services;
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const REPLICAS = ['control-plane-1', 'control-plane-2'];
const AILERON = ['migrate', ...REPLICAS, 'worker'];

/** `volume:/path[:ro]` of a service, by container path. */
function mounts(service: Service): { source: string; target: string; readOnly: boolean }[] {
  return (service.volumes ?? []).map((spec) => {
    const [source, target, mode] = spec.split(':');
    return { source: source!, target: target!, readOnly: mode === 'ro' };
  });
}

/** The migration's shell script, as Compose hands it to sh (`$$` is Compose's escape for `$`). */
function migrateScript(): string {
  const command = services.migrate!.command!;
  expect(command.slice(0, 2)).toEqual(['sh', '-c']);
  return command[2]!.replaceAll('$$', '$');
}

describe('docker-compose.yml', () => {
  it('runs every Aileron process from the control-plane image built from its Dockerfile: no sources mounted, no npm at start', () => {
    expect(Object.keys(services).filter((name) => services[name]!.image?.startsWith('ghcr.io/aileron/')).sort()).toEqual([...AILERON].sort());
    for (const name of AILERON) {
      const service = services[name]!;
      expect(service.image, name).toBe(`ghcr.io/aileron/control-plane:${pkg.version}`);
      expect(service.build, name).toEqual({ context: '.', dockerfile: 'images/control-plane/Dockerfile' });
      expect(existsSync(join(ROOT, service.build!.dockerfile))).toBe(true);
      for (const mount of mounts(service)) expect(mount.source, `${name} mounts ${mount.source}`).toMatch(/^[a-z][a-z0-9-]*$/);
      expect(JSON.stringify(service.command ?? [])).not.toMatch(/npm/);
    }
  });

  it("starts each process with the README's command: the replicas with the image's, the worker and the migration with theirs", () => {
    const cmd = new ParsedDockerfile(join(ROOT, 'images', 'control-plane', 'Dockerfile')).final.execForm('CMD');
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
    expect(services.proxy!.depends_on).toEqual(Object.fromEntries(REPLICAS.map((name) => [name, { condition: 'service_healthy' }])));
  });

  it("checks health: PostgreSQL, Redis and the proxy by their own test, the replicas by the image's /healthz; nothing checks what serves no HTTP", () => {
    for (const name of ['postgres', 'redis', 'proxy']) expect(services[name]!.healthcheck?.test?.length, name).toBeGreaterThan(1);
    expect(services.proxy!.healthcheck!.test!.join(' ')).toContain('/healthz');
    const image = new ParsedDockerfile(join(ROOT, 'images', 'control-plane', 'Dockerfile')).final;
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
      for (const variable of Object.keys(services[name]!.environment ?? {})) expect(SETTINGS, `${name}: ${variable}`).toHaveProperty(variable);
    }
  });

  it('runs two replicas, each reachable by the other at its own address, behind one port on this machine', () => {
    for (const name of REPLICAS) expect(services[name]!.environment!.AILERON_REPLICA_URL, name).toBe(`http://${name}:8080`);
    expect(services.proxy!.ports).toEqual(['127.0.0.1:8080:8080']);
    const [config] = mounts(services.proxy!).filter((mount) => mount.target.startsWith('/etc/nginx/'));
    const nginx = readFileSync(join(ROOT, config!.source), 'utf8');
    expect([...nginx.matchAll(/^\s*server (\S+);/gm)].map((match) => match[1])).toEqual(REPLICAS.map((name) => `${name}:8080`));
    expect(nginx).toMatch(/listen 8080;/);
    // server-sent events, MCP streams and ?wait=60 long polls
    expect(nginx).toMatch(/proxy_buffering off;/);
  });

  it("is what the README's compose section runs: the owner token where a replica mounts the volume, the API on the proxy's port", () => {
    const lines = shellLines(readmeSection('Run with docker compose'));
    expect(lines[0]).toBe('docker compose up -d --build');
    const [, service, file] = /^TOKEN=\$\(docker compose exec (\S+) cat (\S+)\)$/.exec(lines[1]!)!;
    expect(REPLICAS).toContain(service);
    const mount = mounts(services[service!]!).find((m) => file!.startsWith(`${m.target}/`))!;
    expect(mount.source).toBe(mounts(services.migrate!)[0]!.source);
    // the migration writes the token into its data dir, the image's AILERON_DATA_DIR, where it mounts that volume
    expect(mounts(services.migrate!)[0]!.target).toBe('/var/lib/aileron');
    expect(posix.relative(mount.target, file!)).toBe(ADMIN_TOKEN_FILE);
    expect(migrateScript()).toContain(`token="$AILERON_DATA_DIR/${ADMIN_TOKEN_FILE}"`);
    const port = services.proxy!.ports![0]!.split(':').slice(0, 2).join(':');
    expect(lines[2]).toContain(`http://${port}/v1/me`);
  });

  describe('the first start (the migration service, run as Compose runs it)', () => {
    let database: { url: string; drop(): Promise<void> };
    let volume: string;

    beforeAll(async () => {
      ensureBuilt(['dist/apps/cli/src/main.js']);
      database = await createPostgresDatabase();
      volume = mkdtempSync(join(tmpdir(), 'aileron-compose-volume-'));
    });
    afterAll(async () => {
      await database?.drop();
      if (volume) rmSync(volume, { recursive: true, force: true });
    });

    /** The script with the volume where the service mounts it, from the image's working directory (the repository's layout). */
    function firstStart() {
      const service = services.migrate!;
      const target = mounts(service)[0]!.target;
      const env = {
        PATH: process.env.PATH,
        HOME: volume,
        AILERON_DATA_DIR: volume,
        DATABASE_URL: database.url,
        AILERON_ROOT_KEY_FILE: service.environment!.AILERON_ROOT_KEY_FILE!.replace(target, volume),
      };
      expect(Object.keys(service.environment!).sort()).toEqual(['AILERON_ROOT_KEY_FILE', 'DATABASE_URL']);
      const result = spawnSync('sh', ['-c', migrateScript()], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
      return { status: result.status, output: `${result.stdout}${result.stderr}` };
    }

    it('makes the root key and the owner token (mode 0600) once, keeps them after, and survives a lost token', () => {
      const tokenFile = join(volume, ADMIN_TOKEN_FILE);
      const keyFile = join(volume, 'root-keys');

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
    }, 300_000);
  });
});
