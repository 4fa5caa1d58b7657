// before any module with Nest decorators loads, or their DI metadata is lost
import 'reflect-metadata';
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { note } from './figures';
import { McpLoad } from './mcp-load';
import { poolServer, startPoolBenchControlPlane, WORKSPACE } from './pool-bench';
import { processTree, treeCommands, treeRssMb } from './process-tree';

/**
 * What an MCP session to a stdio server costs in memory, the way issue 32
 * measured it: 20 sessions on server-memory, one call each, and the resident
 * memory of the control plane's process tree (the control plane, the
 * instance's sandbox, bridge and children) over the same tree idle. Once as
 * a catalog entry runs it in practice, `npx -y @modelcontextprotocol/server-memory`
 * (the registry must be reachable), once as `node` and the copy in
 * node_modules, each on a control plane of its own.
 *
 *   npm run build && node dist/bench/session-memory.js [sessions [npx|node]]
 */
const SESSIONS = Number(process.argv[2] ?? 20);
const MEMORY_FILE = { MEMORY_FILE_PATH: '/home/mcp/memory.jsonl' };
const ENTRIES: Record<string, { command: string; args: string[] }> = {
  npx: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] },
  node: { command: 'node', args: [resolve('node_modules/@modelcontextprotocol/server-memory/dist/index.js')] },
};
const CALL = { name: 'read_graph', arguments: {} };

/** The tree's resident memory once it stops moving much: the median of a few looks, a garbage collection apart. */
async function steadyRssMb(): Promise<number> {
  const looks: number[] = [];
  for (let i = 0; i < 5; i++) {
    await new Promise((wait) => setTimeout(wait, 200));
    // the control plane's garbage is not what a session costs
    (globalThis as { gc?: () => void }).gc?.();
    looks.push(treeRssMb(process.pid));
  }
  return looks.sort((a, b) => a - b)[2]!;
}

async function measure(kind: string): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  const controlPlane = await startPoolBenchControlPlane(dataDir);
  const load = new McpLoad();
  try {
    const server = `memory-${kind}`;
    const { token } = await poolServer(
      controlPlane,
      { [server]: { transport: 'stdio', ...ENTRIES[kind]!, env: MEMORY_FILE } },
      CALL,
    );
    const target = {
      url: `${controlPlane.url}/mcp/${WORKSPACE}/${server}`,
      headers: { authorization: `Bearer ${token}` },
      call: CALL,
    };
    const idleProcesses = processTree(process.pid).length;
    const idle = await steadyRssMb();

    let started = performance.now();
    await load.connect({ ...target, key: 'first', clients: 1 });
    const first = performance.now() - started;
    started = performance.now();
    await load.connect({ ...target, key: 'others', clients: SESSIONS - 1 });
    const others = (performance.now() - started) / (SESSIONS - 1);
    await load.each('first');
    await load.each('others');

    const busy = await steadyRssMb();
    const processes = processTree(process.pid).length - idleProcesses;
    // below this process (whose arguments may say npx); bwrap's and the bridge's command lines name the catalog command
    const npm = treeCommands(process.pid)
      .slice(1)
      .filter((line) => /\bnpm\b|npx/.test(line) && !line.includes('bwrap') && !line.includes('main.js'));
    const line =
      `${kind}: ${SESSIONS} sessions, one ${CALL.name} each: ${(busy - idle).toFixed(0)} MB over the idle tree (${idle.toFixed(0)} MB), ` +
      `${((busy - idle) / SESSIONS).toFixed(1)} MB a session; ${processes} processes more; ${npm.length} of them npm or npx; ` +
      `first session ${first.toFixed(0)} ms (the instance's start with it), each next one ${others.toFixed(0)} ms`;
    note(`  ${line}`);
    return line;
  } finally {
    await load.close().catch(() => undefined);
    await controlPlane.close().catch((error: unknown) => note(`  control plane close failed: ${String(error)}`));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Each kind in a process of its own: memory a control plane held is not given back to the system when it closes. */
async function main(kind: string | undefined): Promise<void> {
  if (kind) {
    process.stdout.write(`${await measure(kind)}\n`);
    return;
  }
  for (const each of Object.keys(ENTRIES)) {
    const child = fork(__filename, [String(SESSIONS), each], { stdio: 'inherit', execArgv: ['--expose-gc'] });
    const code = await new Promise<number | null>((exited) => child.once('exit', exited));
    if (code !== 0) throw new Error(`the measurement of ${each} failed (exit code ${code})`);
  }
}

main(process.argv[3]).then(
  () => process.exit(0),
  (error: unknown) => {
    note(`session-memory failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
