import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { Bench, Figure, figure, note, percentile } from './figures';
import { LoadTarget, McpLoad } from './mcp-load';
import {
  api,
  CLIENTS,
  expectAudited,
  measureRounds,
  ROUNDS_PLAN,
  SEQUENTIAL,
  ownerToken,
  poolServer,
  startPoolBenchControlPlane,
  WORKSPACE,
} from './pool-bench';
import { treeCpuMs } from './process-tree';

/**
 * `peers`: the pool against the tools people run instead of it to put a stdio
 * MCP server on Streamable HTTP, supergateway and mcp-proxy (dev dependencies
 * of this bench alone). The same stdio server-everything behind each, the
 * same SDK clients calling its `echo` tool; the pool with the token check,
 * rate limits, policy and audit on. Sequential calls (p50, p99) and 16
 * closed-loop clients (calls/s), every target in the same run, alternating.
 *
 * Each peer is measured against the pool running the server as that peer
 * does: supergateway (`--stateful`) starts a child per MCP session, as the
 * pool does by default; mcp-proxy starts one child when it starts and serves
 * every session through it (its `proxy()` connects one SDK client over one
 * stdio transport, and each session's server forwards to that client), as
 * the pool does for a catalog entry with `sessions: shared`. The pool is run
 * both ways in the same run, and the crossings are printed too.
 *
 * The clients run in a worker thread (mcp-load.ts), the control plane on the
 * main thread, each peer in a process of its own, as each runs in practice.
 */
const NAME = 'peers';

const CALL = { name: 'echo', arguments: { message: 'status' }, expected: 'Echo: status' };

const PEERS = ['supergateway', 'mcp-proxy'] as const;
type Peer = (typeof PEERS)[number];

/** The pool's two ways of running a stdio server: its catalog server's name and the entry's `sessions`. */
const POOLS = {
  pool: { server: 'everything', sessions: 'per_session', children: 'a child per session' },
  'pool-shared': { server: 'everything-shared', sessions: 'shared', children: 'one child for every session' },
} as const;
type PoolKey = keyof typeof POOLS;

/** The pool target that runs the server as each peer does. */
const LIKE: Record<Peer, PoolKey> = { supergateway: 'pool', 'mcp-proxy': 'pool-shared' };

/** The stdio server every target runs. */
function everything(): string[] {
  return [process.execPath, resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'];
}

/** A package's program, as its package.json names it. */
function binOf(pkg: string): string {
  const dir = resolve('node_modules', pkg);
  const { bin } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    bin: string | Record<string, string>;
  };
  return join(dir, typeof bin === 'string' ? bin : bin[pkg]!);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as { port: number };
  await new Promise((closed) => server.close(closed));
  return port;
}

/** The command lines the issue names: stateful Streamable HTTP, one child per session, nothing tuned. */
function peerArgs(peer: Peer, port: number): string[] {
  const server = everything();
  switch (peer) {
    case 'supergateway':
      return [
        binOf('supergateway'),
        '--stdio',
        server.join(' '),
        '--outputTransport',
        'streamableHttp',
        '--stateful',
        '--port',
        String(port),
        '--logLevel',
        'none',
      ];
    case 'mcp-proxy':
      return [binOf('mcp-proxy'), '--port', String(port), '--host', '127.0.0.1', '--', ...server];
  }
}

/** Starts the peer and resolves once its port answers HTTP. */
async function startPeer(peer: Peer): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  // execArgv empty: a profiled bench run profiles the control plane, not this
  const child = spawn(process.execPath, peerArgs(peer, port), { stdio: ['ignore', 'ignore', 'inherit'] });
  const url = `http://127.0.0.1:${port}/mcp`;
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = `${peer} exited (${signal ?? code}) before it listened`));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(exited);
    try {
      const answer = await fetch(url, { method: 'GET', signal: AbortSignal.timeout(1000) });
      await answer.body?.cancel();
      return { child, url };
    } catch {
      if (Date.now() > deadline) throw new Error(`${peer} did not answer on ${url} within 30 s`);
      await new Promise((wait) => setTimeout(wait, 100));
    }
  }
}

/** The pid of the pool's instance of `server` (its bwrap, or its bridge without a sandbox). */
async function instancePid(controlPlane: ControlPlane, server: string): Promise<number | undefined> {
  const page = (await api(
    controlPlane.url,
    ownerToken(controlPlane),
    'GET',
    `/v1/workspaces/${WORKSPACE}/pool/instances`,
  )) as { items: { server: string; pid?: number }[] };
  return page.items.find((instance) => instance.server === server)?.pid;
}

