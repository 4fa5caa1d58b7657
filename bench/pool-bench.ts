import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { LOAD_TEST_RATE_LIMITS, startBenchControlPlane } from './control-plane';
import { mainThreadCpuMs, note } from './figures';
import type { McpLoad } from './mcp-load';

/**
 * What the benches of the pool (`proxy`, `peers`) share: a control plane with
 * every check of a proxied call on, a workspace whose policy allows the
 * measured tool by one rule, and the checks that what was measured was audited.
 */
export const WORKSPACE = 'default';

/**
 * Embedded mode in `dataDir`; server mode when DATABASE_URL and REDIS_URL are
 * set (PostgreSQL and Redis), with the workers in this process as embedded
 * mode has them.
 */
export async function startPoolBenchControlPlane(dataDir: string): Promise<ControlPlane> {
  const controlPlane = await startBenchControlPlane(dataDir, {
    ...LOAD_TEST_RATE_LIMITS,
    ...(process.env.DATABASE_URL && process.env.REDIS_URL
      ? {
          DATABASE_URL: process.env.DATABASE_URL,
          REDIS_URL: process.env.REDIS_URL,
          AILERON_RUN_WORKERS: 'true',
          UPSTREAM_ALLOW_CIDRS: '127.0.0.0/8',
        }
      : {}),
  });
  if (controlPlane.config.mode === 'server') {
    // what embedded mode does at first start, for a fresh server-mode database
    const { BootstrapService } = require('../libs/tenancy/src') as typeof import('../libs/tenancy/src');
    const { token } = await controlPlane.app.get(BootstrapService).bootstrapServer('default', 'Default');
    writeFileSync(join(dataDir, 'admin-token'), token, { mode: 0o600 });
  }
  return controlPlane;
}

export function ownerToken(controlPlane: ControlPlane): string {
  return ownerTokenIn(controlPlane.config.dataDir);
}

/** The token an embedded control plane's first start wrote into its data directory. */
export function ownerTokenIn(dataDir: string): string {
  return readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
}

