import { ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import {
  Agent,
  createServer,
  IncomingHttpHeaders,
  IncomingMessage,
  request as httpRequest,
  Server,
  ServerResponse,
} from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { LOAD_TEST_RATE_LIMITS, startBenchControlPlane } from './control-plane';
import { Bench, Figure, figure, mainThreadCpuMs, median, note, percentile } from './figures';
import { serveInWorker, WorkerClients } from './worker-rpc';

/**
 * `proxy`: one MCP tools/call against an upstream whose tool takes 2 ms,
 * straight to the upstream, through a bare node:http forwarding hop, and
 * through the control plane's /mcp/{ws}/{server} with the token check, the
 * rate limits, the compiled policy and the execution journal (audit) on.
 *
 * Three event loops, so none of them measures another's work as its own:
 * - the upstream runs in a child process (a real server is another process;
 *   in-process, the 2 ms timers and the SDK's parsing would queue behind the
 *   control plane's work and count as proxy cost, or the other way round);
 * - the SDK clients (the load) run in a worker thread, as catalog.bench does
 *   with autocannon: on the control plane's loop the client's own parsing would
 *   be charged to the proxied path only;
 * - the control plane and the bare hop share the main thread, the position a
 *   proxy has in production.
 */
const NAME = 'proxy';
const ROLE_ENV = 'AILERON_PROXY_BENCH_ROLE';
const LOAD_ROLE = 'proxy-bench-load';

const TOOL = 'lookup';
const TOOL_DELAY_MS = 2;
const ARGUMENTS = { query: 'status' };
const EXPECTED_TEXT = 'found: status';

const WORKSPACE = 'default';
const SERVER = 'bench';
const ALLOWING_RULE = 'allow-bench-reads';

/** sequential calls per target and round, in blocks that rotate between targets */
const SEQUENTIAL_CALLS = 500;
const BLOCK = 50;
const WARMUP_CALLS = 200;
/** closed-loop clients for saturation; below AILERON_POOL_MAX_CONCURRENT_CALLS (32) */
const CLIENTS = 16;
const SATURATION_SECONDS = 5;
const WARMUP_SECONDS = 2;
const ROUNDS = 3;

/** `caveat`: the proxied endpoint with an agent session's caveat token (started by the API token's member) instead of the API token */
type TargetKey = 'direct' | 'hop' | 'proxied' | 'caveat';

interface TargetSpec {
  key: TargetKey;
  url: string;
  headers: Record<string, string>;
  clients: number;
}

type LoadCommand =
  | { type: 'connect'; target: TargetSpec }
  | { type: 'latency'; keys: TargetKey[]; calls: number; block: number }
  | { type: 'throughput'; key: TargetKey; seconds: number }
  | { type: 'answered'; key: TargetKey }
  | { type: 'close' };

type LoadAnswer =
  | { sessions: string[] }
  | { answered: number[] }
  | { samples: Record<string, number[]> }
  | { calls: number; ms: number }
  | { closed: true };

// ── the upstream: an SDK McpServer over Streamable HTTP, stateful, in its own process ──

function upstreamServer(): McpServer {
  const server = new McpServer({ name: 'bench-upstream', version: '1.0.0' });
  server.registerTool(
    TOOL,
    { description: `Looks something up (takes ${TOOL_DELAY_MS} ms)`, inputSchema: { query: z.string() } },
    async ({ query }) => {
      await new Promise((resolve) => setTimeout(resolve, TOOL_DELAY_MS));
      return { content: [{ type: 'text' as const, text: `found: ${query}` }] };
    },
  );
  return server;
}

async function serveUpstream(): Promise<void> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer((req, res) => {
    void (async () => {
      const body = req.method === 'POST' ? await readJson(req) : undefined;
      const id = req.headers['mcp-session-id'];
      let transport = typeof id === 'string' ? sessions.get(id) : undefined;
      if (!transport) {
        if (typeof id === 'string' || req.method !== 'POST' || !isInitializeRequest(body)) {
          res
            .writeHead(typeof id === 'string' ? 404 : 400, { 'content-type': 'application/json' })
            .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'no such session' } }));
          return;
        }
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => void sessions.set(sessionId, created),
          onsessionclosed: (sessionId) => void sessions.delete(sessionId),
        });
        created.onclose = () => {
          if (created.sessionId) sessions.delete(created.sessionId);
        };
        await upstreamServer().connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res, body);
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(error));
    });
  });
  http.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  process.send?.({ port: (http.address() as AddressInfo).port });
  process.on('disconnect', () => process.exit(0));
}

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
    req.on('error', reject);
  });
}

