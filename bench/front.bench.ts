import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import Fastify, { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { FastPaths, RouteCatalog } from '../libs/platform/http/src';
import { enrolGateway } from './catalog.bench';
import { LOAD_TEST_RATE_LIMITS, startBenchControlPlane } from './control-plane';
import { Bench, Figure, figure, mainThreadCpuMs, note } from './figures';

/**
 * `front`: where the requests that skip Nest (a gateway's 304 poll, a message
 * on an open MCP session) are best taken. Today a `node:http` server offers
 * each request to the fast paths before Fastify sees it. The alternatives are
 * Fastify without Nest: the fast paths in an `onRequest` hook, or plain
 * Fastify routes. Both are measured here as lower bounds — a bare Fastify with
 * the control plane's route table and nothing else, calling the control
 * plane's own fast-path handlers — so if the current front beats them, it
 * beats them in any real configuration too, where Fastify would carry the
 * app's hooks, middleware and parsers as well.
 */
const NAME = 'front';
const CONNECTIONS = 10;
const WARMUP_SECONDS = 1;
/** many short alternating rounds: on a shared machine speed swings within seconds, and this spreads the swings over every side */
const SECONDS = 1;
const ROUNDS = 12;

type Front = 'server' | 'hook' | 'route';
const FRONTS: readonly Front[] = ['server', 'hook', 'route'];
const DESCRIBED: Record<Front, string> = {
  server: 'a node:http server offering each request to the fast paths before Fastify (the current front)',
  hook: 'the same fast paths in the first onRequest hook of a bare Fastify with the control plane’s routes',
  route: 'the same fast paths as the handlers of plain Fastify routes',
};

interface Workload {
  key: string;
  what: string;
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  /** a module that gives each request its body (autocannon's worker loads it by path) */
  requestModule?: string;
  status: number;
}

/**
 * Requests in flight on one session need JSON-RPC ids of their own. (autocannon's
 * `idReplacement` declares a Content-Length for ids longer than the ones it makes,
 * and the server waits for bytes that never come.)
 */
const PING_REQUEST_MODULE = `let id = 0;
module.exports = (request) => ({ ...request, body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'ping' }) });
`;

/** Two requests first (the second on the same connection), so a front that answers wrongly says why. */
async function check(url: string, workload: Workload): Promise<void> {
  for (let i = 0; i < 2; i++) {
    const body = workload.requestModule ? JSON.stringify({ jsonrpc: '2.0', id: 'check', method: 'ping' }) : undefined;
    const response = await fetch(`${url}${workload.path}`, {
      method: workload.method,
      headers: workload.headers,
      body,
    });
    const text = await response.text();
    if (response.status !== workload.status)
      throw new Error(
        `${workload.key} at ${url}: answered ${response.status}, not ${workload.status}: ${text.slice(0, 300)}`,
      );
  }
}

async function load(url: string, workload: Workload, seconds: number): Promise<{ answered: number; seconds: number }> {
  const result = await autocannon({
    url: `${url}${workload.path}`,
    method: workload.method,
    headers: workload.headers,
    ...(workload.requestModule ? { requests: [{ setupRequest: workload.requestModule }] } : {}),
    connections: CONNECTIONS,
    duration: seconds,
    workers: 1,
  });
  const answered = result.statusCodeStats?.[`${workload.status}`]?.count ?? 0;
  const other = Object.entries(result.statusCodeStats ?? {})
    .filter(([code]) => code !== `${workload.status}`)
    .map(([code, stats]) => `${code}×${stats.count ?? 0}`);
  if (other.length > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `${workload.key} at ${url}: expected only ${workload.status}, got ${[...other, `errors×${result.errors}`, `timeouts×${result.timeouts}`].join(', ')}`,
    );
  }
  if (answered === 0) throw new Error(`${workload.key} at ${url}: no ${workload.status} answers in ${seconds} s`);
  return { answered, seconds: result.duration };
}

