import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ControlPlane, startControlPlane } from '../apps/control-plane/src/control-plane';
import { AuditService, chainRecords, ChainedRecord, executionEventPayload, executionRecord } from '../libs/audit/src';
import { Principal, WorkspaceScope } from '../libs/auth/src';
import { SystemScopes } from '../libs/auth/src/scope-issuer';
import { GatewayCredentials } from '../libs/gateway/src/gateway-credentials.service';
import { loadConfig } from '../libs/platform/config/src';
import { BootstrapService } from '../libs/tenancy/src';
import { Service, startPostgres } from '../test/support/services';
import { Bench, Figure, figure, median, note } from './figures';
import { scratchDatabase } from './scratch-database';

const NAME = 'audit-ingest';
/** what a busy gateway ships at once (the API takes up to 1,000) */
const BATCH = 500;
const BATCHES_PER_LEG = 10;
const WARMUP_BATCHES = 4;
/** forward then reverse order, and so on: drift over the run (table growth, other processes) cancels out. */
const ROUNDS = 8;

const COLUMNS = [
  'organization_id',
  'chain_id',
  'workspace_id',
  'seq',
  'id',
  'type',
  'recorded_at',
  'occurred_at',
  'source',
  'actor',
  'principal',
  'execution_mode',
  'server',
  'tool',
  'decision',
  'session_id',
  'data',
  'prev_hash',
  'hash',
] as const;

// ---------------------------------------------------------------------------
// The workload

const SERVERS: [string, string[]][] = [
  ['github', ['get_issue', 'list_pull_requests', 'create_comment', 'search_code']],
  ['postgres', ['run_query', 'describe_table', 'list_tables']],
  ['slack', ['post_message', 'list_channels', 'get_thread']],
  ['filesystem', ['read_file', 'write_file', 'list_directory']],
];
const USERS = Array.from({ length: 20 }, (_, i) => `user-${i}@example.com`);

/** A gateway's batch as it arrives: fresh ids, redacted arguments, the gateway's own clock. */
function gatewayBatch(size: number, serial: { n: number }): Record<string, unknown>[] {
  const now = Date.now();
  return Array.from({ length: size }, (_, i) => {
    const n = serial.n++;
    const [server, tools] = SERVERS[n % SERVERS.length]!;
    const tool = tools[(n >> 2) % tools.length]!;
    return {
      id: randomUUID(),
      type: 'execution.succeeded',
      time: new Date(now - (size - i) * 7).toISOString(),
      execution_mode: 'local',
      principal: USERS[n % USERS.length],
      server,
      tool,
      decision: 'allow',
      session: `sess-${Math.floor(n / 50)}`,
      latency_ms: 5 + (n % 230),
      arguments: {
        owner: 'acme',
        repo: `repo-${n % 17}`,
        path: `src/module-${n % 31}/index.ts`,
        limit: 50,
        include_closed: n % 2 === 0,
      },
    };
  });
}

/**
 * The same rows, chained onto a chain of their own, ready for one INSERT: the
 * shape ingest stores (data holds latency_ms and arguments), with hashes
 * computed up front because the baseline is the bare cost of the INSERT. And
 * the outbox rows the ingest writes in the same transaction, one
 * `execution.*` event per call (issue 33: local calls reach webhooks and the
 * live stream as remote ones do), their payloads made up front too.
 */
function rawInsert(
  events: Record<string, unknown>[],
  chain: {
    chainId: string;
    organizationId: string;
    workspaceId: string;
    actor: string;
    head: { seq: number; hash: string };
  },
): { sql: string; params: unknown[]; outbox: { sql: string; params: unknown[] }; last: ChainedRecord } {
  const recordedAt = new Date();
  const records = chainRecords(
    chain.head,
    events.map((event) => ({
      chainId: chain.chainId,
      organizationId: chain.organizationId,
      workspaceId: chain.workspaceId,
      id: event.id as string,
      type: event.type as string,
      recordedAt,
      occurredAt: new Date(event.time as string),
      source: 'gateway' as const,
      actor: chain.actor,
      principal: event.principal as string,
      executionMode: event.execution_mode as string,
      server: event.server as string,
      tool: event.tool as string,
      decision: event.decision as string,
      sessionId: event.session as string,
      data: { latency_ms: event.latency_ms, arguments: event.arguments },
    })),
  );
  const params: unknown[] = [];
  const tuples: string[] = [];
  for (const r of records) {
    const values = [
      r.organizationId,
      r.chainId,
      r.workspaceId,
      r.seq,
      r.id,
      r.type,
      r.recordedAt,
      r.occurredAt,
      r.source,
      r.actor,
      r.principal,
      r.executionMode,
      r.server,
      r.tool,
      r.decision,
      r.sessionId,
      JSON.stringify(r.data),
      r.prevHash,
      r.hash,
    ];
    tuples.push(`(${values.map((v) => `$${params.push(v)}`).join(',')})`);
  }
  const outboxParams: unknown[] = [];
  const outboxTuples = events.map((event) => {
    const payload = executionEventPayload(
      executionRecord({
        type: event.type,
        session: event.session,
        execution_mode: event.execution_mode,
        server: event.server,
        tool: event.tool,
        decision: event.decision,
        principal: event.principal,
        data: { execution_id: event.id, latency_ms: event.latency_ms, arguments: event.arguments },
      } as Parameters<typeof executionRecord>[0]),
      { workspace: 'default', actor: chain.actor, occurredAt: new Date(event.time as string) },
    );
    const values = [event.type, chain.organizationId, chain.workspaceId, JSON.stringify(payload)];
    return `(${values.map((v) => `$${outboxParams.push(v)}`).join(',')})`;
  });
  return {
    sql: `INSERT INTO audit_events (${COLUMNS.join(',')}) VALUES ${tuples.join(',')}`,
    params,
    outbox: {
      sql: `INSERT INTO outbox_messages (topic, organization_id, workspace_id, payload) VALUES ${outboxTuples.join(',')}`,
      params: outboxParams,
    },
    last: records[records.length - 1]!,
  };
}

