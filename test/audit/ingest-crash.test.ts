import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPostgresDatabase } from '../support/databases';
import { freePort } from '../support/services';

/**
 * The control plane killed (SIGKILL: no shutdown, transactions cut) while
 * gateways stream audit batches at it, then started again on the same
 * database. Gateways retry every batch that did not get a 2xx, with the same
 * event ids, as a real gateway does. Nothing may be lost, nothing stored
 * twice, and the chain must still verify. Needs `npm run build` first.
 */
const MAIN = resolve('dist/apps/control-plane/src/main.js');
const BIN = resolve('bin/aileron-cp.js');

const GATEWAYS = 4;
const BATCHES_PER_GATEWAY = 15;
const EVENTS_PER_BATCH = 50;
const TOTAL = GATEWAYS * BATCHES_PER_GATEWAY * EVENTS_PER_BATCH;
/** generous: this catches a hang, it does not measure speed */
const STREAM_DEADLINE_MS = 180_000;

const children = new Set<ChildProcess>();

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const inherited = Object.entries(process.env).filter(
    ([name]) => !/^(AILERON_|DATABASE_|REDIS_URL$|PORT$|HOST$|LOG_LEVEL$)/.test(name),
  );
  return { ...Object.fromEntries(inherited), ...extra };
}

interface Server {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
}

