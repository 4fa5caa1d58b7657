import { ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
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
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { Bench, Figure, figure, median, note, percentile } from './figures';
import { LoadTarget, McpLoad } from './mcp-load';
import {
  api,
  CLIENTS,
  expectAudited,
  measureRounds,
  ROUNDS_PLAN,
  SEQUENTIAL,
  poolServer,
  startPoolBenchControlPlane,
  WORKSPACE,
} from './pool-bench';

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

const TOOL = 'lookup';
export const TOOL_DELAY_MS = 2;
export const CALL = { name: TOOL, arguments: { query: 'status' }, expected: 'found: status' };

const SERVER = 'bench';

/** `caveat`: the proxied endpoint with an agent session's caveat token (started by the API token's member) instead of the API token */
type TargetKey = 'direct' | 'hop' | 'proxied' | 'caveat';

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

/** The upstream in a process of its own, listening on a free port; its MCP endpoint. */
export async function startUpstream(): Promise<{ child: ChildProcess; url: string }> {
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

// ── the control plane: embedded mode, a workspace with a policy, the upstream as a remote entry ──

async function setUpWorkspace(
  controlPlane: ControlPlane,
  upstreamUrl: string,
): Promise<{ token: string; caveatToken: string }> {
  const { token } = await poolServer(
    controlPlane,
    { [SERVER]: { transport: 'streamable_http', url: upstreamUrl } },
    CALL,
  );
  // a session as a sandboxed agent holds it: default caps, narrowed to the one server
  const session = (await api(controlPlane.url, token, 'POST', '/v1/sessions', {
    workspace: WORKSPACE,
    agent: 'bench',
    caveats: { servers: [SERVER] },
  })) as { caveat_token: string };
  return { token, caveatToken: session.caveat_token };
}

async function run(): Promise<Figure[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  let controlPlane: ControlPlane | undefined;
  let upstream: { child: ChildProcess; url: string } | undefined;
  let hop: { server: Server; url: string; agent: Agent } | undefined;
  let load: McpLoad | undefined;
  try {
    upstream = await startUpstream();
    hop = await startBareHop(upstream.url);
    controlPlane = await startPoolBenchControlPlane(dataDir);
    note(`  upstream ${upstream.url} (child process), bare hop ${hop.url}`);
    const { token, caveatToken } = await setUpWorkspace(controlPlane, upstream.url);

    load = new McpLoad();
    const proxied = `${controlPlane.url}/mcp/${WORKSPACE}/${SERVER}`;
    const targets: (LoadTarget & { key: TargetKey })[] = [
      { key: 'direct', url: upstream.url, headers: {}, clients: CLIENTS, call: CALL },
      { key: 'hop', url: hop.url, headers: {}, clients: 1, call: CALL },
      { key: 'proxied', url: proxied, headers: { authorization: `Bearer ${token}` }, clients: CLIENTS, call: CALL },
      { key: 'caveat', url: proxied, headers: { authorization: `Bearer ${caveatToken}` }, clients: 1, call: CALL },
    ];
    const sessions: Partial<Record<TargetKey, string[]>> = {};
    for (const target of targets) sessions[target.key] = await load.connect(target);

    const { samples, rates, roundRates, cpuPerCall, settlingMs } = await measureRounds(
      controlPlane,
      load,
      {
        bench: NAME,
        latency: targets.map((t) => t.key),
        saturation: ['direct', 'proxied'],
        pools: ['proxied'],
        ...ROUNDS_PLAN,
      },
      (r, round, rates) => {
        const p50 = (key: TargetKey): string => percentile(round[key]!, 50).toFixed(3);
        const p99 = (key: TargetKey): string => percentile(round[key]!, 99).toFixed(3);
        note(
          `  round ${r + 1}/${ROUNDS_PLAN.rounds}: p50 direct ${p50('direct')} / hop ${p50('hop')} / proxied ${p50('proxied')} ms; p99 ${p99('direct')} / ${p99('hop')} / ${p99('proxied')} ms; ` +
            `${CLIENTS} clients: direct ${rates.direct!.toFixed(0)} calls/s, proxied ${rates.proxied!.toFixed(0)} calls/s (${(rates.proxied! / rates.direct!).toFixed(3)})`,
        );
      },
    );

    // correctness of what was measured: every call of the sequential client's proxied session was audited
    const expected = (await load.answered('proxied'))[0]!;
    await expectAudited(controlPlane, sessions.proxied![0]!, TOOL, expected);
    note(
      `  audit: all ${expected} proxied calls of the sequential client's session recorded as execution.succeeded; median per-round throughput ratio ${median(roundRates.map((round) => round.proxied! / round.direct!)).toFixed(3)}; ${(settlingMs / 1000).toFixed(1)} s spent waiting for the outbox to drain between phases`,
    );

    // the CPU each call costs the control plane's thread: steadier than rates when the machine's other tenants come and go
    if (cpuPerCall.proxied!.length > 0)
      note(
        `  the control plane's thread under load: ${cpuPerCall.proxied!.map((us) => us.toFixed(0)).join(' / ')} µs of CPU per proxied call (rounds 1–${ROUNDS_PLAN.rounds})`,
      );
    const p = (key: TargetKey, q: number): number => percentile(samples[key]!, q);
    // the floor any forwarding proxy stands on here: the p50 goal reads against the hop, not against direct
    note(
      `  a bare node:http hop alone, against direct in this run: p50 ${(p('hop', 50) / p('direct', 50)).toFixed(3)}, p99 ${(p('hop', 99) / p('direct', 99)).toFixed(3)}; proxied p50 against direct ${(p('proxied', 50) / p('direct', 50)).toFixed(3)}`,
    );
    const directRate = rates.direct!;
    const proxiedRate = rates.proxied!;
    const upstreamWhat = `a ${TOOL_DELAY_MS} ms tool of an SDK McpServer (child process)`;
    return [
      figure({
        bench: NAME,
        figure:
          "p50 latency of tools/call through /mcp/{ws}/{server} with an agent session's caveat token vs with an API token",
        value: p('caveat', 50),
        baseline: {
          what: `the same calls with the API token that started the session, ${SEQUENTIAL}`,
          value: p('proxied', 50),
          unit: 'ms',
        },
        goal: 1.05,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure:
          'p50 latency of tools/call through /mcp/{ws}/{server} (token, rate limit, policy, audit) vs a bare node:http forwarding hop',
        value: p('proxied', 50),
        baseline: {
          what: `the same SDK client through a node:http hop piping to ${upstreamWhat} (keep-alive agent), ${SEQUENTIAL}`,
          value: p('hop', 50),
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
          what: `the same SDK client straight to ${upstreamWhat}, ${SEQUENTIAL}`,
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
          what: `${CLIENTS} SDK clients straight to ${upstreamWhat}, ${ROUNDS_PLAN.rounds} alternating rounds of ${ROUNDS_PLAN.seconds} s`,
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
          what: `p50 of a node:http hop piping to the upstream (keep-alive agent) minus direct p50, ${SEQUENTIAL}`,
          value: p('hop', 50) - p('direct', 50),
          unit: 'ms',
        },
        goal: 1.5,
        better: 'lower',
      }),
    ];
  } finally {
    await load?.close().catch(() => undefined);
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
    'MCP tools/call on a 2 ms upstream through /mcp/{ws}/{server} (token, policy, audit): p50 vs a bare node:http hop, p99 and saturation vs direct; added latency vs the hop',
  run,
};

// this file is also the upstream's process
if (process.env[ROLE_ENV] === 'upstream' && require.main === module) void serveUpstream();
