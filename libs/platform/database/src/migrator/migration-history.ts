import { createHash } from 'node:crypto';
import { type Log, type Query, quoteIdent } from './common';
import { type LocalMigration, type LocalMigrations, MIGRATION_FILE } from './migration-files';
import { engineMessage } from './schema-engine-host';

/**
 * What the database has applied, read from `_prisma_migrations` directly (no
 * engine needed), and the way both targets apply what is pending: the fast
 * path, then under the target's lock a second look and the engine.
 */

interface AppliedRow {
  name: string;
  checksum: string;
  startedAt: unknown;
  finishedAt: unknown;
  rolledBackAt: unknown;
  logs: string | null;
}

/** Prisma's checksum of a migration: the sha256 (hex) of migration.sql as written. */
export function migrationChecksum(sql: string): string {
  return createHash('sha256').update(sql, 'utf8').digest('hex');
}

function checksumMatches(sql: string, recorded: string): boolean {
  // The engine's rule: line endings do not matter (git may rewrite them), and
  // old engines wrote checksums without zero-padding.
  const variants = [sql, sql.replace(/\r\n/g, '\n'), sql.replace(/\n/g, '\r\n')];
  return variants.some((v) => {
    const digest = createHash('sha256').update(v, 'utf8').digest();
    const padded = digest.toString('hex');
    const unpadded = [...digest].map((b) => b.toString(16)).join('');
    return recorded === (recorded.length === 64 ? padded : unpadded);
  });
}

async function readApplied(query: Query, schemaName: string): Promise<AppliedRow[] | null> {
  const table = `${quoteIdent(schemaName)}."_prisma_migrations"`;
  const [exists] = await query('SELECT to_regclass($1) IS NOT NULL AS present', [table]);
  if (!exists?.present) return null;
  const rows = await query(
    `SELECT migration_name, checksum, started_at, finished_at, rolled_back_at, logs FROM ${table} ORDER BY started_at`,
  );
  return rows.map((r) => ({
    name: String(r.migration_name),
    checksum: String(r.checksum),
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    rolledBackAt: r.rolled_back_at,
    logs: typeof r.logs === 'string' ? r.logs : null,
  }));
}

interface Plan {
  pending: string[];
  /** rows the engine would call failed: started, never finished, not rolled back */
  unfinished: AppliedRow[];
}

/**
 * Compares the files with `_prisma_migrations` the way the engine does: rows
 * marked rolled back are ignored (a rolled-back migration is applied again,
 * which is how `prisma migrate resolve --rolled-back` recovers from a failure).
 * Unlike `migrate deploy`, an applied migration whose file changed is an error
 * here: the database no longer matches what the files say.
 */
function plan(local: LocalMigration[], applied: AppliedRow[] | null, where: string): Plan {
  const live = (applied ?? []).filter((r) => r.rolledBackAt == null);
  const pending: string[] = [];
  const edited: string[] = [];
  for (const m of local) {
    const rows = live.filter((r) => r.name === m.name);
    if (rows.length === 0) pending.push(m.name);
    else if (rows.every((r) => r.finishedAt != null) && !rows.every((r) => checksumMatches(m.sql, r.checksum))) {
      const recorded = rows.find((r) => !checksumMatches(m.sql, r.checksum))!.checksum;
      edited.push(
        `${m.name} (its ${MIGRATION_FILE} now has checksum ${migrationChecksum(m.sql)}, the database recorded ${recorded})`,
      );
    }
  }
  if (edited.length > 0) {
    throw new Error(
      `Migration ${edited.join('; ')} changed after being applied to ${where}. ` +
        'Restore the applied version of the file and put the change into a new migration.',
    );
  }
  return { pending, unfinished: live.filter((r) => r.finishedAt == null) };
}

