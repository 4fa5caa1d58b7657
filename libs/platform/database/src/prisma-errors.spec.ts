import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle, openDatabase } from './database';
import { databaseUnavailableReason } from './prisma-errors';

async function failure(run: () => Promise<unknown>): Promise<unknown> {
  return run().then(
    () => {
      throw new Error('expected a failure');
    },
    (error: unknown) => error,
  );
}

describe('databaseUnavailableReason, on the errors Prisma really throws', () => {
  let db: DatabaseHandle;
  beforeAll(async () => {
    db = await openDatabase({ kind: 'pglite-memory' }, { migrate: false });
    await db.client.$executeRawUnsafe('CREATE TABLE t (id int PRIMARY KEY)');
  });
  afterAll(() => db.close());

  it.each([
    ['disk full', '53100'],
    ['a corrupted page', 'XX001'],
    ['an I/O error', '58030'],
    ['an administrator shutdown', '57P01'],
  ])('names %s (SQLSTATE %s) as the database not serving', async (_what, state) => {
    const error = await failure(() =>
      db.client.$executeRawUnsafe(`DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '${state}'; END $$`),
    );
    expect(databaseUnavailableReason(error)).toContain(state);
  });

  it("leaves the request's own mistakes alone: a duplicate key, a syntax error", async () => {
    await db.client.$executeRawUnsafe('INSERT INTO t VALUES (1)');
    expect(
      databaseUnavailableReason(await failure(() => db.client.$executeRawUnsafe('INSERT INTO t VALUES (1)'))),
    ).toBeNull();
    expect(databaseUnavailableReason(await failure(() => db.client.$executeRawUnsafe('SELEC 1')))).toBeNull();
    expect(databaseUnavailableReason(new Error('something else'))).toBeNull();
  });

  it('names a PostgreSQL that refuses connections, without the connection string', async () => {
    // a port nothing listens on: port 9 (discard) is closed on loopback
    const down = await openDatabase(
      { kind: 'postgres', url: 'postgres://someone:s3cret@127.0.0.1:9/db', poolSize: 1 },
      { migrate: false },
    );
    try {
      const started = performance.now();
      const error = await failure(() => down.client.$queryRaw`SELECT 1`);
      expect(performance.now() - started).toBeLessThan(3000);
      const reason = databaseUnavailableReason(error);
      expect(reason).toMatch(/connection failed|cannot be reached/);
      expect(reason).not.toContain('s3cret');
    } finally {
      await down.close();
    }
  });

  it('names an embedded database that has gone away', async () => {
    const gone = await openDatabase({ kind: 'pglite-memory' }, { migrate: false });
    await gone.close();
    expect(databaseUnavailableReason(await failure(() => gone.client.$queryRaw`SELECT 1`))).not.toBeNull();
  });
});