async function startUpstream(): Promise<{ child: ChildProcess; url: string }> {
  // execArgv empty: a profiled bench run (--cpu-prof) profiles the control plane, not this
  const child = fork(__filename, [], {
    env: { ...process.env, [ROLE_ENV]: 'upstream' },
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message: { port: number }) => resolve(message.port));
    child.once('exit', (code) => reject(new Error(`the upstream exited (${code}) before listening`)));
    child.once('error', reject);
  });
  return { child, url: `http://127.0.0.1:${port}/mcp` };
}

// ── the bare hop: node:http, request and response piped, keep-alive upstream ──

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
]);

function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (!HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

async function startBareHop(upstream: string): Promise<{ server: Server; url: string; agent: Agent }> {
  const target = new URL(upstream);
  const agent = new Agent({ keepAlive: true });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const out = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...endToEnd(req.headers), host: target.host },
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
        answer.pipe(res);
      },
    );
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    // a client that leaves (the GET stream at close) ends the upstream exchange too
    res.on('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    req.pipe(out);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${target.pathname}`, agent };
}

// ── the load: SDK clients in a worker thread ──

function loadWorker(): (command: LoadCommand) => Promise<LoadAnswer> {
  const clients = new Map<TargetKey, Client[]>();
  /** calls answered as expected, per client: what the audit log must hold */
  const answered = new Map<Client, number>();

  async function call(client: Client, key: TargetKey): Promise<void> {
    const result = await client.callTool({ name: TOOL, arguments: ARGUMENTS });
    const text = ((result.content as { type: string; text?: string }[] | undefined) ?? [])
      .map((c) => c.text ?? '')
      .join('');
    // a refusal (policy, approval, limits) is fast: it must never count as a call
    if (result.isError || text !== EXPECTED_TEXT)
      throw new Error(`${key}: unexpected answer ${JSON.stringify(result).slice(0, 300)}`);
    answered.set(client, (answered.get(client) ?? 0) + 1);
  }

  async function handle(command: LoadCommand): Promise<LoadAnswer> {
    switch (command.type) {
      case 'connect': {
        const { key, url, headers } = command.target;
        const list: Client[] = [];
        const sessions: string[] = [];
        for (let i = 0; i < command.target.clients; i++) {
          const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
          const client = new Client({ name: `bench-${key}-${i}`, version: '1.0.0' });
          await client.connect(transport);
          const tools = await client.listTools();
          if (!tools.tools.some((tool) => tool.name === TOOL)) throw new Error(`${key}: ${TOOL} is not listed`);
          list.push(client);
          sessions.push(transport.sessionId ?? '');
        }
        clients.set(key, list);
        return { sessions };
      }
      case 'latency': {
        const samples: Record<string, number[]> = Object.fromEntries(command.keys.map((key) => [key, []]));
        const blocks = Math.ceil(command.calls / command.block);
        for (let b = 0; b < blocks; b++) {
          // rotate which target goes first: drift within a round lands on all of them
          const order = command.keys.map((_, i) => command.keys[(i + b) % command.keys.length]!);
          for (const key of order) {
            const client = clients.get(key)![0]!;
            const n = Math.min(command.block, command.calls - b * command.block);
            for (let i = 0; i < n; i++) {
              const started = performance.now();
              await call(client, key);
              samples[key]!.push(performance.now() - started);
            }
          }
        }
        return { samples };
      }
      case 'throughput': {
        const list = clients.get(command.key)!;
        let calls = 0;
        const started = performance.now();
        const deadline = started + command.seconds * 1000;
        await Promise.all(
          list.map(async (client) => {
            while (performance.now() < deadline) {
              await call(client, command.key);
              calls++;
            }
          }),
        );
        return { calls, ms: performance.now() - started };
      }
      case 'answered':
        return { answered: clients.get(command.key)!.map((client) => answered.get(client) ?? 0) };
      case 'close': {
        for (const list of clients.values()) {
          for (const client of list) {
            await (client.transport as StreamableHTTPClientTransport | undefined)
              ?.terminateSession()
              .catch(() => undefined);
            await client.close().catch(() => undefined);
          }
        }
        clients.clear();
        return { closed: true };
      }
    }
  }

  return handle;
}

// ── the control plane: embedded mode, a workspace with a policy, the upstream as a remote entry ──

async function call(base: string, method: string, path: string, token: string, body?: unknown): Promise<unknown> {
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
  return text === '' ? undefined : JSON.parse(text);
}

/**
 * A small policy of the usual shape: default deny, refusals and approvals for
 * the dangerous families, and the bench's call allowed by exactly one rule
 * (after argument conditions that are evaluated and do not match).
 */
