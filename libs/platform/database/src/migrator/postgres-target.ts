import { randomUUID } from 'node:crypto';
import { PrismaPg } from '@prisma/adapter-pg';
import type { SqlDriverAdapter } from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';
import pg from 'pg';
import { parse, toClientConfig } from 'pg-connection-string';
import { type Log, messageOf, type Query, quoteIdent, type Row } from './common';
import { type TrackedFactory, trackedFactory, withScriptRunner } from './driver-adapters';
import { type ApplyContext, applyWithLock } from './migration-history';
import { type LocalMigrations, type SchemaFile, toMigrationList } from './migration-files';
import { engineMessage, FILTERS, type SchemaEngineHost } from './schema-engine-host';

/**
 * Migrating a PostgreSQL database (under an advisory lock of ours, so replicas
 * starting together take turns), and a throwaway database on the same server as
 * the shadow database of a diff.
 */

/**
 * Our own lock, around the engine's. The engine takes
 * `pg_advisory_lock(72707369)` but gives up after 10 s, so a second replica
 * starting while a long migration runs would fail; ours waits without a limit
 * and lets the waiter skip the engine once the first one is done. The
 * two-integer form lives in a different key space from Prisma's single bigint,
 * so it never blocks the engine's own lock (nor `prisma migrate deploy`).
 */
const LOCK_KEYS = [72707369, 1] as const;

export interface PgTarget {
  config: pg.ClientConfig;
  schemaName: string;
  /** the URL with the password masked, for messages */
  display: string;
  secrets: string[];
}

/**
 * The target a URL names, read by pg-connection-string as node-postgres reads
 * it (the control plane's own connection), so `sslmode` and the rest mean the
 * same to both; `schema` is Prisma's.
 */
export function postgresTarget(url: string): PgTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    // Never echo the input: it may hold a password.
    throw new Error('Invalid PostgreSQL URL (expected postgres://user:password@host:port/database).');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new Error(`Invalid PostgreSQL URL: protocol ${u.protocol} (expected postgres: or postgresql:).`);
  }
  const secrets = u.password ? [decodeURIComponent(u.password), u.password, url] : [];
  let parsed: ReturnType<typeof parse>;
  let client: pg.ClientConfig;
  try {
    parsed = parse(url);
    client = toClientConfig(parsed);
  } catch (error) {
    // e.g. an sslrootcert that cannot be read
    throw new Error(redactSecrets(`Invalid PostgreSQL URL: ${messageOf(error)}`, secrets));
  }
  const schemaName = typeof parsed.schema === 'string' ? parsed.schema : 'public';
  // Discrete fields, never `connectionString`: node-postgres lets the string
  // override `database`, which would make adapter-pg's shadow database the main one.
  const config: pg.ClientConfig = {
    host: client.host || undefined,
    port: client.port ?? 5432,
    user: client.user || undefined,
    password: typeof client.password === 'string' && client.password !== '' ? client.password : undefined,
    database: client.database || undefined,
    ssl: client.ssl,
    application_name: client.application_name ?? 'aileron-migrator',
    ...(schemaName !== 'public' ? { options: `-c search_path=${quoteIdent(schemaName)}` } : {}),
  };
  const masked = new URL(url);
  if (masked.password) masked.password = '***';
  return { config, schemaName, display: masked.toString(), secrets };
}

function redactSecrets(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) if (secret.length > 0) out = out.split(secret).join('***');
  return out;
}

function redact(text: string, target: PgTarget): string {
  return redactSecrets(text, target.secrets);
}

/** Errors of pg carry the client (and its parameters); keep only the message. */
function pgError(context: string, error: unknown, target: PgTarget): Error {
  const e = error as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? ` [${e.code}]` : '';
  return new Error(redact(`${context} ${target.display}: ${messageOf(error)}${code}`, target));
}

async function connectClient(target: PgTarget, database?: string): Promise<pg.Client> {
  const client = new pg.Client({ ...target.config, ...(database ? { database } : {}) });
  // A server going away later must not crash the process through an
  // unhandled 'error' event; the pending query rejects anyway.
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    throw pgError('Cannot connect to PostgreSQL at', error, target);
  }
  return client;
}

