import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { AppConfig, prismaPaths } from '@aileron/config';
import { Prisma, PrismaClient } from './generated/prisma/client';
import { lockDataDir } from './data-dir-lock';
import { applyMigrations, MigrationTarget } from './migrator';

/**
 * A transaction handle. Services pass it from a unit of work to repositories
 * without seeing Prisma; only repositories look inside.
 */
export type Transaction = Prisma.TransactionClient & { readonly __transaction: unique symbol };

export interface DatabaseHandle {
  readonly kind: 'pglite' | 'postgres';
  readonly client: PrismaClient;
  /** the migrations openDatabase applied (none when it was told not to migrate) */
  readonly migrationsApplied: readonly string[];
  /** true when the database answers a trivial query */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  migrate?: boolean;
  log?: (line: string) => void;
}

/**
 * PostgreSQL's page cache inside PGlite. PGlite's default, PostgreSQL's 128 MB,
 * is all resident from the start (the wasm memory is written as it is laid
 * out): 128 MB of an idle embedded control plane's 480. An embedded database
 * is one developer's, tens of megabytes, and pages past the cache are read
 * from the operating system's own cache of the data files, so 32 MB keeps the
 * working set and gives the rest back (docs/pool.md § Performance).
 */
const PGLITE_SHARED_BUFFERS = '32MB';

function pgliteIn(dataDir: string | undefined): PGlite {
  if (dataDir) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  return new PGlite(dataDir, {
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`],
  });
}

/**
 * PGlite runs PostgreSQL on this thread, and its promises resolve without
 * ever giving the event loop a turn: a transaction of five statements, or a
 * batch of background deliveries one after another, would run as one long
 * task while every HTTP request that arrived meanwhile waits. A turn of the
 * event loop before each protocol message lets requests in between them.
 * The query's own lock is held throughout, so no other query's messages can
 * interleave with its own.
 */
function yieldBetweenMessages(pglite: PGlite): PGlite {
  const send = pglite.execProtocolStream.bind(pglite);
  pglite.execProtocolStream = async (...args: Parameters<PGlite['execProtocolStream']>) => {
    await new Promise<void>((resolve) => setImmediate(resolve));
    return send(...args);
  };
  return pglite;
}

/**
 * Connections that fail fast and heal by themselves. While PostgreSQL is
 * down a request must be told so within a second or two, not wait on a
 * connect that the kernel retries for minutes; a connection the server
 * dropped is discarded by the pool and replaced on next use, so nothing needs
 * a restart when it comes back. A query that hangs on a lost peer is cut off
 * (keepalive, and query_timeout as the last resort, above any statement we run).
 */
export const POSTGRES_CONNECT_TIMEOUT_MS = 1000;
const POSTGRES_QUERY_TIMEOUT_MS = 30_000;

function postgresAdapter(database: { url: string; poolSize: number }, log?: (line: string) => void): PrismaPg {
  const lost = (error: Error): void =>
    log?.(`a PostgreSQL connection was lost (${error.message}); the pool replaces it on next use`);
  return new PrismaPg(
    {
      connectionString: database.url,
      max: database.poolSize,
      connectionTimeoutMillis: POSTGRES_CONNECT_TIMEOUT_MS,
      query_timeout: POSTGRES_QUERY_TIMEOUT_MS,
      keepAlive: true,
    },
    { onPoolError: lost, onConnectionError: lost },
  );
}

/** Opens the database the configuration names and brings its schema up to date. */
export async function openDatabase(
  database: AppConfig['database'] | { kind: 'pglite-memory'; pglite?: PGlite },
  options: OpenDatabaseOptions = {},
): Promise<DatabaseHandle> {
  const migrate = options.migrate ?? true;
  if (database.kind === 'postgres') {
    const applied = migrate
      ? (await applyMigrations({ kind: 'postgres', url: database.url }, { ...prismaPaths(), log: options.log })).applied
      : [];
    const client = new PrismaClient({ adapter: postgresAdapter(database, options.log) });
    return handle('postgres', client, applied, async () => client.$disconnect());
  }
  let unlock = (): void => {};
  if (database.kind === 'pglite') {
    // the lock lives beside pgdata/, which PGlite wants to itself
    mkdirSync(dirname(database.dataDir), { recursive: true, mode: 0o700 });
    unlock = lockDataDir(dirname(database.dataDir));
  }
  try {
    const pglite = yieldBetweenMessages(
      database.kind === 'pglite' ? pgliteIn(database.dataDir) : (database.pglite ?? new PGlite()),
    );
    await pglite.waitReady;
    const applied = migrate
      ? (
          await applyMigrations({ kind: 'pglite', pglite } satisfies MigrationTarget, {
            ...prismaPaths(),
            log: options.log,
          })
        ).applied
      : [];
    const client = new PrismaClient({ adapter: new PrismaPGlite(pglite) });
    return handle('pglite', client, applied, async () => {
      await client.$disconnect();
      if (!pglite.closed) await pglite.close();
      unlock();
    });
  } catch (error) {
    unlock();
    throw error;
  }
}

function handle(
  kind: DatabaseHandle['kind'],
  client: PrismaClient,
  migrationsApplied: string[],
  close: () => Promise<void>,
): DatabaseHandle {
  let closed = false;
  return {
    kind,
    client,
    migrationsApplied,
    async ping() {
      try {
        await client.$queryRaw`SELECT 1`;
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await close();
    },
  };
}