const POLICY = {
  default: 'deny',
  on_error: 'deny',
  redact: ['token', 'password'],
  rules: [
    { id: 'deny-admin', effect: 'deny', tools: ['admin_*'] },
    { id: 'approve-deletes', effect: 'approval', tool_prefixes: ['delete_', 'drop_'] },
    { id: 'deny-exec', effect: 'deny', tools: ['run_*', 'exec*', 'shell'] },
    { id: 'approve-exports', effect: 'approval', tools: ['export_*'] },
    { id: 'deny-secret-queries', effect: 'deny', arguments: [{ path: 'query', regex: 'password|secret|api[_-]?key' }] },
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
      servers: [SERVER],
      tools: [TOOL, 'search_*', 'get_*', 'list_*'],
      execution_mode: 'remote',
    },
    { id: 'deny-local-writes', effect: 'deny', execution_mode: 'local', tools: ['write_*', 'put_*'] },
    { id: 'approve-payments', effect: 'approval', servers: ['payments', 'billing'] },
    { id: 'allow-operator-restarts', effect: 'allow', tools: ['restart_*'], principals: { roles: ['admin'] } },
  ],
};

async function setUpWorkspace(
  controlPlane: ControlPlane,
  upstreamUrl: string,
): Promise<{ token: string; caveatToken: string }> {
  const base = controlPlane.url;
  const owner = readFileSync(join(controlPlane.config.dataDir, 'admin-token'), 'utf8').trim();
  await call(base, 'PUT', `/v1/workspaces/${WORKSPACE}/policy`, owner, POLICY);
  await call(base, 'POST', '/v1/catalog/servers', owner, {
    name: SERVER,
    version: '1.0.0',
    mode: 'remote',
    transport: 'streamable_http',
    url: upstreamUrl,
  });
  await call(base, 'PUT', `/v1/workspaces/${WORKSPACE}/servers/${SERVER}`, owner, { version: '1.0.0' });
  const { token } = (await call(base, 'POST', '/v1/tokens', owner, {
    name: 'bench-proxy',
    role: 'member',
    workspace: WORKSPACE,
  })) as { token: string };
  const decision = (await call(base, 'POST', `/v1/workspaces/${WORKSPACE}/policy/evaluate`, owner, {
    server: SERVER,
    tool: TOOL,
    arguments: ARGUMENTS,
    execution_mode: 'remote',
  })) as {
    decision: string;
    rules: string[];
  };
  if (decision.decision !== 'allow' || decision.rules.join() !== ALLOWING_RULE)
    throw new Error(`the policy should allow the call by ${ALLOWING_RULE} alone, said ${JSON.stringify(decision)}`);
  // a session as a sandboxed agent holds it: default caps, narrowed to the one server
  const session = (await call(base, 'POST', '/v1/sessions', token, {
    workspace: WORKSPACE,
    agent: 'bench',
    caveats: { servers: [SERVER] },
  })) as { caveat_token: string };
  return { token, caveatToken: session.caveat_token };
}

/**
 * Waits until the control plane's audit and event pipeline (the outbox, on the
 * control plane's own thread) has caught up: each phase then pays for its own
 * calls' background work, not for the backlog a saturation phase left behind —
 * which on a small machine would also slow the next phase's direct baseline.
 */
