import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { isolationArgs } from '../libs/platform/bubblewrap/src';
import { SandboxesService } from '../libs/sandboxes/src';
import { LOAD_TEST_RATE_LIMITS, startBenchControlPlane } from './control-plane';
import { Bench, Figure, figure, note, percentile } from './figures';
import { api } from './pool-bench';
import { AGENTS_ROLE, type ClientAnswer, type ClientCommand } from './sandbox-agents';
import { WorkerClients } from './worker-rpc';

const NAME = 'sandbox';
const WORKSPACE = 'default';
const SAMPLES = 200;
const WARMUP = 20;
const BLOCK = 20;
const CREATES = 20;
/**
 * The pause between an answer and an agent's next call (a model reads the
 * answer first: seconds, in practice). At 50 ms the snapshot's event was
 * still being handed on when the next write came, and showed in it
 * (on vs off 1.21-1.28 then, 1.12 at 250 ms).
 */
const THINK_MS = 200;

type Agents = WorkerClients<ClientCommand, ClientAnswer>;

async function connect(agents: Agents, url: string, token: string): Promise<number> {
  return (await agents.send<{ client: number }>({ type: 'connect', url, token })).client;
}

/** A tool call of one of the worker's clients, timed by the worker; `after` runs untimed (an agent's pause before its next call). */
function call(
  agents: Agents,
  client: number,
  name: string,
  args: Record<string, unknown>,
  options: { big?: boolean; after?: () => Promise<void> } = {},
): () => Promise<number> {
  return async () => {
    const { ms } = await agents.send<{ ms: number }>({
      type: 'call',
      client,
      name,
      arguments: args,
      ...(options.big ? { big: true } : {}),
    });
    await options.after?.();
    return ms;
  };
}

/** Something of this thread's, timed from its start to its end. */
function timed(run: () => Promise<void>): () => Promise<number> {
  return async () => {
    const started = performance.now();
    await run();
    return performance.now() - started;
  };
}

/** Milliseconds per call, alternating between targets in blocks so the machine's moods hit both alike. */
async function alternate(
  targets: Record<string, () => Promise<number>>,
  samples: number,
): Promise<Record<string, number[]>> {
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(targets).map((k) => [k, []]));
  for (const run of Object.values(targets)) for (let i = 0; i < WARMUP; i++) await run();
  for (let done = 0; done < samples; done += BLOCK) {
    for (const [key, run] of Object.entries(targets)) {
      for (let i = 0; i < BLOCK; i++) times[key]!.push(await run());
    }
  }
  return times;
}

/** A bubblewrap sandbox with the same system root as ours, running `true`: what any sandboxed command costs at least. */
function bareBwrapTrue(): Promise<void> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(
      '/usr/bin/bwrap',
      [...isolationArgs({ network: false, user: {}, env: {}, proc: true }), '/bin/true'],
      { stdio: 'ignore' },
    );
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolveRun() : reject(new Error(`bwrap true exited ${code}`))));
  });
}

/** A stdio server of the catalog, assigned to the workspace, and a client of it through the pool. */
async function poolServer(agents: Agents, side: Side, name: string, args: string[]): Promise<number> {
  await api(side.controlPlane.url, side.token, 'POST', '/v1/catalog/servers', {
    name,
    version: '1.0.0',
    mode: 'remote',
    transport: 'stdio',
    command: 'node',
    args,
  });
  await api(side.controlPlane.url, side.token, 'PUT', `/v1/workspaces/${WORKSPACE}/servers/${name}`, {
    version: '1.0.0',
  });
  return connect(agents, `${side.controlPlane.url}/mcp/${WORKSPACE}/${name}`, side.token);
}

interface Side {
  controlPlane: ControlPlane;
  token: string;
  /** the worker's client of /mcp/{ws}/sandbox */
  sandbox: number;
}

async function side(agents: Agents, dataDir: string, env: Record<string, string>): Promise<Side> {
  // the creates below are one workspace's
  const controlPlane = await startBenchControlPlane(dataDir, {
    ...LOAD_TEST_RATE_LIMITS,
    AILERON_SANDBOX_MAX_PER_WORKSPACE: String(CREATES + 1),
    ...env,
  });
  const token = readFileSync(join(controlPlane.config.dataDir, 'admin-token'), 'utf8').trim();
  await api(controlPlane.url, token, 'PUT', `/v1/workspaces/${WORKSPACE}/policy`, { default: 'allow', rules: [] });
  await api(controlPlane.url, token, 'POST', `/v1/workspaces/${WORKSPACE}/sandboxes`, { name: 'bench' });
  return { controlPlane, token, sandbox: await connect(agents, `${controlPlane.url}/mcp/${WORKSPACE}/sandbox`, token) };
}

/**
 * `sandbox`: what an agent feels of the sandbox tools.
 * - `write` with snapshots on vs off. Each write is timed from the call to
 *   its answer; the next starts once the previous snapshot is committed, as
 *   an agent's next call comes after its model has read the answer. The tool
 *   answers before its snapshot, so the commit must not show here.
 * - `bash "true"` through MCP vs a bare `bwrap … true` spawn: the MCP round
 *   trip, the shell rules' check and the runner against a sandbox of its own.
 * - `read` of a 1 MiB file through MCP vs the pool's `tools/call` of a
 *   trivial tool (server-everything's echo), and vs a pool server's tool
 *   answering the same 1 MiB from memory: the first is the issue's goal, the
 *   second what the sandbox adds to carrying those bytes through MCP at all.
 * - sandbox create p50, printed.
 *
 * The clients run in a worker thread (sandbox-agents.ts), the control planes
 * and the bare bwrap spawns in the main thread.
 */
