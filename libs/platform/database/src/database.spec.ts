import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from './database';

describe('the embedded database (PGlite) and the event loop', () => {
  it('gives timers and I/O turns while a long transaction runs, instead of holding them until it ends', async () => {
    const db = await openDatabase({ kind: 'pglite-memory' });
    try {
      await db.client.$executeRawUnsafe('CREATE TABLE busy (id bigserial PRIMARY KEY, v jsonb)');
      let turns = 0;
      let running = true;
      const turn = (): void => {
        turns++;
        if (running) setImmediate(turn);
      };
      setImmediate(turn);
      await db.client.$transaction(async (tx) => {
        for (let i = 0; i < 40; i++)
          await tx.$executeRaw`INSERT INTO busy (v) VALUES (${JSON.stringify({ i })}::jsonb)`;
      });
      running = false;
      // a request that arrived meanwhile would have waited for all 40 statements without these
      expect(turns).toBeGreaterThan(40);
      const [row] = await db.client.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM busy`;
      expect(row!.n).toBe(40n);
    } finally {
      await db.close();
    }
  });
});

describe('the embedded database in its data folder', () => {
  it("keeps a page cache of 32 MB, not PostgreSQL's 128 MB, all of which an idle control plane would hold", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aileron-pglite-'));
    const db = await openDatabase({ kind: 'pglite', dataDir: join(dir, 'pgdata') }, { migrate: false });
    try {
      const [row] = await db.client.$queryRaw<{ shared_buffers: string }[]>`SHOW shared_buffers`;
      expect(row!.shared_buffers).toBe('32MB');
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