async function run(): Promise<Figure[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  let controlPlane: ControlPlane | undefined;
  const peers = new Map<Peer, { child: ChildProcess; url: string }>();
  let load: McpLoad | undefined;
  try {
    controlPlane = await startPoolBenchControlPlane(dataDir);
    const [command, ...args] = everything();
    const entry = { transport: 'stdio', command: command === process.execPath ? 'node' : command, args };
    const { token } = await poolServer(
      controlPlane,
      Object.fromEntries(Object.values(POOLS).map((pool) => [pool.server, { ...entry, sessions: pool.sessions }])),
      CALL,
    );
    for (const peer of PEERS) peers.set(peer, await startPeer(peer));
    note(`  ${PEERS.map((peer) => `${peer} ${peers.get(peer)!.url}`).join(', ')} (child processes)`);

    load = new McpLoad();
    const targets: LoadTarget[] = [
      ...Object.entries(POOLS).map(([key, pool]) => ({
        key,
        url: `${controlPlane!.url}/mcp/${WORKSPACE}/${pool.server}`,
        headers: { authorization: `Bearer ${token}` },
        clients: CLIENTS,
        call: CALL,
      })),
      ...PEERS.map((peer) => ({ key: peer, url: peers.get(peer)!.url, headers: {}, clients: CLIENTS, call: CALL })),
    ];
    const sessions: Record<string, string[]> = {};
    for (const target of targets) sessions[target.key] = await load.connect(target);
    const keys = targets.map((target) => target.key);

    // the CPU each target's own processes spend (the instance's tree, a peer and its children), over its saturation phases
    const trees: Record<string, number | undefined> = {
      ...Object.fromEntries(
        await Promise.all(
          Object.entries(POOLS).map(async ([key, pool]) => [key, await instancePid(controlPlane!, pool.server)]),
        ),
      ),
      ...Object.fromEntries(PEERS.map((peer) => [peer, peers.get(peer)!.child.pid])),
    };
    const cpuBefore = Object.fromEntries(keys.map((key) => [key, trees[key] ? treeCpuMs(trees[key]) : 0]));

    const poolKeys = Object.keys(POOLS) as PoolKey[];
    const result = await measureRounds(
      controlPlane,
      load,
      { bench: NAME, latency: keys, saturation: keys, pools: poolKeys, ...ROUNDS_PLAN },
      (r, round, rates) => {
        const each = (f: (key: string) => string) => keys.map((key) => `${key} ${f(key)}`).join(', ');
        note(
          `  round ${r + 1}/${ROUNDS_PLAN.rounds}: p50 ${each((key) => percentile(round[key]!, 50).toFixed(3))} ms; p99 ${each((key) => percentile(round[key]!, 99).toFixed(3))} ms; ` +
            `${CLIENTS} clients: ${each((key) => rates[key]!.toFixed(0))} calls/s`,
        );
      },
    );

    for (const key of poolKeys) {
      const expected = (await load.answered(key))[0]!;
      await expectAudited(controlPlane, sessions[key]![0]!, CALL.name, expected);
      note(`  audit: all ${expected} calls of the ${key} sequential session recorded as execution.succeeded`);
    }
    note(`  ${(result.settlingMs / 1000).toFixed(1)} s spent waiting for the outbox to drain between phases`);
    const perCall: string[] = [];
    for (const key of keys) {
      const answered = (await load.answered(key)).reduce((sum, n) => sum + n, 0);
      const tree = trees[key];
      perCall.push(`${key} ${tree ? (((treeCpuMs(tree) - cpuBefore[key]!) * 1000) / answered).toFixed(0) : '?'}`);
    }
    note(
      `  CPU per call, µs: the control plane's thread under load ${poolKeys.map((key) => `${key} ${result.cpuPerCall[key]!.map((us) => us.toFixed(0)).join(' / ')}`).join(', ')} (rounds 1–${ROUNDS_PLAN.rounds}); ` +
        `each target's own processes (the pool's instance, a peer, their children) over every call of the run: ${perCall.join(', ')}`,
    );

    const p = (key: string, q: number): number => percentile(result.samples[key]!, q);
    // the crossings: each peer against the pool run the other way, for the record
    for (const peer of PEERS)
      for (const key of poolKeys.filter((key) => key !== LIKE[peer]))
        note(
          `  ${key} (${POOLS[key].children}) against ${peer}, for the record: p50 ${(p(key, 50) / p(peer, 50)).toFixed(2)}, ` +
            `p99 ${(p(key, 99) / p(peer, 99)).toFixed(2)}, calls/s ${(result.rates[key]! / result.rates[peer]!).toFixed(2)}`,
        );
    return PEERS.flatMap((peer) => {
      const key = LIKE[peer];
      const pool = `/mcp/{ws}/{server} (token, rate limit, policy, audit) on a stdio server-everything, ${POOLS[key].children}`;
      const same = `the same SDK client through ${peer} on the same stdio server (${POOLS[key].children})`;
      return [
        ...[50, 99].map((q) =>
          figure({
            bench: NAME,
            figure: `p${q} latency of tools/call (echo) through ${pool} vs ${peer}`,
            value: p(key, q),
            baseline: { what: `${same}, ${SEQUENTIAL}`, value: p(peer, q), unit: 'ms' },
            goal: 1.0,
            better: 'lower',
          }),
        ),
        figure({
          bench: NAME,
          figure: `tools/call (echo) throughput of ${CLIENTS} closed-loop clients through ${pool} vs ${peer}`,
          value: result.rates[key]!,
          baseline: {
            what: `${CLIENTS} SDK clients through ${peer}, ${ROUNDS_PLAN.rounds} rounds of ${ROUNDS_PLAN.seconds} s, the order rotating`,
            value: result.rates[peer]!,
            unit: 'calls/s',
          },
          goal: 1.0,
          better: 'higher',
        }),
      ];
    });
  } finally {
    await load?.close().catch(() => undefined);
    await controlPlane?.close().catch((error: unknown) => note(`  control plane close failed: ${String(error)}`));
    for (const { child } of peers.values()) child.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const peersBench: Bench = {
  name: NAME,
  summary:
    'MCP tools/call (echo) on a stdio server-everything through /mcp/{ws}/{server} (token, policy, audit) vs supergateway and mcp-proxy, each against the pool running the server as it does: p50, p99, 16 clients',
  run,
};
