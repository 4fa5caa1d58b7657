import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { requireBuild, startControlPlaneProcess, stopProcess } from '../test/support/control-plane-process';
import { freePort } from '../test/support/services';
import { LOAD_TEST_RATE_LIMITS } from './control-plane';
import { Bench, Figure, figure, note, percentile } from './figures';
import { McpLoad, ToolCall } from './mcp-load';
import { api, ownerTokenIn, publishServer, workspaceServer, WORKSPACE } from './pool-bench';
import { steadyTreeRssMb, treeCommands } from './process-tree';

/**
 * `sessions` (issue 32, "Memory per session"): what an MCP session to a stdio
 * server costs. The control plane runs as a process of its own (embedded
 * mode, instances under bubblewrap), so the resident memory of its process
 * tree is the control plane's and its instances' alone; the bench's SDK
 * clients are in this process.
 *
 * - Shared mode: server-everything with `sessions: shared`; `echo` called
 *   one at a time: after 1,000 calls to warm up, 1,000 calls with 10
 *   sessions open (each in turn), then two rounds of 1,000 with 1,000 open
 *   (one each) and 1,000 with 10 again. The tree's memory with 10 and with
 *   1,000 open.
 * - Per-session mode: server-memory as the issue measured it, 20 sessions,
 *   one call each; the tree's memory over the same tree before them.
 */
const NAME = 'sessions';
const OPEN = 1_000;
const FEW = 10;
const CALLS = 1_000;
/** rounds of a thousand open sessions, each followed by ten again */
const ROUNDS = 2;
/** sessions opened at once while the thousand are set up */
const OPENING = 8;
const PER_SESSION = 20;
/** issue 32's budget for a workspace's thousand sessions on one shared server, control plane included */
const BUDGET_MB = 1_536;
/** what a per-session stdio session cost when issue 32 was written (`npx -y` server-memory, an `npm exec` per child) */
const BEFORE_MB = 148;