function failedMigrationsError(rows: AppliedRow[], where: string): Error {
  const details = rows
    .map((r) => {
      const logs = r.logs
        ? engineMessage(r.logs)
            .replace(/^external connector error\s*/, '')
            .replace(/\s+/g, ' ')
        : '';
      return `${r.name} (started ${formatTime(r.startedAt)}, never finished${logs ? `: ${logs}` : ''})`;
    })
    .join('; ');
  const first = rows[0]!.name;
  return new Error(
    `Migration ${details} failed on ${where}; no further migrations are applied until it is resolved. ` +
      `Repair the database by hand, then either mark it rolled back so it is applied again ` +
      `(prisma migrate resolve --rolled-back ${first}, i.e. UPDATE "_prisma_migrations" SET rolled_back_at = now() ` +
      `WHERE migration_name = '${first}' AND finished_at IS NULL) or, if you completed it by hand, ` +
      `prisma migrate resolve --applied ${first}.`,
  );
}

export interface ApplyContext {
  query: Query;
  schemaName: string;
  /** how messages name the database (never with a password) */
  where: string;
  redact: (text: string) => string;
  withLock: <T>(fn: () => Promise<T>) => Promise<T>;
  /** the engine's applyMigrations; returns the names it applied */
  runEngine: () => Promise<string[]>;
}

/**
 * The part shared by both targets: fast path, then (under the target's lock)
 * a second look and the engine.
 */
export async function applyWithLock(ctx: ApplyContext, local: LocalMigrations, log: Log): Promise<string[]> {
  const { query, schemaName, where, withLock } = ctx;
  const first = plan(local.migrations, await readApplied(query, schemaName), where);
  // Unfinished rows may belong to another process migrating right now: only
  // call them failed once we hold the lock.
  if (first.pending.length === 0 && first.unfinished.length === 0) {
    log(`database schema up to date (${local.migrations.length} migrations applied); schema engine not loaded`);
    return [];
  }
  return withLock(async () => {
    const current = plan(local.migrations, await readApplied(query, schemaName), where);
    if (current.unfinished.length > 0) {
      const localNames = new Set(local.migrations.map((m) => m.name));
      const ours = current.unfinished.filter((r) => localNames.has(r.name));
      // The engine refuses to apply anything while any migration is failed.
      if (ours.length > 0 || current.pending.length > 0) throw failedMigrationsError(current.unfinished, where);
      log(`warning: unknown migration(s) failed on ${where}: ${current.unfinished.map((r) => r.name).join(', ')}`);
    }
    if (current.pending.length === 0) {
      log('database schema up to date (migrated by another process meanwhile)');
      return [];
    }
    log(`applying ${current.pending.length} migration(s): ${current.pending.join(', ')}`);
    let applied: string[];
    try {
      applied = await ctx.runEngine();
    } catch (error) {
      throw await engineFailure(ctx, current.pending, error);
    }
    log(applied.length > 0 ? `applied ${applied.join(', ')}` : 'no migrations applied');
    return applied;
  });
}

/**
 * The engine's message for a failed script does not say which migration it
 * was; `_prisma_migrations` does.
 */
async function engineFailure(ctx: ApplyContext, pending: string[], error: unknown): Promise<Error> {
  const detail = engineMessage(error);
  const after = await readApplied(ctx.query, ctx.schemaName).catch(() => null);
  const failed = after?.filter((r) => r.finishedAt == null && r.rolledBackAt == null && pending.includes(r.name)) ?? [];
  if (failed.length === 0) return new Error(ctx.redact(`Applying migrations to ${ctx.where} failed: ${detail}`));
  const name = failed[0]!.name;
  return new Error(
    ctx.redact(
      `Migration ${name} failed on ${ctx.where}: ${detail.replace(/^external connector error\s*/, '')}. ` +
        `PostgreSQL ran the script as one transaction, so none of it took effect (unless it commits by itself). ` +
        `It is recorded as failed in _prisma_migrations: fix ${MIGRATION_FILE}, then mark it rolled back to retry: ` +
        `UPDATE "_prisma_migrations" SET rolled_back_at = now() WHERE migration_name = '${name}' AND finished_at IS NULL ` +
        `(what prisma migrate resolve --rolled-back ${name} does).`,
    ),
  );
}

function formatTime(value: unknown): string {
  return value instanceof Date ? value.toISOString() : String(value);
}