async function run(): Promise<Figure[]> {
  const dirs = [
    mkdtempSync(join(tmpdir(), 'aileron-bench-sandbox-on-')),
    mkdtempSync(join(tmpdir(), 'aileron-bench-sandbox-off-')),
  ];
  const agents: Agents = new WorkerClients(resolve(__dirname, 'sandbox-agents.js'), AGENTS_ROLE);
  const on = await side(agents, dirs[0]!, {});
  const off = await side(agents, dirs[1]!, { AILERON_SANDBOX_SNAPSHOTS: 'off' });
  try {
    // an agent's next call comes after its model has read the answer: the snapshot, and the events it sends, are done by then
    const settle = async (s: Side) => {
      await s.controlPlane.app.get(SandboxesService).settledAll();
      await new Promise((r) => setTimeout(r, THINK_MS));
    };
    let n = 0;
    const write = (target: Side) => () =>
      call(
        agents,
        target.sandbox,
        'write',
        { sandbox: 'bench', path: `notes/${n % 50}.txt`, content: `change ${n++}\n` },
        { after: () => settle(target) },
      )();
    note('  write: snapshots on vs off');
    const writes = await alternate({ on: write(on), off: write(off) }, SAMPLES);

    note('  bash "true" vs bare bwrap true');
    const bash = await alternate(
      {
        mcp: call(agents, off.sandbox, 'bash', { sandbox: 'bench', command: 'true' }, { after: () => settle(off) }),
        bare: timed(bareBwrapTrue),
      },
      SAMPLES,
    );

    note("  read 1 MiB vs the pool's trivial tools/call, and vs the same bytes answered by a pool server from memory");
    // 1 MiB of text lines, the same as BIG_TEXT; made by bash, since a write carrying it would exceed the request body limit
    await call(agents, off.sandbox, 'bash', {
      sandbox: 'bench',
      command: 'yes "$(printf %01023d 0)" | head -n 1024 > big.txt',
    })();
    const everything = resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js');
    const pool = await poolServer(agents, off, 'everything', [everything, 'stdio']);
    const bigAnswer = await poolServer(agents, off, 'big-answer', [resolve(__dirname, 'big-answer-server.js')]);
    const reads = await alternate(
      {
        read: call(agents, off.sandbox, 'read', { sandbox: 'bench', path: 'big.txt' }, { big: true }),
        trivial: call(agents, pool, 'echo', { message: 'hi' }),
        memory: call(agents, bigAnswer, 'big', {}, { big: true }),
      },
      SAMPLES,
    );

    note('  sandbox create');
    const creates: number[] = [];
    for (let i = 0; i < CREATES; i++) {
      const started = performance.now();
      await api(off.controlPlane.url, off.token, 'POST', `/v1/workspaces/${WORKSPACE}/sandboxes`, {
        name: `made-${i}`,
      });
      creates.push(performance.now() - started);
    }
    const createP50 = percentile(creates, 50);

    return [
      figure({
        bench: NAME,
        figure: 'p50 write, snapshots on vs off (ms, call to answer)',
        value: percentile(writes.on!, 50),
        baseline: { what: 'snapshots off', value: percentile(writes.off!, 50), unit: 'ms' },
        goal: 1.3,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: 'p50 bash "true" through MCP vs bare bwrap true (ms)',
        value: percentile(bash.mcp!, 50),
        baseline: { what: 'bwrap … /bin/true spawned', value: percentile(bash.bare!, 50), unit: 'ms' },
        goal: 2.0,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: "p50 read of a 1 MiB file through MCP vs the pool's trivial tools/call (ms)",
        value: percentile(reads.read!, 50),
        baseline: {
          what: 'server-everything echo through the pool',
          value: percentile(reads.trivial!, 50),
          unit: 'ms',
        },
        goal: 1.5,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure: 'p50 read of a 1 MiB file through MCP vs a pool server answering the same 1 MiB from memory (ms)',
        value: percentile(reads.read!, 50),
        baseline: {
          what: "a stdio SDK server's tool returning the text through the pool",
          value: percentile(reads.memory!, 50),
          unit: 'ms',
        },
        goal: 1.0,
        better: 'lower',
      }),
      // printed, not compared: a ratio to itself, always within its goal
      figure({
        bench: NAME,
        figure: `p50 sandbox create (ms; ${CREATES} creates)`,
        value: createP50,
        baseline: { what: 'itself (printed)', value: createP50, unit: 'ms' },
        goal: 1,
        better: 'lower',
      }),
    ];
  } finally {
    await agents.close({ type: 'close' });
    await on.controlPlane.close();
    await off.controlPlane.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

export const sandboxBench: Bench = {
  name: NAME,
  summary:
    'sandbox tools: write with snapshots on vs off, bash "true" vs bare bwrap, read 1 MiB vs a trivial pool call and vs the same bytes from a pool server',
  run,
};
