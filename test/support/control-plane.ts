import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import { ControlPlane, startControlPlane } from '../../apps/control-plane/src/control-plane';
import { loadConfig } from '../../libs/platform/config/src';
import { BootstrapService } from '../../libs/tenancy/src';
import { Backend, createPostgresDatabase } from './databases';

/** The root key every server-mode test replica shares (base64 of 32 bytes). */
export const TEST_ROOT_KEY = Buffer.alloc(32, 7).toString('base64');

export interface TestControlPlane {
  backend: Backend;
  url: string;
  /** the first organisation's owner token (a platform operator) */
  ownerToken: string;
  cp: ControlPlane;
  request(
    method: string,
    path: string,
    options?: { token?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/**
 * The real control plane on a free port: embedded mode on an on-disk PGlite
 * (the path `npm start` takes), or server mode on a fresh PostgreSQL database
 * with BullMQ on the run's Redis.
 */
/** A second replica of `first`'s installation: its PostgreSQL database, Redis and root key. */
export async function aReplicaOf(first: TestControlPlane, env: Record<string, string> = {}): Promise<TestControlPlane> {
  const database = first.cp.config.database;
  if (database.kind !== 'postgres')
    throw new Error('replicas share a PostgreSQL database; start the first one on postgres');
  return startTestControlPlane('postgres', { DATABASE_URL: database.url, ...env });
}

/** `cp` with `token` as its owner's: requests without a token of their own carry it. */
export function withOwnerToken(cp: TestControlPlane, token: string): TestControlPlane {
  return {
    ...cp,
    ownerToken: token,
    request: (method, path, options = {}) =>
      cp.request(method, path, { ...options, token: options.token === undefined ? token : options.token }),
  };
}

/**
 * The first replica of an installation on a PostgreSQL of the test's own (one
 * it may stop): migrated as it starts and bootstrapped like a fresh database.
 */
export async function startOnOwnDatabase(
  env: Record<string, string> & { DATABASE_URL: string },
): Promise<TestControlPlane> {
  const cp = await startTestControlPlane('postgres', env);
  const { token } = await cp.cp.app.get(BootstrapService).bootstrapServer('default', 'Default');
  return withOwnerToken(cp, token);
}

/**
 * The control plane of a suite whose subject is the HTTP contract rather than
 * the database: server mode on a PostgreSQL database of its own. It starts in
 * a fifth of an embedded one's CPU, and its queries run in PostgreSQL instead
 * of as WebAssembly on the test's own thread. The embedded mode keeps the
 * suites whose subject it is (test/database, test/e2e, the console's sign-in
 * links) and runs every suite that covers both backends. The tests' upstreams
 * and identity providers listen on loopback, which server mode refuses unless
 * allowed.
 */
export function startApiControlPlane(env: Record<string, string> = {}): Promise<TestControlPlane> {
  return startTestControlPlane('postgres', { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32', ...env });
}

/**
 * A PGlite data dir is some 1,200 files: Node's recursive copy and removal walk
 * them in JavaScript on the test's thread (about two seconds of CPU a control
 * plane); cp and rm do it in a process of their own.
 */
const run = promisify(execFile);

/**
 * A new data directory holding a copy of the run's migrated PGlite database, as
 * an installation that has been started before has it: its first start runs
 * neither initdb nor a migration (about 7 s of CPU), and still bootstraps, since
 * the database has no organisation yet. For the tests whose subject is not a
 * first start on an empty directory.
 */
export async function migratedDataDir(prefix = 'aileron-cp-'): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  await run('cp', ['-a', inject('pgliteDataDir'), join(dataDir, 'pgdata')]);
  return dataDir;
}

export async function startTestControlPlane(
  backend: Backend,
  env: Record<string, string> = {},
): Promise<TestControlPlane> {
  const dataDir = backend === 'pglite' ? await migratedDataDir() : mkdtempSync(join(tmpdir(), 'aileron-cp-'));
  // a second replica joins the first one's database (env.DATABASE_URL) instead of a fresh one
  const joining = backend === 'postgres' && env.DATABASE_URL !== undefined;
  const postgres = backend === 'postgres' && !joining ? await createPostgresDatabase() : undefined;
  const databaseUrl = env.DATABASE_URL ?? postgres?.url;
  const config = loadConfig({
    PORT: '1',
    LOG_LEVEL: 'warn',
    AILERON_DATA_DIR: dataDir,
    AILERON_OUTBOX_POLL_MS: '200',
    // what a test leaves under way at its end is waste: a worker's stop waits for its control planes' close
    AILERON_SHUTDOWN_GRACE_SECONDS: '3',
    ...(databaseUrl
      ? {
          DATABASE_URL: databaseUrl,
          // replicas of one installation share the root key, as production replicas must
          AILERON_ROOT_KEY: TEST_ROOT_KEY,
          REDIS_URL: inject('redisUrl'),
          AILERON_RUN_WORKERS: 'true',
          // test files run in parallel on one Redis: each database gets its own queues
          AILERON_QUEUE_PREFIX: `t-${new URL(databaseUrl).pathname.slice(1)}`,
        }
      : {}),
    ...env,
  });
  config.port = 0;
  const cp = await startControlPlane(config);
  let ownerToken = '';
  if (backend === 'pglite') ownerToken = readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
  else if (!joining) ownerToken = (await cp.app.get(BootstrapService).bootstrapServer('default', 'Default')).token;

  const request: TestControlPlane['request'] = async (method, path, options = {}) => {
    const token = options.token === undefined ? ownerToken : options.token;
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    }
    const response = await fetch(cp.url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await response.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: response.status, headers: response.headers, body: parsed, text };
  };

  return {
    backend,
    url: cp.url,
    ownerToken,
    cp,
    request,
    async close() {
      await cp.close();
      await postgres?.drop();
      await run('rm', ['-rf', dataDir]);
    },
  };
}