const EVERYTHING = {
  transport: 'stdio',
  command: 'node',
  args: [resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'],
  sessions: 'shared',
};
const ECHO: ToolCall = { name: 'echo', arguments: { message: 'bench' }, expected: 'Echo: bench' };
const MEMORY = {
  transport: 'stdio',
  command: 'node',
  args: [resolve('node_modules/@modelcontextprotocol/server-memory/dist/index.js')],
  env: { MEMORY_FILE_PATH: '/home/mcp/memory.jsonl' },
};
const READ_GRAPH: ToolCall = { name: 'read_graph', arguments: {} };

interface Target {
  url: string;
  headers: Record<string, string>;
}

/** `keys` sessions of `target`, OPENING at a time, each checked to list the tool. */
async function openSessions(load: McpLoad, target: Target, call: ToolCall, keys: string[]): Promise<void> {
  for (let first = 0; first < keys.length; first += OPENING)
    await Promise.all(
      keys.slice(first, first + OPENING).map((key) => load.connect({ ...target, key, clients: 1, call })),
    );
}

async function closeSessions(load: McpLoad, keys: string[]): Promise<void> {
  for (let first = 0; first < keys.length; first += OPENING)
    await Promise.all(keys.slice(first, first + OPENING).map((key) => load.disconnect(key)));
}

/** `calls` sequential calls spread over the sessions of `keys`, each in turn, after one call each to warm up. */
async function sequentialCalls(load: McpLoad, keys: string[], calls: number): Promise<number[]> {
  await load.latency(keys, 1, 1);
  const samples = await load.latency(keys, Math.ceil(calls / keys.length), 1);
  return keys.flatMap((key) => samples[key]!);
}

function summary(samples: number[]): string {
  return `p50 ${percentile(samples, 50).toFixed(2)} ms, p99 ${percentile(samples, 99).toFixed(2)} ms (${samples.length} calls)`;
}

async function run(): Promise<Figure[]> {
  requireBuild();
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  const cp = await startControlPlaneProcess(dataDir, await freePort(), LOAD_TEST_RATE_LIMITS);
  const pid = cp.child.pid!;
  const load = new McpLoad();
  try {
    const owner = ownerTokenIn(dataDir);
    note(`  control plane (embedded mode, pid ${pid}) at ${cp.url}`);

    // ── shared mode ──
    await publishServer(cp.url, owner, 'everything', EVERYTHING);
    const shared = await workspaceServer(cp.url, owner, WORKSPACE, 'everything', ECHO);
    const target = {
      url: `${cp.url}/mcp/${WORKSPACE}/everything`,
      headers: { authorization: `Bearer ${shared.token}` },
    };
    const keys = Array.from({ length: OPEN }, (_, i) => `shared-${i}`);
    const few = keys.slice(0, FEW);
    const more = keys.slice(FEW);
    await openSessions(load, target, ECHO, few);
    // the first calls of a process pay for its JIT, its connections and its database's caches: not counted
    await sequentialCalls(load, few, CALLS);
    const atFew = await sequentialCalls(load, few, CALLS);
    const rssFew = await steadyTreeRssMb(pid);
    note(`  ${FEW} open shared sessions: ${summary(atFew)}; tree ${rssFew.toFixed(0)} MB`);
    // a thousand and ten in turn, so that the machine's drift lands on both
    const atMany: number[] = [];
    let rssMany = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      let started = Date.now();
      await openSessions(load, target, ECHO, more);
      note(`  round ${round}: ${more.length} more sessions opened in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      const samples = await sequentialCalls(load, keys, CALLS);
      atMany.push(...samples);
      const rss = await steadyTreeRssMb(pid);
      rssMany = Math.max(rssMany, rss);
      const instances = (
        (await api(cp.url, owner, 'GET', `/v1/workspaces/${WORKSPACE}/pool/instances`)) as {
          items: { server: string; sessions: number }[];
        }
      ).items.filter((i) => i.server === 'everything');
      // the server's own processes, not bwrap's and the spawner's, whose command lines name it too
      const servers = treeCommands(pid).filter((line) => line.split(' ')[1] === EVERYTHING.args[0]).length;
      note(
        `  round ${round}: ${OPEN} open shared sessions: ${summary(samples)}; tree ${rss.toFixed(0)} MB, ` +
          `${(((rss - rssFew) * 1024) / more.length).toFixed(0)} KB a session more than with ${FEW}; ` +
          `instances ${JSON.stringify(instances.map((i) => i.sessions))} (sessions each), ${servers} server-everything process(es)`,
      );
      // the same ten as at ten, with a thousand open: what the open sessions cost apart from a cold one for each call
      const onFew = await sequentialCalls(load, few, CALLS);
      note(`  round ${round}: ${OPEN} open, the calls on the first ${FEW} in turn: ${summary(onFew)}`);
      if (instances.length !== 1 || instances[0]!.sessions !== OPEN || servers !== 1)
        throw new Error(
          `expected one server process serving ${OPEN} sessions, the pool says ${JSON.stringify(instances)} and runs ${servers}`,
        );
      started = Date.now();
      await closeSessions(load, more);
      note(`  round ${round}: ${more.length} sessions closed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      const again = await sequentialCalls(load, few, CALLS);
      atFew.push(...again);
      note(`  round ${round}: ${FEW} open shared sessions again: ${summary(again)}`);
    }
    await closeSessions(load, few);

    // ── per-session mode ──
    await publishServer(cp.url, owner, 'memory', MEMORY);
    const perSession = await workspaceServer(cp.url, owner, WORKSPACE, 'memory', READ_GRAPH);
    const memoryTarget = {
      url: `${cp.url}/mcp/${WORKSPACE}/memory`,
      headers: { authorization: `Bearer ${perSession.token}` },
      key: 'per-session',
      call: READ_GRAPH,
    };
    // the instance's start (its sandbox and spawner) is not a session's: one session brings it up first
    await load.connect({ ...memoryTarget, key: 'per-session-first', clients: 1 });
    await load.each('per-session-first');
    const rssBefore = await steadyTreeRssMb(pid);
    await load.connect({ ...memoryTarget, clients: PER_SESSION });
    await load.each('per-session');
    const rssAfter = await steadyTreeRssMb(pid);
    const perSessionMb = (rssAfter - rssBefore) / PER_SESSION;
    note(
      `  per-session mode, server-memory: ${PER_SESSION} sessions, one read_graph each: ${(rssAfter - rssBefore).toFixed(0)} MB ` +
        `over the tree before them (${rssBefore.toFixed(0)} MB), ${perSessionMb.toFixed(1)} MB a session`,
    );

    return [
      figure({
        bench: NAME,
        figure: `resident memory of the control plane and its instances (process tree, embedded mode) with ${OPEN} open MCP sessions on one shared-mode stdio server (server-everything) in one workspace`,
        value: rssMany,
        baseline: { what: "issue 32's budget (1.5 GiB)", value: BUDGET_MB, unit: 'MB' },
        goal: 1,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: `p99 of a sequential tools/call (echo) through the pool with ${OPEN} open shared-mode sessions, one call on each, ${ROUNDS} rounds`,
        value: percentile(atMany, 99),
        baseline: {
          what: `the same with ${FEW} open, each in turn, before the first round and after each (${atFew.length} calls)`,
          value: percentile(atFew, 99),
          unit: 'ms',
        },
        goal: 1.5,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: `per-session mode: resident memory per MCP session (server-memory, ${PER_SESSION} sessions, one call each, over the tree before them)`,
        value: perSessionMb,
        baseline: {
          what: "issue 32's measure before (npx -y server-memory, an npm exec per session)",
          value: BEFORE_MB,
          unit: 'MB',
        },
        goal: 0.5,
        better: 'lower',
      }),
    ];
  } finally {
    await load.close().catch(() => undefined);
    await stopProcess(cp.child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const sessionsBench: Bench = {
  name: NAME,
  summary: `${OPEN} MCP sessions on one shared-mode stdio server: memory of the control plane and instances, p99 of tools/call at ${OPEN} vs ${FEW}; per-session mode's memory per session`,
  run,
};