/** One REST call; anything but a 2xx throws with the answer's start. */
export async function api(base: string, token: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status}: ${text.slice(0, 500)}`);
  return text ? JSON.parse(text) : undefined;
}

export const ALLOWING_RULE = 'allow-bench-reads';

/**
 * A small policy of the usual shape: default deny, refusals and approvals for
 * the dangerous families, and the bench's call allowed by exactly one rule
 * (after argument conditions that are evaluated and do not match).
 */
function policy(servers: readonly string[], call: { name: string; arguments: Record<string, unknown> }): unknown {
  // on a path the call has (the engine denies, on_error, where a condition's path is missing), if it has one
  const argument = Object.keys(call.arguments)[0];
  return {
    default: 'deny',
    on_error: 'deny',
    redact: ['token', 'password'],
    rules: [
      { id: 'deny-admin', effect: 'deny', tools: ['admin_*'] },
      { id: 'approve-deletes', effect: 'approval', tool_prefixes: ['delete_', 'drop_'] },
      { id: 'deny-exec', effect: 'deny', tools: ['run_*', 'exec*', 'shell'] },
      { id: 'approve-exports', effect: 'approval', tools: ['export_*'] },
      ...(argument === undefined
        ? []
        : [
            {
              id: 'deny-secret-queries',
              effect: 'deny',
              arguments: [{ path: argument, regex: 'password|secret|api[_-]?key' }],
            },
          ]),
      {
        id: 'approve-bulk',
        effect: 'approval',
        arguments: [
          { path: 'limit', exists: true },
          { path: 'limit', range: { gt: 1000 } },
        ],
      },
      {
        id: ALLOWING_RULE,
        effect: 'allow',
        servers: [...servers],
        tools: [call.name, 'search_*', 'get_*', 'list_*'],
        execution_mode: 'remote',
      },
      { id: 'deny-local-writes', effect: 'deny', execution_mode: 'local', tools: ['write_*', 'put_*'] },
      { id: 'approve-payments', effect: 'approval', servers: ['payments', 'billing'] },
      { id: 'allow-operator-restarts', effect: 'allow', tools: ['restart_*'], principals: { roles: ['admin'] } },
    ],
  };
}

/**
 * Publishes each of `entries` as a remote catalog server of that name,
 * assigns them to the workspace, puts the policy in place (checked to allow
 * the call on each by its one rule) and makes a member's API token: the token
 * the bench's clients use.
 */
export async function poolServer(
  controlPlane: ControlPlane,
  entries: Record<string, Record<string, unknown>>,
  call: { name: string; arguments: Record<string, unknown> },
): Promise<{ token: string }> {
  const owner = ownerToken(controlPlane);
  for (const [server, entry] of Object.entries(entries)) await publishServer(controlPlane.url, owner, server, entry);
  return workspaceServer(controlPlane.url, owner, WORKSPACE, Object.keys(entries), call);
}

/** `entry` as the organisation's remote catalog server `server`, version 1.0.0. */
export async function publishServer(
  base: string,
  owner: string,
  server: string,
  entry: Record<string, unknown>,
): Promise<void> {
  await api(base, owner, 'POST', '/v1/catalog/servers', { name: server, version: '1.0.0', mode: 'remote', ...entry });
}

/**
 * In `workspace`: the policy that allows `call` on each of `servers` by its
 * one rule (checked), the published servers assigned, and a member's API
 * token for them.
 */
export async function workspaceServer(
  base: string,
  owner: string,
  workspace: string,
  servers: string | readonly string[],
  call: { name: string; arguments: Record<string, unknown> },
): Promise<{ token: string }> {
  const names = typeof servers === 'string' ? [servers] : servers;
  await api(base, owner, 'PUT', `/v1/workspaces/${workspace}/policy`, policy(names, call));
  for (const server of names)
    await api(base, owner, 'PUT', `/v1/workspaces/${workspace}/servers/${server}`, { version: '1.0.0' });
  const { token } = (await api(base, owner, 'POST', '/v1/tokens', {
    name: `bench-${names.join('-')}`,
    role: 'member',
    workspace,
  })) as { token: string };
  for (const server of names) {
    const decision = (await api(base, owner, 'POST', `/v1/workspaces/${workspace}/policy/evaluate`, {
      server,
      tool: call.name,
      arguments: call.arguments,
      execution_mode: 'remote',
    })) as { decision: string; rules: string[] };
    if (decision.decision !== 'allow' || decision.rules.join() !== ALLOWING_RULE)
      throw new Error(`the policy should allow the call by ${ALLOWING_RULE} alone, said ${JSON.stringify(decision)}`);
  }
  return { token };
}

/**
 * Waits until the control plane's audit and event pipeline (the outbox, on the
 * control plane's own thread) has caught up: each phase then pays for its own
 * calls' background work, not for the backlog a saturation phase left behind —
 * which on a small machine would also slow the next phase's baseline.
 */
export async function settle(controlPlane: ControlPlane): Promise<number> {
  const db = controlPlane.database;
  const started = Date.now();
  for (;;) {
    const [row] = await db.client.$queryRaw<
      { pending: bigint }[]
    >`SELECT count(*) AS pending FROM outbox_messages WHERE completed_at IS NULL`;
    if (!row || row.pending === 0n) return Date.now() - started;
    if (Date.now() - started > 120_000) throw new Error(`the outbox still holds ${row.pending} messages after 120 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function auditedCalls(controlPlane: ControlPlane, session: string, tool: string): Promise<number> {
  const owner = ownerToken(controlPlane);
  let count = 0;
  let cursor: string | null = null;
  do {
    const query: string = `session=${encodeURIComponent(session)}&tool=${tool}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = (await api(controlPlane.url, owner, 'GET', `/v1/workspaces/${WORKSPACE}/audit?${query}`)) as {
      items: { type: string }[];
      next_cursor: string | null;
    };
    count += page.items.filter((event) => event.type === 'execution.succeeded').length;
    cursor = page.next_cursor;
  } while (cursor);
  return count;
}

/** Every measured call of `session` must be in the audit log, started and succeeded; throws otherwise. */
export async function expectAudited(
  controlPlane: ControlPlane,
  session: string,
  tool: string,
  expected: number,
): Promise<void> {
  const deadline = Date.now() + 15_000;
  let audited = await auditedCalls(controlPlane, session, tool);
  while (audited < expected && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    audited = await auditedCalls(controlPlane, session, tool);
  }
  if (audited !== expected)
    throw new Error(
      `the audit log holds ${audited} execution.succeeded records for the measured session, expected ${expected}`,
    );
}

/**
 * With AILERON_BENCH_PROFILE=<dir>, a CPU profile of this thread (the control
 * plane's) from now until the returned function is called, written as
 * `<dir>/<name>.cpuprofile`: where the proxy spends its time under load,
 * without set-up and other phases diluting it. Beside it `<name>.heapprofile`,
 * what the thread allocated meanwhile, collected or not (a sample every 32 KiB):
 * what makes its young-generation collections, which a call may wait for.
 * Undefined without the variable.
 */
export async function profileControlPlane(name: string): Promise<(() => Promise<void>) | undefined> {
  const dir = process.env.AILERON_BENCH_PROFILE;
  if (!dir) return undefined;
  const { Session } = require('node:inspector') as typeof import('node:inspector');
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))),
    );
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 200 });
  await post('Profiler.start');
  await post('HeapProfiler.startSampling', {
    samplingInterval: 32 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return async () => {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    const { profile: allocations } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
    session.disconnect();
    const file = join(dir, `${name}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    writeFileSync(join(dir, `${name}.heapprofile`), JSON.stringify(allocations));
    note(`  profile of the control plane under load: ${file} (its allocations: ${name}.heapprofile)`);
  };
}

