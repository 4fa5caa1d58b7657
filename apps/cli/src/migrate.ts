import { readdirSync } from 'node:fs';
import { AppConfig, loadConfigOrExit, prismaPaths } from '@aileron/config';
import { applyMigrations, openDatabase } from '@aileron/database';
import { note, out } from './output';

/** How messages name the database: never with its password. */
export function describeDatabase(database: AppConfig['database']): string {
  if (database.kind === 'pglite') return `the PGlite database in ${database.dataDir}`;
  try {
    const url = new URL(database.url);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return 'the PostgreSQL database';
  }
}

function localMigrationCount(): number {
  return readdirSync(prismaPaths().migrationsDir, { withFileTypes: true }).filter((entry) => entry.isDirectory())
    .length;
}

/** The names of the migrations this call applied. */
async function migrate(database: AppConfig['database'], log: ((line: string) => void) | undefined): Promise<string[]> {
  if (database.kind === 'postgres') {
    return (await applyMigrations({ kind: 'postgres', url: database.url }, { ...prismaPaths(), log })).applied;
  }
  // openDatabase is the only way in that takes the data-directory lock (PGlite
  // is single-process: a running control plane must keep us out)
  const handle = await openDatabase(database, { migrate: true, log });
  await handle.close();
  return [...handle.migrationsApplied];
}

export async function runMigrate(options: { verbose?: boolean }): Promise<void> {
  const config = loadConfigOrExit();
  const where = describeDatabase(config.database);
  const applied = await migrate(config.database, options.verbose ? note : undefined);
  for (const name of applied) out(`applied ${name} to ${where}`);
  if (applied.length === 0) {
    const count = localMigrationCount();
    out(`up to date: ${where} has all ${count} migration${count === 1 ? '' : 's'}`);
  }
}
