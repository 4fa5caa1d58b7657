import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Queue, QueueEvents } from 'bullmq';
import IORedis from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { createPostgresDatabase } from '../support/databases';

const WORKER = resolve('dist/apps/worker/src/main.js');

describe('apps/worker as its own process (server mode)', () => {
  it('serves the BullMQ queues, processes jobs, and stops cleanly on SIGTERM', async () => {
    if (!existsSync(WORKER)) throw new Error('build first: npm run build (npm test does)');
    const db = await createPostgresDatabase();
    const prefix = `w-${Date.now()}`;
    const dataDir = mkdtempSync(join(tmpdir(), 'aileron-worker-'));
    const child = spawn(process.execPath, [WORKER], {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        REDIS_URL: inject('redisUrl'),
        AILERON_QUEUE_PREFIX: prefix,
        LOG_LEVEL: 'info',
        AILERON_DATA_DIR: dataDir,
      },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const connection = new IORedis(inject('redisUrl'), { maxRetriesPerRequest: null });
    const queue = new Queue('outbox.deliver', { connection, prefix });
    const eventsConnection = connection.duplicate();
    const events = new QueueEvents('outbox.deliver', { connection: eventsConnection, prefix });
    try {
      const deadline = Date.now() + 60_000;
      while (!out.includes('worker started')) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`worker did not start: ${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await queue.getWorkers()).length).toBeGreaterThanOrEqual(1);
      // nothing of the pool runs here: no journal of its own, none of a control plane's replayed (compose shares the data dir)
      expect(existsSync(join(dataDir, 'pool'))).toBe(false);
      await events.waitUntilReady();
      // a delivery for a consumer this release does not have: the worker completes it as a no-op
      const job = await queue.add(
        'outbox.deliver',
        { consumer: 'retired', messages: [{ id: '1', topic: 'x.happened' }] },
        { jobId: 'smoke' },
      );
      await job.waitUntilFinished(events, 30_000);
      expect(await job.getState()).toBe('completed');
      // a malformed payload fails validation instead of running
      const bad = await queue.add(
        'outbox.deliver',
        { consumer: 'retired', messages: [{ id: 'not-a-number', topic: 'x.happened' }] },
        { jobId: 'bad', attempts: 1 },
      );
      await expect(bad.waitUntilFinished(events, 30_000)).rejects.toThrow();
    } finally {
      child.kill('SIGTERM');
      const code = await new Promise<number | null>((r) =>
        child.exitCode !== null ? r(child.exitCode) : child.once('exit', r),
      );
      await events.close();
      await queue.close();
      connection.disconnect();
      eventsConnection.disconnect();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
      expect(code).toBe(0);
    }
  });

  it('refuses to start without server-mode settings, with one line', async () => {
    const child = spawn(process.execPath, [WORKER], { env: { ...process.env, DATABASE_URL: '', REDIS_URL: '' } });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code).toBe(78);
    expect(err.trim()).toMatch(/^aileron-worker: needs DATABASE_URL and REDIS_URL/);
  });
});