/** How much the MCP benches measure, the same for each so that their figures compare. */
export const ROUNDS_PLAN = {
  rounds: 3,
  calls: 500,
  block: 50,
  seconds: 5,
  warmupCalls: 200,
  warmupSeconds: 2,
};
/** closed-loop clients for saturation; below AILERON_POOL_MAX_CONCURRENT_CALLS (32) */
export const CLIENTS = 16;
/** the sequential calls of ROUNDS_PLAN, for a figure's baseline */
export const SEQUENTIAL = `${ROUNDS_PLAN.rounds} rounds of ${ROUNDS_PLAN.calls} sequential calls per target, blocks of ${ROUNDS_PLAN.block} rotating between targets`;

export interface RoundsPlan {
  /** the bench's name: profiles are named after it */
  bench: string;
  /** targets of the sequential calls, each its first client's */
  latency: string[];
  /** targets saturated by all their clients, one after another */
  saturation: string[];
  /** the control plane's targets: their saturation phases are profiled and the thread's CPU per call counted */
  pools: readonly string[];
  rounds: number;
  /** sequential calls per target and round, in blocks rotating between targets */
  calls: number;
  block: number;
  seconds: number;
  warmupCalls: number;
  warmupSeconds: number;
}

export interface RoundsResult {
  /** milliseconds per sequential call, every round's */
  samples: Record<string, number[]>;
  /** calls/s over every round's saturation phases together */
  rates: Record<string, number>;
  /** calls/s of each round */
  roundRates: Record<string, number>[];
  /** microseconds of the control plane's thread per call of each pool target's saturation phases, per round */
  cpuPerCall: Record<string, number[]>;
  /** time spent waiting for the outbox to drain between phases */
  settlingMs: number;
}

/**
 * The MCP benches' measurement, every target in the same run: after a
 * warm-up, `rounds` rounds, each sequential calls (blocks rotating between
 * targets, the order reversed every other round) and then each target
 * saturated in turn (the order rotating round by round), the outbox drained
 * before every phase. `onRound` hears each round's figures, for the log.
 */
export async function measureRounds(
  controlPlane: ControlPlane,
  load: McpLoad,
  plan: RoundsPlan,
  onRound: (round: number, samples: Record<string, number[]>, rates: Record<string, number>) => void,
): Promise<RoundsResult> {
  await load.latency(plan.latency, plan.warmupCalls, plan.block);
  for (const key of plan.saturation) await load.throughput(key, plan.warmupSeconds);

  const samples: Record<string, number[]> = Object.fromEntries(plan.latency.map((key) => [key, []]));
  const totals: Record<string, { calls: number; ms: number }> = Object.fromEntries(
    plan.saturation.map((key) => [key, { calls: 0, ms: 0 }]),
  );
  const roundRates: Record<string, number>[] = [];
  const cpuPerCall: Record<string, number[]> = Object.fromEntries(plan.pools.map((key) => [key, []]));
  let settlingMs = 0;
  for (let r = 0; r < plan.rounds; r++) {
    settlingMs += await settle(controlPlane);
    // the sequential calls of every target, the pool's among them: where a lone call's time goes on the thread
    const stopLatencyProfile = await profileControlPlane(`${plan.bench}-latency-round-${r + 1}`);
    const round = await load.latency(r % 2 === 0 ? plan.latency : [...plan.latency].reverse(), plan.calls, plan.block);
    await stopLatencyProfile?.();
    for (const key of plan.latency) samples[key]!.push(...round[key]!);
    const rates: Record<string, number> = {};
    const order = plan.saturation.map((_, i) => plan.saturation[(i + r) % plan.saturation.length]!);
    for (const key of order) {
      settlingMs += await settle(controlPlane);
      const pool = plan.pools.includes(key);
      const stopProfile = pool
        ? await profileControlPlane(`${plan.bench}-${key}-saturation-round-${r + 1}`)
        : undefined;
      const cpuBefore = mainThreadCpuMs();
      const measured = await load.throughput(key, plan.seconds);
      if (pool && cpuBefore !== undefined)
        cpuPerCall[key]!.push(((mainThreadCpuMs()! - cpuBefore) * 1000) / measured.calls);
      await stopProfile?.();
      totals[key]!.calls += measured.calls;
      totals[key]!.ms += measured.ms;
      rates[key] = (measured.calls / measured.ms) * 1000;
    }
    roundRates.push(rates);
    onRound(r, round, rates);
  }
  const rates = Object.fromEntries(
    Object.entries(totals).map(([key, total]) => [key, (total.calls / total.ms) * 1000]),
  );
  return { samples, rates, roundRates, cpuPerCall, settlingMs };
}
