import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { applyMigrations, createMigration, migrationChecksum, type MigrationTarget, SchemaEngineHost } from './index';

// postgresAdminUrl (a server where we may CREATE DATABASE) comes from test/support/global-setup.ts.
const root = join(__dirname, '../../../../..');
// one engine for the whole file, as a process that migrates several databases would: it loads once
const engine = new SchemaEngineHost();
const paths = {
  schemaPath: join(root, 'prisma/schema.prisma'),
  migrationsDir: join(root, 'prisma/migrations'),
  engine,
};
const CORE_TABLES = ['organizations', 'workspaces', 'api_tokens', 'outbox_messages'];

interface Db {
  target: MigrationTarget;
  query(sql: string): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

interface Kind {
  name: 'pglite' | 'postgres';
  /** an empty database: the subject is applying every migration */
  fresh(): Promise<Db>;
  /** a database the project's migrations were applied to (the run's template or snapshot, test/support/global-setup.ts) */
  migrated(): Promise<Db>;
  /** target for createMigration: none for PGlite (its default), the server for PostgreSQL */
  shadowTarget(): Promise<{ target?: MigrationTarget; close(): Promise<void> }>;
}

async function pgliteDb(data: Blob): Promise<Db> {
  const pglite = new PGlite({ loadDataDir: data });
  await pglite.waitReady;
  return {
    target: { kind: 'pglite', pglite },
    query: async (sql) => (await pglite.query<Record<string, unknown>>(sql)).rows,
    close: () => pglite.close(),
  };
}

// initdb runs once for the file (about 3.6 s of CPU); each empty database is a copy of its data (about 0.9 s)
let emptyPglite: Promise<Blob> | undefined;
async function emptyPgliteData(): Promise<Blob> {
  emptyPglite ??= (async () => {
    const pglite = new PGlite();
    try {
      // a dump asked for before the instance is ready never ends
      await pglite.waitReady;
      return await pglite.dumpDataDir('none');
    } finally {
      await pglite.close();
    }
  })();
  return emptyPglite;
}

const pgliteKind: Kind = {
  name: 'pglite',
  fresh: async () => pgliteDb(await emptyPgliteData()),
  migrated: () => pgliteDb(new Blob([readFileSync(inject('pgliteSnapshot'))])),
  async shadowTarget() {
    return { target: undefined, close: async () => {} };
  },
};

function postgresKind(): Kind {
  let admin: pg.Client;
  const adminUrl = () => {
    const url = inject('postgresAdminUrl');
    if (!url) throw new Error('postgresAdminUrl is not provided (test/support/global-setup.ts starts PostgreSQL)');
    return url;
  };
  const copyOf = async (template: string): Promise<Db> => {
    if (!admin) {
      admin = new pg.Client({ connectionString: adminUrl() });
      await admin.connect();
    }
    const name = `migrator_${randomBytes(6).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
    const url = new URL(adminUrl());
    url.pathname = `/${name}`;
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    return {
      target: { kind: 'postgres', url: url.toString() },
      query: async (sql) => (await client.query(sql)).rows,
      async close() {
        await client.end();
        await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
      },
    };
  };
  const fresh = () => copyOf('template1');
  afterAll(async () => {
    await admin?.end();
  });
  return {
    name: 'postgres',
    fresh,
    migrated: () => copyOf(inject('postgresTemplate')),
    async shadowTarget() {
      const db = await fresh();
      return { target: db.target, close: () => db.close() };
    },
  };
}

async function tables(db: Db): Promise<string[]> {
  const rows = await db.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'");
  return rows.map((r) => String(r.tablename));
}

/** The project's migrations in the order they apply; the first is `<timestamp>_init`. */
async function projectMigrations(): Promise<string[]> {
  const names = (await readdir(paths.migrationsDir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  if (!/^\d{14}_init$/.test(names[0] ?? ''))
    throw new Error(`no <timestamp>_init migration first in ${paths.migrationsDir}`);
  return names;
}

async function initMigrationName(): Promise<string> {
  return (await projectMigrations())[0]!;
}

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'migrator-spec-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** A copy of prisma/migrations (and optionally the schema) that a test may change. */
async function copyOfProject(
  label: string,
): Promise<{ schemaPath: string; migrationsDir: string; engine: SchemaEngineHost }> {
  const dir = join(scratch, `${label}-${randomBytes(4).toString('hex')}`);
  await cp(paths.migrationsDir, join(dir, 'migrations'), { recursive: true });
  await cp(paths.schemaPath, join(dir, 'schema.prisma'));
  return { schemaPath: join(dir, 'schema.prisma'), migrationsDir: join(dir, 'migrations'), engine };
}

describe.each([pgliteKind, postgresKind()])('migrator on $name', { timeout: 120_000 }, (kind) => {
  it('applies the migrations once, records them like prisma migrate deploy, then takes the fast path', async () => {
    const db = await kind.fresh();
    try {
      const all = await projectMigrations();
      const init = all[0]!;
      const firstLog: string[] = [];
      let started = performance.now();
      const first = await applyMigrations(db.target, { ...paths, log: (l) => firstLog.push(l) });
      const firstMs = performance.now() - started;
      expect(first.applied).toEqual(all);
      expect(await tables(db)).toEqual(expect.arrayContaining(CORE_TABLES));
      expect(firstLog.some((l) => l.includes('schema engine ready'))).toBe(true);

      const [row] = await db.query(
        'SELECT migration_name, checksum, finished_at, rolled_back_at, applied_steps_count FROM _prisma_migrations ORDER BY migration_name LIMIT 1',
      );
      const sql = await readFile(join(paths.migrationsDir, init, 'migration.sql'), 'utf8');
      expect(row).toMatchObject({
        migration_name: init,
        checksum: migrationChecksum(sql),
        rolled_back_at: null,
        applied_steps_count: 1,
      });
      expect(row?.finished_at).toBeInstanceOf(Date);

      const secondLog: string[] = [];
      started = performance.now();
      const second = await applyMigrations(db.target, { ...paths, log: (l) => secondLog.push(l) });
      const secondMs = performance.now() - started;
      expect(second.applied).toEqual([]);
      expect(secondLog.some((l) => l.includes('schema engine not loaded'))).toBe(true);
      expect(secondLog.some((l) => l.includes('schema engine ready'))).toBe(false);
      expect(await db.query('SELECT 1 FROM _prisma_migrations')).toHaveLength(all.length);
      console.log(`[${kind.name}] first apply ${firstMs.toFixed(0)} ms, no-op apply ${secondMs.toFixed(1)} ms`);
    } finally {
      await db.close();
    }
  });

  it('refuses a migration whose file changed after it was applied, naming it', async () => {
    const db = await kind.migrated();
    try {
      const project = await copyOfProject('tampered');
      const init = await initMigrationName();
      // the project's migrations are applied already, with their checksums: a run finds nothing to do
      expect((await applyMigrations(db.target, project)).applied).toEqual([]);
      const file = join(project.migrationsDir, init, 'migration.sql');
      await writeFile(file, `${await readFile(file, 'utf8')}\n-- edited afterwards\n`);
      const error = await applyMigrations(db.target, project).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error?.message).toMatch(/changed after being applied/);
      expect(error?.message).toContain(init);
      expect(error?.message).toContain('checksum');
    } finally {
      await db.close();
    }
  });

  it('reports a failed migration by name, keeps it out of the schema, and refuses to go on', async () => {
    const db = await kind.migrated();
    try {
      const project = await copyOfProject('failing');
      const broken = '29990101000000_broken';
      await cp(join(project.migrationsDir, await initMigrationName()), join(project.migrationsDir, broken), {
        recursive: true,
      });
      // A semicolon inside a string: adapter-pg's own executeScript would split it here.
      await writeFile(
        join(project.migrationsDir, broken, 'migration.sql'),
        "CREATE TABLE half_done (note TEXT DEFAULT 'a;b');\nSELECT * FROM no_such_table;\n",
      );
      await expect(applyMigrations(db.target, project)).rejects.toThrow(new RegExp(`${broken}[\\s\\S]*no_such_table`));
      // the script ran as one implicit transaction, as with the native engine
      expect(await tables(db)).not.toContain('half_done');
      expect(await tables(db)).toEqual(expect.arrayContaining(CORE_TABLES));
      const [row] = await db.query(
        `SELECT finished_at, logs FROM _prisma_migrations WHERE migration_name = '${broken}'`,
      );
      expect(row?.finished_at).toBeNull();
      expect(String(row?.logs)).toContain('no_such_table');

      await expect(applyMigrations(db.target, project)).rejects.toThrow(new RegExp(`Migration ${broken} .*failed`));
    } finally {
      await db.close();
    }
  });

  it('serializes concurrent calls: one applies, the others find nothing to do', async () => {
    const db = await kind.fresh();
    try {
      const all = await projectMigrations();
      const results = await Promise.all([1, 2, 3].map(() => applyMigrations(db.target, paths)));
      expect(results.flatMap((r) => r.applied)).toEqual(all);
      expect(await db.query('SELECT 1 FROM _prisma_migrations')).toHaveLength(all.length);
    } finally {
      await db.close();
    }
  });

  it('createMigration returns null when the schema matches the migrations', async () => {
    const shadow = await kind.shadowTarget();
    try {
      const project = await copyOfProject('unchanged');
      expect(await createMigration('nothing', { ...project, target: shadow.target, now: new Date() })).toBeNull();
      expect((await readdir(project.migrationsDir)).sort()).toEqual(
        [...(await projectMigrations()), 'migration_lock.toml'].sort(),
      );
    } finally {
      await shadow.close();
    }
  });

  it('createMigration writes the next migration for a new model, which then applies', async () => {
    const shadow = await kind.shadowTarget();
    const db = await kind.migrated();
    try {
      const project = await copyOfProject('new-model');
      await writeFile(
        project.schemaPath,
        `${await readFile(project.schemaPath, 'utf8')}\nmodel Widget {\n  id   String @id @db.Uuid\n  name String\n\n  @@map("widgets")\n}\n`,
      );
      const created = await createMigration('add_widgets', { ...project, target: shadow.target, now: new Date() });
      expect(created).not.toBeNull();
      expect(created!.sql).toContain('CREATE TABLE "widgets"');
      expect(created!.dir).toMatch(/[/\\]\d{14}_add_widgets$/);
      expect(await readFile(join(created!.dir, 'migration.sql'), 'utf8')).toBe(created!.sql);

      const applied = await applyMigrations(db.target, project);
      // a database that has every earlier migration gets only the new one, as an installation upgrading would
      expect(applied.applied).toEqual([created!.dir.split(/[/\\]/).at(-1)]);
      expect(await tables(db)).toContain('widgets');
      expect(await createMigration('again', { ...project, target: shadow.target, now: new Date() })).toBeNull();
    } finally {
      await db.close();
      await shadow.close();
    }
  });

  if (kind.name === 'postgres') {
    it('leaves no shadow database behind', async () => {
      const db = await kind.fresh();
      try {
        const rows = await db.query("SELECT datname FROM pg_database WHERE datname LIKE 'prisma_migrate_shadow_db_%'");
        expect(rows).toEqual([]);
      } finally {
        await db.close();
      }
    });

    it('never puts the password into an error', async () => {
      const secret = 'Sup3r-Secret-pw';
      const url = new URL(inject('postgresAdminUrl'));
      url.username = 'postgres';
      url.password = secret;
      url.pathname = '/no_such_database_here';
      const error = await applyMigrations({ kind: 'postgres', url: url.toString() }, paths).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error?.message).toMatch(/no_such_database_here/);
      expect(error?.message).toContain('***');
      expect(JSON.stringify({ message: error?.message, stack: error?.stack })).not.toContain(secret);

      const malformed = await applyMigrations(
        { kind: 'postgres', url: `postgres://u:${secret}@bad host/db` },
        paths,
      ).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(malformed?.message).toMatch(/Invalid PostgreSQL URL/);
      expect(malformed?.message).not.toContain(secret);
    });
  }
});