async function settle(controlPlane: ControlPlane): Promise<number> {
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

/** Every measured call through the proxy must be in the audit log: started and succeeded. */
async function auditedCalls(controlPlane: ControlPlane, session: string): Promise<number> {
  const owner = readFileSync(join(controlPlane.config.dataDir, 'admin-token'), 'utf8').trim();
  let count = 0;
  let cursor: string | null = null;
  do {
    const query: string = `session=${encodeURIComponent(session)}&tool=${TOOL}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = (await call(controlPlane.url, 'GET', `/v1/workspaces/${WORKSPACE}/audit?${query}`, owner)) as {
      items: { type: string }[];
      next_cursor: string | null;
    };
    count += page.items.filter((event) => event.type === 'execution.succeeded').length;
    cursor = page.next_cursor;
  } while (cursor);
  return count;
}

/**
 * With AILERON_BENCH_PROFILE=<dir>, a CPU profile of the control plane's
 * thread during each proxied saturation phase (the load and the upstream run
 * elsewhere): where the proxy spends its time under load, without the set-up
 * and the other phases diluting it.
 */
async function profileControlPlane(round: number): Promise<(() => Promise<void>) | undefined> {
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
  return async () => {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    session.disconnect();
    const file = join(dir, `proxy-saturation-round-${round + 1}.cpuprofile`);
    require('node:fs').writeFileSync(file, JSON.stringify(profile));
    note(`  profile of the control plane under load: ${file}`);
  };
}

async function run(): Promise<Figure[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  let controlPlane: ControlPlane | undefined;
  let upstream: { child: ChildProcess; url: string } | undefined;
  let hop: { server: Server; url: string; agent: Agent } | undefined;
  let load: WorkerClients<LoadCommand, LoadAnswer> | undefined;
  try {
    upstream = await startUpstream();
    hop = await startBareHop(upstream.url);
    controlPlane = await startBenchControlPlane(dataDir, {
      ...LOAD_TEST_RATE_LIMITS,
      // server mode when given (PostgreSQL and Redis), with the workers in this process as embedded mode has them
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
    note(`  upstream ${upstream.url} (child process), bare hop ${hop.url}`);
    const { token, caveatToken } = await setUpWorkspace(controlPlane, upstream.url);

    load = new WorkerClients<LoadCommand, LoadAnswer>(__filename, LOAD_ROLE);
    const targets: TargetSpec[] = [
      { key: 'direct', url: upstream.url, headers: {}, clients: CLIENTS },
      { key: 'hop', url: hop.url, headers: {}, clients: 1 },
      {
        key: 'proxied',
        url: `${controlPlane.url}/mcp/${WORKSPACE}/${SERVER}`,
        headers: { authorization: `Bearer ${token}` },
        clients: CLIENTS,
      },
      {
        key: 'caveat',
        url: `${controlPlane.url}/mcp/${WORKSPACE}/${SERVER}`,
        headers: { authorization: `Bearer ${caveatToken}` },
        clients: 1,
      },
    ];
    const sessions: Partial<Record<TargetKey, string[]>> = {};
    for (const target of targets)
      sessions[target.key] = (await load.send<{ sessions: string[] }>({ type: 'connect', target })).sessions;
    const keys = targets.map((t) => t.key);

    await load.send({ type: 'latency', keys, calls: WARMUP_CALLS, block: BLOCK });
    await load.send({ type: 'throughput', key: 'direct', seconds: WARMUP_SECONDS });
    await load.send({ type: 'throughput', key: 'proxied', seconds: WARMUP_SECONDS });

    const samples: Record<TargetKey, number[]> = { direct: [], hop: [], proxied: [], caveat: [] };
    const totals = { direct: { calls: 0, ms: 0 }, proxied: { calls: 0, ms: 0 } };
    const roundRatios: number[] = [];
    let settling = 0;
    const cpuPerCall: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      settling += await settle(controlPlane);
      const round = await load.send<{ samples: Record<TargetKey, number[]> }>({
        type: 'latency',
        keys: r % 2 === 0 ? keys : [...keys].reverse(),
        calls: SEQUENTIAL_CALLS,
        block: BLOCK,
      });
      for (const key of keys) samples[key].push(...round.samples[key]);
      const rates = { direct: 0, proxied: 0 };
      for (const key of r % 2 === 0 ? (['direct', 'proxied'] as const) : (['proxied', 'direct'] as const)) {
        settling += await settle(controlPlane);
        const stopProfile = key === 'proxied' ? await profileControlPlane(r) : undefined;
        const cpuBefore = mainThreadCpuMs();
        const measured = await load.send<{ calls: number; ms: number }>({
          type: 'throughput',
          key,
          seconds: SATURATION_SECONDS,
        });
        if (key === 'proxied' && cpuBefore !== undefined)
          cpuPerCall.push(((mainThreadCpuMs()! - cpuBefore) * 1000) / measured.calls);
        await stopProfile?.();
        totals[key].calls += measured.calls;
        totals[key].ms += measured.ms;
        rates[key] = (measured.calls / measured.ms) * 1000;
      }
      roundRatios.push(rates.proxied / rates.direct);
      const p50 = (key: TargetKey): string => percentile(round.samples[key], 50).toFixed(3);
      const p99 = (key: TargetKey): string => percentile(round.samples[key], 99).toFixed(3);
      note(
        `  round ${r + 1}/${ROUNDS}: p50 direct ${p50('direct')} / hop ${p50('hop')} / proxied ${p50('proxied')} ms; p99 ${p99('direct')} / ${p99('hop')} / ${p99('proxied')} ms; ` +
          `${CLIENTS} clients: direct ${rates.direct.toFixed(0)} calls/s, proxied ${rates.proxied.toFixed(0)} calls/s (${(rates.proxied / rates.direct).toFixed(3)})`,
      );
    }

    // correctness of what was measured: every call of the sequential client's proxied session was audited
    const latencySession = sessions.proxied![0]!;
    const expected = (await load.send<{ answered: number[] }>({ type: 'answered', key: 'proxied' })).answered[0]!;
    const deadline = Date.now() + 15_000;
    let audited = await auditedCalls(controlPlane, latencySession);
    while (audited < expected && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      audited = await auditedCalls(controlPlane, latencySession);
    }
    if (audited !== expected)
      throw new Error(
        `the audit log holds ${audited} execution.succeeded records for the measured session, expected ${expected}`,
      );
    note(
      `  audit: all ${expected} proxied calls of the sequential client's session recorded as execution.succeeded; median per-round throughput ratio ${median(roundRatios).toFixed(3)}; ${(settling / 1000).toFixed(1)} s spent waiting for the outbox to drain between phases`,
    );

    // the CPU each call costs the control plane's thread: steadier than rates when the machine's other tenants come and go
    if (cpuPerCall.length > 0)
      note(
        `  the control plane's thread under load: ${cpuPerCall.map((us) => us.toFixed(0)).join(' / ')} µs of CPU per proxied call (rounds 1–${ROUNDS})`,
      );
    const p = (key: TargetKey, q: number): number => percentile(samples[key], q);
    // the floor any forwarding proxy stands on here: the first two goals read against it
    note(
      `  a bare node:http hop alone, against direct in this run: p50 ${(p('hop', 50) / p('direct', 50)).toFixed(3)}, p99 ${(p('hop', 99) / p('direct', 99)).toFixed(3)}`,
    );
    const directRate = (totals.direct.calls / totals.direct.ms) * 1000;
    const proxiedRate = (totals.proxied.calls / totals.proxied.ms) * 1000;
    const sequential = `${ROUNDS} rounds of ${SEQUENTIAL_CALLS} sequential calls per target, blocks of ${BLOCK} rotating between targets`;
    const upstreamWhat = `a ${TOOL_DELAY_MS} ms tool of an SDK McpServer (child process)`;
    return [
      figure({
        bench: NAME,
        figure:
          "p50 latency of tools/call through /mcp/{ws}/{server} with an agent session's caveat token vs with an API token",
        value: p('caveat', 50),
        baseline: {
          what: `the same calls with the API token that started the session, ${sequential}`,
          value: p('proxied', 50),
          unit: 'ms',
        },
        goal: 1.05,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: 'p50 latency of tools/call through /mcp/{ws}/{server} (token, rate limit, policy, audit) vs direct',
        value: p('proxied', 50),
        baseline: {
          what: `the same SDK client straight to ${upstreamWhat}, ${sequential}`,
          value: p('direct', 50),
          unit: 'ms',
        },
        goal: 1.1,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: 'p99 latency of tools/call through /mcp/{ws}/{server} vs direct',
        value: p('proxied', 99),
        baseline: {
          what: `the same SDK client straight to ${upstreamWhat}, ${sequential}`,
          value: p('direct', 99),
          unit: 'ms',
        },
        goal: 1.25,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: `tools/call throughput at saturation (${CLIENTS} closed-loop clients) through /mcp/{ws}/{server} vs direct`,
        value: proxiedRate,
        baseline: {
          what: `${CLIENTS} SDK clients straight to ${upstreamWhat}, ${ROUNDS} alternating rounds of ${SATURATION_SECONDS} s`,
          value: directRate,
          unit: 'calls/s',
        },
        goal: 0.45,
        better: 'higher',
      }),
      figure({
        bench: NAME,
        figure: 'p50 latency added by /mcp/{ws}/{server} vs added by a bare node:http forwarding hop',
        value: p('proxied', 50) - p('direct', 50),
        baseline: {
          what: `p50 of a node:http hop piping to the upstream (keep-alive agent) minus direct p50, ${sequential}`,
          value: p('hop', 50) - p('direct', 50),
          unit: 'ms',
        },
        goal: 1.5,
        better: 'lower',
      }),
    ];
  } finally {
    await load?.close({ type: 'close' }).catch(() => undefined);
    if (hop) {
      hop.server.closeAllConnections();
      hop.server.close();
      hop.agent.destroy();
    }
    await controlPlane?.close().catch((error: unknown) => note(`  control plane close failed: ${String(error)}`));
    upstream?.child.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const proxyBench: Bench = {
  name: NAME,
  summary:
    'MCP tools/call on a 2 ms upstream through /mcp/{ws}/{server} (token, policy, audit) vs direct: p50, p99, saturation; added latency vs a bare node:http hop',
  run,
};

// this file is also the upstream's process and the load's thread
if (process.env[ROLE_ENV] === 'upstream' && require.main === module) {
  void serveUpstream();
} else {
  serveInWorker(LOAD_ROLE, loadWorker);
}