export async function applyToPostgres(
  target: PgTarget,
  local: LocalMigrations,
  schema: () => Promise<SchemaFile>,
  engine: SchemaEngineHost,
  log: Log,
): Promise<string[]> {
  const client = await connectClient(target);
  const query: Query = async (sql, params) => {
    try {
      return (await client.query<Row>(sql, params)).rows;
    } catch (error) {
      throw pgError('Query failed on', error, target);
    }
  };
  const withLock = async <T>(fn: () => Promise<T>): Promise<T> => {
    const [got] = await query('SELECT pg_try_advisory_lock($1, $2) AS ok', [...LOCK_KEYS]);
    if (!got?.ok) {
      log('another process is migrating this database; waiting for it');
      await query('SELECT pg_advisory_lock($1, $2)', [...LOCK_KEYS]);
    }
    try {
      return await fn();
    } finally {
      await query('SELECT pg_advisory_unlock($1, $2)', [...LOCK_KEYS]).catch(() => {});
    }
  };
  try {
    const runEngine = async () => {
      const main = pgPool(target);
      try {
        const factory = pgFactory(target, main, null);
        const result = await engine.run(await schema(), factory, log, (running) =>
          running.applyMigrations({ migrationsList: toMigrationList(local), filters: FILTERS }),
        );
        return result.appliedMigrationNames;
      } finally {
        await main.end().catch(() => {});
      }
    };
    const ctx: ApplyContext = {
      query,
      schemaName: target.schemaName,
      where: target.display,
      redact: (text) => redact(text, target),
      withLock,
      runEngine,
    };
    return await applyWithLock(ctx, local, log);
  } finally {
    // Ending the session also drops our advisory lock should the unlock have failed.
    await client.end().catch(() => {});
  }
}

export async function diffWithPostgresShadow<T>(
  target: PgTarget,
  schema: SchemaFile,
  engine: SchemaEngineHost,
  log: Log,
  fn: (engine: SchemaEngine) => Promise<T>,
): Promise<T> {
  // adapter-pg's connectToShadowDb drops its database while still connected
  // (so it stays behind) and, given a connectionString, uses the main database:
  // create and drop our own instead.
  const shadowName = `prisma_migrate_shadow_db_${randomUUID().replace(/-/g, '')}`;
  const admin = await connectClient(target);
  const main = pgPool(target);
  let shadow: pg.Pool | null = null;
  try {
    try {
      await admin.query(`CREATE DATABASE ${quoteIdent(shadowName)}`);
    } catch (error) {
      throw pgError(`Cannot create the shadow database ${shadowName} (needs CREATEDB) on`, error, target);
    }
    log(`created shadow database ${shadowName}`);
    shadow = pgPool(target, shadowName);
    const factory = pgFactory(target, main, shadow);
    return await engine.run(schema, factory, log, fn).catch((error: unknown) => {
      throw new Error(
        redact(`Generating the migration against ${target.display} failed: ${engineMessage(error)}`, target),
      );
    });
  } finally {
    await main.end().catch(() => {});
    await shadow?.end().catch(() => {});
    await admin
      .query(`DROP DATABASE IF EXISTS ${quoteIdent(shadowName)} WITH (FORCE)`)
      // WITH (FORCE) needs PostgreSQL 13; our pool is closed, so a plain drop works too.
      .catch(() => admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(shadowName)}`))
      .catch((error: unknown) =>
        log(redact(`warning: could not drop shadow database ${shadowName}: ${messageOf(error)}`, target)),
      );
    await admin.end().catch(() => {});
  }
}

/**
 * adapter-pg cannot read Postgres `"char"` columns (type OID 18, e.g.
 * pg_class.relkind), which the engine's introspection selects; they are
 * single-byte text, so report them as text.
 */
class CharAsTextPool extends pg.Pool {
  // pg's typings overload `query` heavily; adapter-pg only uses the promise form.
  override query(...args: unknown[]): never {
    const result = (super.query as (...a: unknown[]) => unknown)(...args);
    if (!(result instanceof Promise)) return result as never;
    return result.then((res: pg.QueryResult | pg.QueryResult[]) => {
      for (const r of Array.isArray(res) ? res : [res]) {
        for (const field of r?.fields ?? []) if (field.dataTypeID === 18) field.dataTypeID = 25;
      }
      return res;
    }) as never;
  }
}

function pgPool(target: PgTarget, database?: string): pg.Pool {
  // One connection: the engine's advisory lock and the migration script then
  // share a session, as with the native engine, and no idle timeout can close
  // the session that holds the lock.
  const pool = new CharAsTextPool({
    ...target.config,
    ...(database ? { database } : {}),
    max: 1,
    idleTimeoutMillis: 0,
  });
  pool.on('error', () => {});
  return pool;
}

function pgFactory(target: PgTarget, main: pg.Pool, shadow: pg.Pool | null): TrackedFactory {
  const options = target.schemaName !== 'public' ? { schema: target.schemaName } : undefined;
  const connect = async (pool: pg.Pool): Promise<SqlDriverAdapter> =>
    // adapter-pg's executeScript splits the script at every ";" (breaking
    // strings and function bodies) and runs the parts on whichever pooled
    // connection is free; send it whole, as one simple query, like the native
    // engine does (PostgreSQL then runs it in one implicit transaction).
    withScriptRunner(await new PrismaPg(pool, options).connect(), async (script) => {
      await pool.query(script);
    });
  return trackedFactory(
    () => connect(main),
    () => (shadow ? connect(shadow) : Promise.reject(new Error('this operation needs no shadow database'))),
  );
}
