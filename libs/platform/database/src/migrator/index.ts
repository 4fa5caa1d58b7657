/**
 * Migrations without Prisma's native schema engine (none can be downloaded on
 * our build machines): `@prisma/schema-engine-wasm`, the same engine compiled to
 * WebAssembly, driven through driver adapters. Migrations stay in Prisma's own
 * layout (`<migrationsDir>/<YYYYMMDDHHMMSS>_<name>/migration.sql` plus
 * `migration_lock.toml`) and are recorded in `_prisma_migrations` by the engine
 * itself, so `prisma migrate deploy` keeps working wherever the native engine
 * can be had.
 *
 * No file of this folder imports path aliases: scripts/db-migrate-new.mjs
 * loads it on its own, without the rest of the build.
 *
 * Traps handled here, each explained where it is handled: the engine's
 * never-cleared 10 s timers and its bindings' module state (schema-engine-host.ts),
 * adapter connections it never disposes and two adapter bugs in
 * `executeScript` (driver-adapters.ts), adapter-pg's shadow database being the
 * main one when given a connectionString and its failing introspection of
 * `"char"` columns (postgres-target.ts), PGlite's unowned shadow instance
 * (pglite-target.ts).
 */
import type { PGlite } from '@electric-sql/pglite';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';
import { readLocalMigrations, readSchema, toMigrationList, writeMigration } from './migration-files';
import { applyToPglite, diffWithPgliteShadow, serialized } from './pglite-target';
import { applyToPostgres, diffWithPostgresShadow, postgresTarget } from './postgres-target';
import { FILTERS, SchemaEngineHost } from './schema-engine-host';

export { migrationChecksum } from './migration-history';
export { SchemaEngineHost } from './schema-engine-host';

export type MigrationTarget = { kind: 'pglite'; pglite: PGlite } | { kind: 'postgres'; url: string };

export interface MigrateOptions {
  migrationsDir: string;
  schemaPath: string;
  log?: (line: string) => void;
  /**
   * The schema engine to run with. Without one, this call makes its own,
   * loaded only if it has something to do; a process that migrates several
   * databases passes one to each call, so the engine loads once.
   */
  engine?: SchemaEngineHost;
}

const MIGRATION_NAME = /^[a-z0-9_]+$/;

/**
 * Applies the migrations in `opts.migrationsDir` that the database has not
 * seen, exactly as `prisma migrate deploy` would. When `_prisma_migrations`
 * already lists every migration with a matching checksum it returns without
 * loading the schema engine (the common case at process start).
 */
export async function applyMigrations(target: MigrationTarget, opts: MigrateOptions): Promise<{ applied: string[] }> {
  const log = opts.log ?? (() => {});
  const engine = opts.engine ?? new SchemaEngineHost();
  const local = await readLocalMigrations(opts.migrationsDir, { required: true });
  // Only the engine needs the schema, so the fast path does not read it.
  const schema = () => readSchema(opts.schemaPath);
  const applied =
    target.kind === 'pglite'
      ? await serialized(target.pglite, () => applyToPglite(target.pglite, local, schema, engine, log))
      : await applyToPostgres(postgresTarget(target.url), local, schema, engine, log);
  return { applied };
}

/**
 * Writes the next migration: the SQL that takes the database from what the
 * existing migrations build to what `opts.schemaPath` describes. Returns null
 * when there is nothing to change.
 *
 * How: the engine's `diff` from `{ tag: 'migrations' }` replays the existing
 * migrations into a shadow database, introspects it and diffs that against the
 * schema (the engine's `createMigration` cannot be used: the wasm build does not
 * hand it the adapter factory, so it fails with "PostgreSQL shadow DB must be
 * provided through an external factory"). Without a target the shadow is an
 * in-memory PGlite, so no PostgreSQL is needed; with a PostgreSQL target a
 * throwaway database on that server is created and dropped.
 */
export async function createMigration(
  name: string,
  /** `now` names the migration (its caller, a standalone script, reads the time) */
  opts: MigrateOptions & { target?: MigrationTarget; now: Date },
): Promise<{ dir: string; sql: string } | null> {
  if (!MIGRATION_NAME.test(name)) {
    throw new Error(`Invalid migration name "${name}": use lower-case letters, digits and underscores ([a-z0-9_]+).`);
  }
  const log = opts.log ?? (() => {});
  const engine = opts.engine ?? new SchemaEngineHost();
  const local = await readLocalMigrations(opts.migrationsDir, { required: false });
  const schema = await readSchema(opts.schemaPath);
  const migrationsList = toMigrationList(local);
  const target = opts.target;

  const diff = async (running: SchemaEngine): Promise<string | null> => {
    const result = await running.diff({
      from: { tag: 'migrations', ...migrationsList },
      to: { tag: 'schemaDatamodel', files: [{ path: schema.path, content: schema.content }] },
      script: true,
      exitCode: true,
      filters: FILTERS,
    });
    // exitCode 2 means "the diff is not empty" (like `prisma migrate diff --exit-code`).
    return result.exitCode === 2 && result.stdout ? result.stdout : null;
  };

  const sql =
    target?.kind === 'postgres'
      ? await diffWithPostgresShadow(postgresTarget(target.url), schema, engine, log, diff)
      : await diffWithPgliteShadow(target?.pglite, schema, engine, log, diff);
  if (sql === null) return null;
  return { dir: await writeMigration(local, name, sql, opts.now, log), sql };
}
