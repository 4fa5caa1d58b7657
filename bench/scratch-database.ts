import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * PostgreSQL for the benches: a fresh database on a server (the throwaway one
 * the tests start, test/support/services.ts, built with the bench, or a given
 * DATABASE_URL, which may hold an installation the bench must not touch).
 */
export async function scratchDatabase(
  serverUrl: string,
  prefix = 'bench',
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = async <T>(work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  await admin((client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}
