import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { prismaPaths } from '../../libs/platform/config/src/paths';
import { applyMigrations, SchemaEngineHost } from '../../libs/platform/database/src/migrator';
import { Service, startPostgres, startRedis } from './services';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string;
    postgresTemplate: string;
    redisUrl: string;
    pgliteSnapshot: string;
    pgliteDataDir: string;
  }
}

export const TEMPLATE_DB = 'aileron_template';

/**
 * Starts PostgreSQL and Redis unless DATABASE_URL / REDIS_URL name existing
 * ones, and migrates once: a PostgreSQL template database that every test
 * database is copied from, and a PGlite data dir likewise: embedded control
 * planes start on a copy of it and in-memory instances load its tarball, so
 * neither runs initdb nor the migrations again.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started: Service[] = [];
  const scratch = mkdtempSync(join(tmpdir(), 'aileron-test-'));
  try {
    const postgres = process.env.DATABASE_URL ? { url: process.env.DATABASE_URL, stop() {} } : await startPostgres();
    started.push(postgres);
    const redis = process.env.REDIS_URL ? { url: process.env.REDIS_URL, stop() {} } : await startRedis();
    started.push(redis);

    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DB} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
    await admin.end();
    const templateUrl = new URL(postgres.url);
    templateUrl.pathname = `/${TEMPLATE_DB}`;
    // one engine for both: it loads once
    const engine = new SchemaEngineHost();
    await applyMigrations({ kind: 'postgres', url: templateUrl.toString() }, { ...prismaPaths(), engine });

    // on disk, where an embedded control plane keeps it (<AILERON_DATA_DIR>/pgdata); closed cleanly, so a copy resumes without recovery
    const pgliteDataDir = join(scratch, 'pglite', 'pgdata');
    mkdirSync(pgliteDataDir, { recursive: true, mode: 0o700 });
    const pglite = new PGlite(pgliteDataDir);
    await applyMigrations({ kind: 'pglite', pglite }, { ...prismaPaths(), engine });
    const dump = await pglite.dumpDataDir('none');
    await pglite.close();
    const snapshot = join(scratch, 'pglite.tar');
    writeFileSync(snapshot, Buffer.from(await dump.arrayBuffer()));

    project.provide('postgresAdminUrl', postgres.url);
    project.provide('postgresTemplate', TEMPLATE_DB);
    project.provide('redisUrl', redis.url);
    project.provide('pgliteSnapshot', snapshot);
    project.provide('pgliteDataDir', pgliteDataDir);
  } catch (error) {
    for (const service of started.reverse()) service.stop();
    rmSync(scratch, { recursive: true, force: true });
    throw error;
  }
  return async () => {
    for (const service of started.reverse()) service.stop();
    rmSync(scratch, { recursive: true, force: true });
  };
}