/** An MCP session on the workspace's aggregate endpoint: its messages are what the MCP fast path serves. */
async function openMcpSession(controlPlane: ControlPlane, token: string): Promise<Record<string, string>> {
  const headers = {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  const opened = await fetch(`${controlPlane.url}/mcp/default`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'bench-front', version: '1.0.0' },
      },
    }),
  });
  await opened.text();
  const session = opened.headers.get('mcp-session-id');
  if (opened.status !== 200 || !session) throw new Error(`initialize answered ${opened.status} without a session`);
  const sessionHeaders = { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
  const initialized = await fetch(`${controlPlane.url}/mcp/default`, {
    method: 'POST',
    headers: sessionHeaders,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  await initialized.text();
  if (initialized.status !== 202) throw new Error(`notifications/initialized answered ${initialized.status}`);
  return sessionHeaders;
}

/** Offers a request to the control plane's fast paths, as its own front does. */
function offer(paths: FastPaths, request: IncomingMessage, response: ServerResponse): boolean {
  for (const fast of paths.handlers) if (fast(request, response)) return true;
  return false;
}

/**
 * Fastify with the control plane's route table and the fast paths mounted as
 * `front` says. What they leave (a credential or answer no longer in memory:
 * the routes answer in full and fill the caches again) goes to the control
 * plane's own Fastify, as it would in one app.
 */
async function bareFastify(
  controlPlane: ControlPlane,
  front: 'hook' | 'route',
): Promise<{ fastify: FastifyInstance; url: string }> {
  const paths = controlPlane.app.get(FastPaths);
  const app = controlPlane.app.getHttpAdapter().getInstance();
  const leave = (request: FastifyRequest, reply: FastifyReply): void => {
    reply.hijack();
    app.routing(request.raw, reply.raw);
  };
  const fastify = Fastify();
  const taken = new Set(['GET /v1/gateway/catalog', 'POST /mcp/:ws']);
  if (front === 'hook') {
    fastify.addHook('onRequest', (request, reply, done) => {
      if (offer(paths, request.raw, reply.raw)) reply.hijack();
      else done();
    });
  } else {
    // the fast path reads the body itself, as a route using the shared parser would: Fastify must not read it first
    fastify.removeContentTypeParser('application/json');
    fastify.addContentTypeParser('application/json', (_request, _payload, done) => done(null, undefined));
    for (const route of taken) {
      const [method, url] = route.split(' ') as ['GET' | 'POST', string];
      fastify.route({
        method,
        url,
        handler: (request, reply) => {
          if (offer(paths, request.raw, reply.raw)) reply.hijack();
          else leave(request, reply);
        },
      });
    }
  }
  const seen = new Set(front === 'route' ? taken : []);
  for (const route of controlPlane.app.get(RouteCatalog).all()) {
    const key = `${route.method} ${route.path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    fastify.route({ method: route.method, url: route.path, handler: leave });
  }
  const url = await fastify.listen({ port: 0, host: '127.0.0.1' });
  return { fastify, url };
}

async function run(): Promise<Figure[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  let controlPlane: ControlPlane | undefined;
  const others: FastifyInstance[] = [];
  try {
    controlPlane = await startBenchControlPlane(dataDir, LOAD_TEST_RATE_LIMITS);
    const gateway = await enrolGateway(controlPlane);
    const owner = readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
    const mcpHeaders = await openMcpSession(controlPlane, owner);
    const pingRequests = join(dataDir, 'ping-request.js');
    writeFileSync(pingRequests, PING_REQUEST_MODULE);

    const workloads: Workload[] = [
      {
        key: 'poll',
        what: "a gateway's catalog poll answered 304",
        path: '/v1/gateway/catalog',
        method: 'GET',
        headers: { authorization: `Bearer ${gateway.token}`, 'if-none-match': gateway.etag },
        status: 304,
      },
      {
        key: 'mcp',
        what: 'an MCP ping on an open session of /mcp/{ws}',
        path: '/mcp/default',
        method: 'POST',
        headers: mcpHeaders,
        requestModule: pingRequests,
        status: 200,
      },
    ];
    const urls: Record<Front, string> = { server: controlPlane.url, hook: '', route: '' };
    for (const front of ['hook', 'route'] as const) {
      const bare = await bareFastify(controlPlane, front);
      others.push(bare.fastify);
      urls[front] = bare.url;
    }

    const figures: Figure[] = [];
    for (const workload of workloads) {
      for (const front of FRONTS) await check(urls[front], workload);
      for (const front of FRONTS) await load(urls[front], workload, WARMUP_SECONDS);
      const totals = Object.fromEntries(
        FRONTS.map((front) => [front, { answered: 0, seconds: 0, cpuMs: 0 }]),
      ) as Record<Front, { answered: number; seconds: number; cpuMs: number }>;
      for (let r = 0; r < ROUNDS; r++) {
        // rotate who goes first: drift within a round lands on every front
        const order = FRONTS.map((_, i) => FRONTS[(i + r) % FRONTS.length]!);
        const rates = {} as Record<Front, number>;
        const cpu = {} as Record<Front, number>;
        for (const front of order) {
          const before = mainThreadCpuMs();
          const measured = await load(urls[front], workload, SECONDS);
          const spent = before === undefined ? Number.NaN : mainThreadCpuMs()! - before;
          totals[front].answered += measured.answered;
          totals[front].seconds += measured.seconds;
          totals[front].cpuMs += spent;
          rates[front] = measured.answered / measured.seconds;
          cpu[front] = (spent * 1000) / measured.answered;
        }
        note(
          `  ${workload.key} round ${r + 1}/${ROUNDS}: ${FRONTS.map((front) => `${front} ${rates[front].toFixed(0)} req/s ${cpu[front].toFixed(0)} µs`).join(', ')}`,
        );
      }
      const rate = (front: Front): number => totals[front].answered / totals[front].seconds;
      const cpuPerRequest = (front: Front): number => (totals[front].cpuMs * 1000) / totals[front].answered;
      note(
        `  ${workload.key}: ${FRONTS.map((front) => `${front} ${rate(front).toFixed(0)} req/s`).join(', ')} over all rounds`,
      );
      for (const other of ['hook', 'route'] as const) {
        figures.push(
          figure({
            bench: NAME,
            figure: `CPU of the server's thread per request, ${workload.what}, through the current front vs ${other === 'hook' ? 'an onRequest hook' : 'a plain Fastify route'}`,
            value: cpuPerRequest('server'),
            baseline: {
              what: `${DESCRIBED[other]}; autocannon ${CONNECTIONS} connections in a worker thread, ${ROUNDS} rotating rounds of ${SECONDS} s`,
              value: cpuPerRequest(other),
              unit: 'µs',
            },
            // the front that costs less is the one to keep: this one stays while it does
            goal: 1.0,
            better: 'lower',
          }),
        );
      }
    }
    return figures;
  } finally {
    for (const fastify of others) await fastify.close().catch(() => undefined);
    await controlPlane?.close().catch((error: unknown) => note(`  control plane close failed: ${String(error)}`));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const frontBench: Bench = {
  name: NAME,
  summary:
    'requests that skip Nest (304 poll, MCP message): the node:http front vs the fast paths in a Fastify onRequest hook or route',
  run,
};
