import { PGlite } from '@electric-sql/pglite';
import type { SqlDriverAdapter } from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import type { Log, Query, Row } from './common';
import { type TrackedFactory, trackedFactory, withScriptRunner } from './driver-adapters';
import { applyWithLock } from './migration-history';
import { type LocalMigrations, type SchemaFile, toMigrationList } from './migration-files';
import { engineMessage, FILTERS, type SchemaEngineHost } from './schema-engine-host';

/** Migrating an embedded PGlite database, and PGlite as the shadow database of a diff. */

// PGlite is single-session, so an advisory lock would not keep two calls in
// this process apart; a promise chain per instance does. Kept beside the
// instance it belongs to (a WeakMap: PGlite has no place for it), so calls that
// share nothing else still take turns on the same database.
const pgliteQueues = new WeakMap<object, Promise<unknown>>();

export function serialized<T>(key: object, fn: () => Promise<T>): Promise<T> {
  const previous = pgliteQueues.get(key) ?? Promise.resolve();
  const next = previous.catch(() => {}).then(fn);
  pgliteQueues.set(key, next);
  return next;
}

export async function applyToPglite(
  pglite: PGlite,
  local: LocalMigrations,
  schema: () => Promise<SchemaFile>,
  engine: SchemaEngineHost,
  log: Log,
): Promise<string[]> {
  await pglite.waitReady;
  const query: Query = async (sql, params) => (await pglite.query<Row>(sql, params)).rows;
  const runEngine = async () => {
    const factory = pgliteFactory(pglite, null);
    const result = await engine.run(await schema(), factory, log, (running) =>
      running.applyMigrations({ migrationsList: toMigrationList(local), filters: FILTERS }),
    );
    return result.appliedMigrationNames;
  };
  const where = 'the PGlite database';
  return applyWithLock(
    { query, schemaName: 'public', where, redact: (t) => t, withLock: (fn) => fn(), runEngine },
    local,
    log,
  );
}

export async function diffWithPgliteShadow<T>(
  target: PGlite | undefined,
  schema: SchemaFile,
  engine: SchemaEngineHost,
  log: Log,
  fn: (engine: SchemaEngine) => Promise<T>,
): Promise<T> {
  // Only the shadow is written to. Without a target the main connection only
  // answers the engine's version query, so one throwaway instance serves as
  // both and saves a second PGlite boot (seconds).
  const shadow = new PGlite();
  try {
    await shadow.waitReady;
    const factory = pgliteFactory(target ?? shadow, shadow);
    return await engine.run(schema, factory, log, fn).catch((error: unknown) => {
      throw new Error(`Generating the migration failed: ${engineMessage(error)}`);
    });
  } finally {
    await shadow.close().catch(() => {});
  }
}

/** `shadow` null: this engine run must never need a shadow database. */
function pgliteFactory(main: PGlite, shadow: PGlite | null): TrackedFactory {
  const connect = async (db: PGlite): Promise<SqlDriverAdapter> =>
    // pglite-prisma-adapter's executeScript does not await `exec`: a failing
    // migration would be recorded as applied and its error left unhandled.
    withScriptRunner(await new PrismaPGlite(db).connect(), async (script) => {
      await db.exec(script);
    });
  return trackedFactory(
    () => connect(main),
    () => {
      // The adapter's own connectToShadowDb opens `memory://shadow` and never
      // closes it; ours is owned by the caller.
      if (!shadow) return Promise.reject(new Error('this operation needs no shadow database'));
      return connect(shadow);
    },
  );
}