// ---------------------------------------------------------------------------

async function call(
  base: string,
  method: string,
  path: string,
  token: string | null,
  body?: unknown,
): Promise<unknown> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status}: ${text.slice(0, 500)}`);
  return text === '' ? undefined : JSON.parse(text);
}

interface Ingested {
  accepted: number;
  duplicates: number;
  rejected: unknown[];
}

function expectAllAccepted(label: string, result: Ingested, size: number): void {
  if (result.accepted !== size || result.duplicates !== 0 || result.rejected.length !== 0) {
    throw new Error(`${label}: expected ${size} accepted, got ${JSON.stringify(result).slice(0, 500)}`);
  }
}

type Leg = 'ingest' | 'http' | 'raw';

async function run(): Promise<Figure[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  const given = process.env.DATABASE_URL;
  let postgres: Service | undefined;
  let database: { url: string; drop(): Promise<void> } | undefined;
  let controlPlane: ControlPlane | undefined;
  let rawClient: pg.Client | undefined;
  try {
    let started = Date.now();
    postgres = given ? undefined : await startPostgres();
    database = await scratchDatabase(given ?? postgres!.url, 'bench_audit');
    note(
      `  PostgreSQL ${given ? 'from DATABASE_URL' : 'started'}, scratch database ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );

    started = Date.now();
    // PORT must be 1..65535 in the environment; a free port is only for in-process starts, as the tests do
    const config = {
      ...loadConfig({
        AILERON_DATA_DIR: dataDir,
        DATABASE_URL: database.url,
        AILERON_ROOT_KEY: randomBytes(32).toString('base64'),
        HOST: '127.0.0.1',
        PORT: '1',
        LOG_LEVEL: 'error',
      }),
      port: 0,
    };
    controlPlane = await startControlPlane(config);
    const base = controlPlane.url;
    note(`  server-mode control plane up at ${base} in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const { token: owner } = await controlPlane.app.get(BootstrapService).bootstrapServer('default', 'Default');
    const { code } = (await call(base, 'POST', '/v1/workspaces/default/enrollment-codes', owner, {})) as {
      code: string;
    };
    const { token: gatewayToken } = (await call(base, 'POST', '/v1/gateway/enroll', null, {
      enrollment_code: code,
      name: 'bench-gateway',
    })) as { token: string };
    // the principal and scope exactly as the auth guard makes them for the gateway API
    const gateway: Principal = await controlPlane.app.get(GatewayCredentials).resolve(gatewayToken);
    const scope: WorkspaceScope = SystemScopes.workspace(
      gateway.organizationId,
      { id: gateway.gateway!.workspaceId, slug: gateway.gateway!.workspaceSlug },
      'member',
    );
    const audit = controlPlane.app.get(AuditService);

    const client = new pg.Client({ connectionString: database.url });
    rawClient = client;
    await client.connect();
    const rawChain = {
      chainId: randomUUID(),
      organizationId: gateway.organizationId,
      workspaceId: scope.workspaceId,
      actor: `gateway:${gateway.id}`,
      head: { seq: 0, hash: '0'.repeat(64) },
    };

    // the control plane's own records (the gateway's enrolment) sit on the same chain
    const before = await audit.verify(scope);
    const serial = { n: 0 };
    const legs: Record<Leg, { events: number; seconds: number }> = {
      ingest: { events: 0, seconds: 0 },
      http: { events: 0, seconds: 0 },
      raw: { events: 0, seconds: 0 },
    };

    /** Runs `batches` batches of one leg and returns the seconds spent; only the call itself is timed. */
    const runLeg = async (leg: Leg, batches: number): Promise<number> => {
      let seconds = 0;
      for (let b = 0; b < batches; b++) {
        const events = gatewayBatch(BATCH, serial);
        if (leg === 'ingest') {
          const t0 = process.hrtime.bigint();
          const result = await audit.ingest(scope, gateway, events);
          seconds += Number(process.hrtime.bigint() - t0) / 1e9;
          expectAllAccepted('AuditService.ingest', result, BATCH);
        } else if (leg === 'http') {
          const body = JSON.stringify({ events });
          const t0 = process.hrtime.bigint();
          const result = (await call(base, 'POST', '/v1/gateway/audit', gatewayToken, body)) as Ingested;
          seconds += Number(process.hrtime.bigint() - t0) / 1e9;
          expectAllAccepted('POST /v1/gateway/audit', result, BATCH);
        } else {
          const insert = rawInsert(events, rawChain);
          const t0 = process.hrtime.bigint();
          await client.query('BEGIN');
          const result = await client.query(insert.sql, insert.params);
          const announced = await client.query(insert.outbox.sql, insert.outbox.params);
          await client.query('COMMIT');
          seconds += Number(process.hrtime.bigint() - t0) / 1e9;
          if (result.rowCount !== BATCH || announced.rowCount !== BATCH)
            throw new Error(`raw INSERT stored ${result.rowCount} rows and ${announced.rowCount} events, not ${BATCH}`);
          rawChain.head = { seq: insert.last.seq, hash: insert.last.hash };
        }
      }
      return seconds;
    };

    for (const leg of ['ingest', 'http', 'raw'] as const) await runLeg(leg, WARMUP_BATCHES);

    const ratios: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order: Leg[] = r % 2 === 0 ? ['ingest', 'http', 'raw'] : ['raw', 'http', 'ingest'];
      const rates: Record<Leg, number> = { ingest: 0, http: 0, raw: 0 };
      for (const leg of order) {
        const seconds = await runLeg(leg, BATCHES_PER_LEG);
        legs[leg].events += BATCHES_PER_LEG * BATCH;
        legs[leg].seconds += seconds;
        rates[leg] = (BATCHES_PER_LEG * BATCH) / seconds;
      }
      ratios.push(rates.ingest / rates.raw);
      note(
        `  round ${r + 1}/${ROUNDS}: ingest ${rates.ingest.toFixed(0)} events/s, raw INSERT ${rates.raw.toFixed(0)} events/s, HTTP ${rates.http.toFixed(0)} events/s; ingest/raw ${(rates.ingest / rates.raw).toFixed(3)}, HTTP/ingest ${(rates.http / rates.ingest).toFixed(3)}`,
      );
    }
    await client.end();
    rawClient = undefined;

    // a fast path that stored a broken chain would be measuring nothing anyone wants
    const verified = await audit.verify(scope);
    const expected = before.events + (WARMUP_BATCHES + ROUNDS * BATCHES_PER_LEG) * BATCH * 2;
    if (!verified.ok || verified.events !== expected)
      throw new Error(`the ingested chain does not verify: ${JSON.stringify(verified)} (expected ${expected} events)`);
    note(
      `  chain verified: ${verified.events} events, ${verified.checkpoints} checkpoints; median per-round ingest/raw ${median(ratios).toFixed(3)}; the figures use the totals`,
    );

    const rate = (leg: Leg) => legs[leg].events / legs[leg].seconds;
    const rounds = `${ROUNDS} alternating rounds of ${BATCHES_PER_LEG} batches of ${BATCH}`;
    return [
      figure({
        bench: NAME,
        figure: `events/s through AuditService.ingest in process (per-event validation, duplicate check, head lock, chaining, one transaction per ${BATCH}-event batch, its execution events) vs raw INSERTs of the same rows and events`,
        value: rate('ingest'),
        baseline: {
          what: `one transaction per batch of two parameterised multi-row INSERTs of the same rows, into audit_events (hashes computed beforehand) and outbox_messages (one execution event per call, payloads made beforehand), through pg on its own connection, ${rounds}`,
          value: rate('raw'),
          unit: 'events/s',
        },
        goal: 0.5,
        better: 'higher',
      }),
      // what the HTTP layer (body parsing, gateway token, response) adds on top of the ingest path itself
      figure({
        bench: NAME,
        figure: `events/s through POST /v1/gateway/audit (gateway token, ${BATCH}-event batches, one request at a time) vs AuditService.ingest in process`,
        value: rate('http'),
        baseline: {
          what: `AuditService.ingest called in process with the same batches, ${rounds}`,
          value: rate('ingest'),
          unit: 'events/s',
        },
        goal: 0.75,
        better: 'higher',
      }),
    ];
  } finally {
    await rawClient?.end().catch(() => undefined);
    await controlPlane?.close().catch((error: unknown) => note(`  control plane close failed: ${String(error)}`));
    await database?.drop().catch((error: unknown) => note(`  dropping the scratch database failed: ${String(error)}`));
    postgres?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const auditIngestBench: Bench = {
  name: NAME,
  summary:
    'audit log: events/s through the gateway ingest path against raw multi-row INSERTs of the same rows and their execution events',
  run,
};