async function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, [MAIN], { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const exited = new Promise<number | null>((done) =>
    child.once('exit', (code, signal) => {
      children.delete(child);
      done(code ?? (signal ? -1 : null));
    }),
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 60_000;
  while (!/listening on (http:\/\/\S+)/.test(out)) {
    if (child.exitCode !== null) throw new Error(`control plane exited ${child.exitCode}: ${out}`);
    if (Date.now() > deadline) throw new Error(`control plane did not start within 60 s: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, url: /listening on (http:\/\/\S+)/.exec(out)![1]!, output: () => out, exited };
}

function run(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((done, fail) => {
    child.on('error', fail);
    child.on('close', (code) => {
      children.delete(child);
      done({ code, stdout, stderr });
    });
  });
}

/** Deterministic event ids: a gateway that restarts resends the very same ids. */
function eventId(run: string, gateway: number, batch: number, index: number): string {
  const n = (gateway * 1000 + batch) * 1000 + index;
  return `${run}-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
}

beforeAll(() => {
  expect(existsSync(MAIN), 'the control plane is not built: run `npm run build` first').toBe(true);
  expect(existsSync(resolve('dist/apps/cli/src/main.js')), 'the CLI is not built: run `npm run build` first').toBe(
    true,
  );
});

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

describe('audit ingest across a control-plane crash (server mode)', () => {
  let database: { url: string; drop(): Promise<void> };
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-crash-'));
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stores every event of a stream cut by SIGKILL exactly once, and the chain verifies', {
    timeout: 300_000,
  }, async () => {
    const port = await freePort();
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      AILERON_ROOT_KEY: Buffer.alloc(32, 11).toString('base64'),
      AILERON_QUEUE_PREFIX: `crash-${randomBytes(4).toString('hex')}`,
      AILERON_DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    };
    const bootstrap = await run(['bootstrap', '--org', 'crash'], env);
    expect(bootstrap.code, bootstrap.stderr).toBe(0);
    const owner = bootstrap.stdout.trim();

    let server = await startServer(env);
    const base = server.url;
    const call = async (method: string, path: string, token: string | null, body?: unknown) => {
      const res = await fetch(base + path, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(30_000),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const ws = await call('POST', '/v1/workspaces', owner, { slug: 'crash', name: 'Crash' });
    expect(ws.status).toBe(201);
    const code = await call('POST', '/v1/workspaces/crash/enrollment-codes', owner, {});
    const enrolled = await call('POST', '/v1/gateway/enroll', null, {
      enrollment_code: code.body.code,
      name: 'crash-gw',
    });
    expect(enrolled.status).toBe(201);
    const gatewayToken = enrolled.body.token as string;

    const runId = randomBytes(4).toString('hex');
    const sent = Date.now();
    const batchOf = (g: number, b: number) =>
      Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({
        id: eventId(runId, g, b, i),
        type: 'execution.succeeded',
        time: new Date(sent + b * 1000 + i).toISOString(),
        execution_mode: 'local',
        server: 'github',
        tool: 'get_issue',
        decision: 'allow',
        session: `gw-${g}`,
        arguments: { batch: b, index: i },
      }));

    const stats = {
      delivered: 0,
      failedAttempts: 0,
      accepted: 0,
      duplicates: 0,
      deliveredBeforeKill: -1,
      badAnswers: [] as string[],
    };
    let restart: Promise<void> | null = null;
    const crashAt = Math.floor((GATEWAYS * BATCHES_PER_GATEWAY) / 3);
    const deadline = Date.now() + STREAM_DEADLINE_MS;

    const crashAndRestart = async () => {
      stats.deliveredBeforeKill = stats.delivered;
      server.child.kill('SIGKILL');
      expect(await server.exited).toBe(-1);
      server = await startServer(env);
      expect(server.url).toBe(base);
    };

    /** One gateway: its batches in order, each retried until a 2xx, as the real one does. */
    const gateway = async (g: number) => {
      for (let b = 0; b < BATCHES_PER_GATEWAY; b++) {
        const events = batchOf(g, b);
        for (;;) {
          if (Date.now() > deadline)
            throw new Error(
              `gateway ${g} still sending batch ${b} after ${STREAM_DEADLINE_MS / 1000} s: ${JSON.stringify(stats)}\n${server.output()}`,
            );
          let answer: { status: number; body: any } | null = null;
          try {
            answer = await call('POST', '/v1/gateway/audit', gatewayToken, { events });
          } catch {
            answer = null; // connection refused or reset: the server is down
          }
          if (answer && answer.status >= 200 && answer.status < 300) {
            if (answer.body.accepted + answer.body.duplicates !== EVENTS_PER_BATCH || answer.body.rejected.length > 0)
              stats.badAnswers.push(JSON.stringify(answer.body));
            stats.accepted += answer.body.accepted;
            stats.duplicates += answer.body.duplicates;
            break;
          }
          // a 5xx while the database connection drops is a failed attempt too: retried the same way
          stats.failedAttempts++;
          await new Promise((r) => setTimeout(r, 100));
        }
        stats.delivered++;
        if (stats.delivered === crashAt && !restart) restart = crashAndRestart();
      }
    };

    await Promise.all(Array.from({ length: GATEWAYS }, (_, g) => gateway(g)));
    await (restart as Promise<void> | null);

    // the kill landed mid-stream, and the gateways had to retry through it
    expect(stats.deliveredBeforeKill).toBeGreaterThan(0);
    expect(stats.deliveredBeforeKill).toBeLessThan(GATEWAYS * BATCHES_PER_GATEWAY);
    expect(stats.failedAttempts).toBeGreaterThan(0);
    expect(stats.badAnswers).toEqual([]);
    // a batch that committed just before the kill, its answer lost, comes back as duplicates, never as a second
    // copy: at most the batch each gateway had in flight; the stored rows below are the real check
    expect(stats.accepted + stats.duplicates).toBe(TOTAL);
    expect(stats.accepted).toBeGreaterThanOrEqual(TOTAL - GATEWAYS * EVENTS_PER_BATCH);

    const sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    try {
      const counts = await sql.query(
        `SELECT count(*)::int AS total, count(DISTINCT id)::int AS ids FROM audit_events WHERE chain_id = $1::uuid AND source = 'gateway'`,
        [ws.body.id],
      );
      expect(counts.rows[0]).toEqual({ total: TOTAL, ids: TOTAL });
      const stored = new Set(
        (
          await sql.query(`SELECT id::text FROM audit_events WHERE chain_id = $1::uuid AND source = 'gateway'`, [
            ws.body.id,
          ])
        ).rows.map((r) => r.id as string),
      );
      const missing: string[] = [];
      for (let g = 0; g < GATEWAYS; g++)
        for (let b = 0; b < BATCHES_PER_GATEWAY; b++)
          for (let i = 0; i < EVENTS_PER_BATCH; i++)
            if (!stored.has(eventId(runId, g, b, i))) missing.push(eventId(runId, g, b, i));
      expect(missing).toEqual([]);
      // each gateway's batches in the order it sent them: a retried batch did not overtake a later one
      for (let g = 0; g < GATEWAYS; g++) {
        const order = await sql.query(
          `SELECT data->>'batch' AS batch FROM audit_events WHERE chain_id = $1::uuid AND session_id = $2 ORDER BY seq`,
          [ws.body.id, `gw-${g}`],
        );
        const batches = order.rows.map((r) => Number(r.batch));
        expect(batches).toEqual([...batches].sort((x, y) => x - y));
      }
    } finally {
      await sql.end();
    }

    const verified = await call('GET', '/v1/workspaces/crash/audit/verify', owner);
    expect(verified.status).toBe(200);
    expect(verified.body).toMatchObject({ ok: true });
    expect(verified.body.events).toBeGreaterThanOrEqual(TOTAL);
    // and through the API, page by page: one gateway's events, each once
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await call(
        'GET',
        `/v1/workspaces/crash/audit?session=gw-0&limit=500${cursor ? `&cursor=${cursor}` : ''}`,
        owner,
      );
      expect(page.status).toBe(200);
      seen.push(...page.body.events.map((e: { id: string }) => e.id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(BATCHES_PER_GATEWAY * EVENTS_PER_BATCH);
    expect(seen).toHaveLength(BATCHES_PER_GATEWAY * EVENTS_PER_BATCH);
    console.log(`ingest across a crash: ${JSON.stringify(stats)}`);

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });
});
