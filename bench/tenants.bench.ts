import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CLI, requireBuild, startControlPlaneProcess, stopProcess } from '../test/support/control-plane-process';
import { freePort, startPostgres, startRedis, Service } from '../test/support/services';
import { COLLECTED } from './collect-garbage-on-signal';
import { enrol } from './catalog.bench';
import { LOAD_TEST_RATE_LIMITS } from './control-plane';
import { Bench, Figure, figure, note, percentile } from './figures';
import { McpLoad } from './mcp-load';
import { api, publishServer, workspaceServer } from './pool-bench';
import { processTree, steadyTreeRssMb, treeRssMb } from './process-tree';
import { CALL, startUpstream, TOOL_DELAY_MS } from './proxy.bench';
import { scratchDatabase } from './scratch-database';
import { copyOrganization, SeededTenant } from './tenant-seed';

/**
 * `tenants`: one installation serving many organisations (issue 32, "Many
 * tenants"). Two control planes in server mode (PostgreSQL and Redis, as
 * Aileron Cloud runs), each in a process of its own so that its memory is its
 * own: one with 10 workspaces in one organisation, one with 10,000 in 1,000.
 * Every workspace has the same policy, the same remote catalog server
 * assigned, a member's API token and an enrolled gateway.
 *
 * The same requests go to both, in rounds that alternate which goes first:
 * a policy decision (POST …/policy/evaluate), a gateway's catalog fetch
 * answered 304 and 200, and a proxied tools/call on an open MCP session. At
 * 10,000 each round takes the next thousand workspaces (one of each
 * organisation; a quarter of them for tools/call, each an MCP session of its
 * own), a hundred at a time warmed with one request each and then measured
 * with one request each; at 10, a thousand requests over its ten. So the
 * larger one answers for 10,000 workspaces' state in memory and in its
 * tables, and the figures ask whether a tenant pays for the others.
 */
const NAME = 'tenants';
const SERVER = 'lookup';
const PER_ORGANIZATION = 10;
const ORGANIZATIONS = 1_000;
/** measured requests of each kind per round and installation */
const CALLS = 1_000;
const ROUNDS = 6;
/** MCP sessions opened at once while a round's are set up */
const OPENING = 8;
/**
 * Workspaces warmed up and then measured together: each is measured seconds
 * after its warm-up, inside every cache's time to live (a gateway's
 * credentials are trusted 10 s). A tenant idle for longer is measured cold,
 * as one that polls less often always is, at any size.
 */
const CHUNK = 100;
/** the workspaces of the proxied calls per round (each an MCP session opened, warmed, called and closed) */
const PROXIED_WINDOW = 250;

type Kind = 'policy' | 'catalog-304' | 'catalog-200' | 'proxied';
const KINDS: Kind[] = ['policy', 'catalog-304', 'catalog-200', 'proxied'];

interface Tenant extends SeededTenant {
  /** the ETag of its gateway's catalog, once fetched */
  etag?: string;
}

interface Installation {
  label: string;
  process: ChildProcess;
  /** everything its process has printed */
  output(): string;
  url: string;
  agent: Agent;
  tenants: Tenant[];
  /** the workspaces a round measures */
  window(round: number): Tenant[];
  samples: Record<Kind, number[]>;
  /** resident memory of its process tree, MiB, at the moments named */
  rss: Record<string, number>;
  stop(): Promise<void>;
}

/**
 * Where the resident memory is, from the control plane's own /metrics: V8's heap in use and reserved, and the
 * memory outside it. A resident size far above the heap reserved is the C allocator's, not live objects.
 */
async function heapOf(url: string): Promise<string> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const mb = (name: string): string => {
    const line = text.split('\n').find((l) => l.startsWith(`aileron_${name} `));
    return line ? `${(Number(line.split(' ')[1]) / 1048576).toFixed(0)} MB` : '?';
  };
  return `V8 heap ${mb('nodejs_heap_size_used_bytes')} used of ${mb('nodejs_heap_size_total_bytes')}, external ${mb('nodejs_external_memory_bytes')}`;
}

function organizationName(n: number): { slug: string; name: string } {
  return { slug: `t${String(n).padStart(4, '0')}`, name: `Tenant ${n}` };
}

// ── requests, timed from the first byte out to the last byte in ──

interface Answer {
  status: number;
  body: string;
  etag: string | undefined;
  ms: number;
}

function timedRequest(
  installation: Installation,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, installation.url);
    const started = performance.now();
    const out = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: url.pathname,
        agent: installation.agent,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () =>
          resolve({
            status: answer.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            etag: answer.headers.etag,
            ms: performance.now() - started,
          }),
        );
        answer.on('error', reject);
      },
    );
    out.on('error', reject);
    out.end(body);
  });
}

const EVALUATED = JSON.stringify({
  server: SERVER,
  tool: CALL.name,
  arguments: CALL.arguments,
  execution_mode: 'remote',
});

/** One request of a REST kind for the tenant, checked: a refusal is fast and must never count. */
async function restRequest(
  installation: Installation,
  kind: Exclude<Kind, 'proxied'>,
  tenant: Tenant,
): Promise<number> {
  let answer: Answer;
  if (kind === 'policy') {
    answer = await timedRequest(
      installation,
      'POST',
      `/v1/workspaces/${tenant.workspace}/policy/evaluate`,
      { authorization: `Bearer ${tenant.apiToken}` },
      EVALUATED,
    );
    if (answer.status !== 200 || (JSON.parse(answer.body) as { decision: string }).decision !== 'allow')
      throw new Error(`${installation.label}: policy evaluate answered ${answer.status} ${answer.body.slice(0, 300)}`);
    return answer.ms;
  }
  const conditional = kind === 'catalog-304' && tenant.etag !== undefined;
  answer = await timedRequest(installation, 'GET', '/v1/gateway/catalog', {
    authorization: `Bearer ${tenant.gatewayToken}`,
    ...(conditional ? { 'if-none-match': tenant.etag! } : {}),
  });
  const expected = conditional ? 304 : 200;
  if (answer.status !== expected)
    throw new Error(
      `${installation.label}: the catalog answered ${answer.status}, not ${expected}: ${answer.body.slice(0, 300)}`,
    );
  if (!conditional) tenant.etag = answer.etag;
  return answer.ms;
}

/** One request of a REST kind per tenant to warm up, then `calls` spread over them, one after another. */
async function restPass(
  installation: Installation,
  kind: Exclude<Kind, 'proxied'>,
  tenants: Tenant[],
  calls: number,
): Promise<number[]> {
  const times: number[] = [];
  for (const tenant of tenants) await restRequest(installation, kind, tenant);
  for (let i = 0; i < calls; i++) times.push(await restRequest(installation, kind, tenants[i % tenants.length]!));
  return times;
}

/** The chunk's MCP sessions, one per workspace: opened, each warmed with a call, then `calls` calls spread over them. */
async function proxiedPass(
  load: McpLoad,
  installation: Installation,
  tenants: Tenant[],
  calls: number,
): Promise<number[]> {
  const keys = tenants.map((t) => `${installation.label}:${t.organization}:${t.workspace}`);
  for (let first = 0; first < tenants.length; first += OPENING)
    await Promise.all(
      tenants.slice(first, first + OPENING).map((tenant, i) =>
        load.connect({
          key: keys[first + i]!,
          url: `${installation.url}/mcp/${tenant.workspace}/${SERVER}`,
          headers: { authorization: `Bearer ${tenant.apiToken}` },
          clients: 1,
          call: CALL,
        }),
      ),
    );
  try {
    await load.latency(keys, 1, 1);
    // one call per session in each block, the blocks rotating which session starts
    const samples = await load.latency(keys, Math.ceil(calls / keys.length), 1);
    return keys.flatMap((key) => samples[key]!);
  } finally {
    for (let first = 0; first < keys.length; first += OPENING)
      await Promise.all(keys.slice(first, first + OPENING).map((key) => load.disconnect(key)));
  }
}

/**
 * `calls` requests over `window`, CHUNK workspaces at a time: `pass` warms
 * each chunk (one request per workspace) right before it measures it.
 */
async function measureWindow(
  window: Tenant[],
  calls: number,
  pass: (tenants: Tenant[], calls: number) => Promise<number[]>,
): Promise<number[]> {
  const samples: number[] = [];
  for (let first = 0; first < window.length; first += CHUNK) {
    const chunk = window.slice(first, first + CHUNK);
    samples.push(...(await pass(chunk, Math.round((calls * chunk.length) / window.length))));
  }
  return samples;
}

// ── the installations ──

const SERVER_ENV = {
  ...LOAD_TEST_RATE_LIMITS,
  AILERON_RUN_WORKERS: 'true',
  UPSTREAM_ALLOW_CIDRS: '127.0.0.0/8',
};

/** The first ten workspaces of organisation `t0000`, made through the API as an administrator would. */
async function madeThroughTheApi(
  url: string,
  operator: string,
  upstream: string,
): Promise<{ ownerToken: string; tenants: Tenant[] }> {
  const { slug, name } = organizationName(0);
  const created = (await api(url, operator, 'POST', '/v1/organizations', { slug, name })) as {
    owner_token: { token: string };
  };
  const owner = created.owner_token.token;
  await publishServer(url, owner, SERVER, { transport: 'streamable_http', url: upstream });
  const tenants: Tenant[] = [];
  for (let w = 0; w < PER_ORGANIZATION; w++) {
    const workspace = `w${w}`;
    await api(url, owner, 'POST', '/v1/workspaces', { slug: workspace, name: `Workspace ${w}` });
    const { token } = await workspaceServer(url, owner, workspace, SERVER, CALL);
    const gatewayToken = await enrol(url, owner, workspace, `gateway-${workspace}`);
    tenants.push({ organization: slug, workspace, apiToken: token, gatewayToken });
  }
  return { ownerToken: owner, tenants };
}

/**
 * What a person sees of a workspace through the API, with what must differ
 * between two copies (ids, slugs, times, token prefixes, ETags) blanked.
 */
async function apiView(url: string, owner: string, tenant: Tenant): Promise<string> {
  const views: unknown[] = [];
  // one after another, the credentials' own uses last: a use is written down (last_used_at, last_seen_at) as it happens
  for (const [token, path] of [
    [owner, `/v1/workspaces/${tenant.workspace}`],
    [owner, `/v1/workspaces/${tenant.workspace}/policy`],
    [owner, `/v1/workspaces/${tenant.workspace}/servers`],
    [owner, `/v1/workspaces/${tenant.workspace}/gateways`],
    [owner, '/v1/tokens'],
    [tenant.apiToken, '/v1/me'],
    [tenant.gatewayToken, '/v1/gateway/catalog'],
  ] as const)
    views.push(await api(url, token, 'GET', path));
  return JSON.stringify(views)
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<id>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/ail_(api|gw)_[A-Za-z0-9_-]+/g, 'ail_$1_<prefix>')
    .replaceAll(tenant.organization, '<organization>')
    .replace(/Tenant \d+/g, 'Tenant <n>');
}

/** A control plane of its own in server mode, on a scratch database, with nothing in it yet. */
async function startInstallation(
  label: string,
  services: { postgres: string; redis: string },
): Promise<Installation & { env: Record<string, string>; databaseUrl: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  const database = await scratchDatabase(services.postgres, `bench_tenants_${label}`);
  const env = {
    ...SERVER_ENV,
    // the resident memory compared is what is left after a full collection (collect-garbage-on-signal.ts)
    NODE_OPTIONS:
      `${process.env.NODE_OPTIONS ?? ''} --expose-gc --require ${join(__dirname, 'collect-garbage-on-signal.js')}`.trim(),
    DATABASE_URL: database.url,
    REDIS_URL: services.redis,
    AILERON_QUEUE_PREFIX: `bench-${label}`,
    AILERON_DATA_DIR: dataDir,
  };
  const cp = await startControlPlaneProcess(dataDir, await freePort(), env).catch(async (error: unknown) => {
    await database.drop().catch(() => undefined);
    throw error;
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return {
    label,
    env,
    databaseUrl: database.url,
    process: cp.child,
    output: cp.output,
    url: cp.url,
    agent,
    tenants: [],
    window: () => [],
    samples: { policy: [], 'catalog-304': [], 'catalog-200': [], proxied: [] },
    rss: {},
    async stop() {
      agent.destroy();
      await stopProcess(cp.child);
      await database.drop().catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A full garbage collection in the installation's process, done when the process says so (collect-garbage-on-signal.ts). */
async function collectGarbage(installation: Installation): Promise<void> {
  const said = (): number => installation.output().split(COLLECTED).length - 1;
  const before = said();
  installation.process.kill('SIGURG');
  // a bound that catches a process that never answers, not a speed
  const deadline = Date.now() + 60_000;
  while (said() === before) {
    if (Date.now() > deadline) throw new Error(`${installation.label}: no full garbage collection within 60 s`);
    await new Promise((wait) => setTimeout(wait, 100));
  }
}

/** `organizations` organisations of PER_ORGANIZATION workspaces: the first through the API, the others copied from it. */
async function populate(
  installation: Installation & { env: Record<string, string>; databaseUrl: string },
  organizations: number,
  upstream: string,
): Promise<void> {
  const { label, url } = installation;
  const started = Date.now();
  // server mode's first organisation, as an operator makes it: the platform operator's, outside the measured tenants
  const operator = execFileSync(process.execPath, [CLI, 'bootstrap', '--org', 'operator'], {
    env: { ...process.env, ...installation.env },
    encoding: 'utf8',
    // stdout is the token; stderr tells a person to store it
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
  const made = await madeThroughTheApi(url, operator, upstream);
  installation.tenants.push(...made.tenants);
  if (organizations > 1) {
    const seeding = Date.now();
    const copies = await copyOrganization(installation.databaseUrl, organizationName(0).slug, organizations - 1, (n) =>
      organizationName(n + 1),
    );
    installation.tenants.push(...copies.flatMap((o) => o.tenants));
    // a copy must read back through the API as the organisation the API made
    const [template, copy] = [made.tenants[3]!, copies.at(-1)!.tenants[3]!];
    const [expected, seen] = await Promise.all([
      apiView(url, made.ownerToken, template),
      apiView(url, copies.at(-1)!.ownerToken, copy),
    ]);
    if (seen !== expected)
      throw new Error(`a copied workspace reads back unlike the one the API made:\n${seen}\nvs\n${expected}`);
    note(
      `  ${label}: ${organizations - 1} organisations copied from ${organizationName(0).slug} in ${((Date.now() - seeding) / 1000).toFixed(1)} s; ` +
        `${copy.organization}/${copy.workspace} reads back through the API as ${template.organization}/${template.workspace} does`,
    );
  }
  installation.window =
    organizations === 1
      ? () => installation.tenants
      : (round) => installation.tenants.filter((t) => t.workspace === `w${round % PER_ORGANIZATION}`);
  installation.rss.populated = treeRssMb(installation.process.pid!);
  note(
    `  ${label}: ${installation.tenants.length} workspaces in ${organizations} organisation(s) (and the operator's) in ${((Date.now() - started) / 1000).toFixed(1)} s, at ${url}`,
  );
}

// ── the idle embedded control plane, as `npm start` runs it ──

function rssOf(pid: number): { rss: number; anonymous: number } {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0);
  return { rss: kb('Rss') / 1024, anonymous: kb('Anonymous') / 1024 };
}

/** How long an embedded control plane is left alone after it says it listens, before its memory is read. */
const IDLE_SETTLE_MS = 20_000;

/**
 * `npm start` on a data folder its first start made (the case of every day
 * after the first), idle: the tree's resident memory and each process's.
 */
async function idleEmbedded(): Promise<{ tree: number; lines: string[] }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  const lines: string[] = [];
  try {
    const first = await startControlPlaneProcess(dataDir, await freePort(), { LOG_LEVEL: 'info' });
    await new Promise((wait) => setTimeout(wait, IDLE_SETTLE_MS));
    lines.push(
      `first start (node alone, a fresh data folder): ${(await steadyTreeRssMb(first.child.pid!)).toFixed(0)} MB`,
    );
    await stopProcess(first.child);

    const port = await freePort();
    const child = spawn('npm', ['start'], {
      env: { ...process.env, AILERON_DATA_DIR: dataDir, PORT: String(port), DATABASE_URL: '', REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    try {
      // npm start builds first: minutes on a loaded machine; a bound for a hang
      const deadline = Date.now() + 600_000;
      while (!output.includes('listening on')) {
        if (child.exitCode !== null) throw new Error(`npm start exited ${child.exitCode}: ${output.slice(-2000)}`);
        if (Date.now() > deadline) throw new Error(`npm start did not listen: ${output.slice(-2000)}`);
        await new Promise((wait) => setTimeout(wait, 250));
      }
      await new Promise((wait) => setTimeout(wait, IDLE_SETTLE_MS));
      const tree = await steadyTreeRssMb(child.pid!);
      for (const pid of processTree(child.pid!)) {
        const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
        const { rss, anonymous } = rssOf(pid);
        lines.push(`${command.slice(0, 60)}: ${rss.toFixed(0)} MB (${anonymous.toFixed(0)} MB anonymous)`);
      }
      return { tree, lines };
    } finally {
      // the tree's processes, deepest first: npm does not always pass a signal on
      for (const pid of processTree(child.pid!).reverse()) {
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          // gone already
        }
      }
      await new Promise((exited) => (child.exitCode === null ? child.once('exit', exited) : exited(undefined)));
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// ── the bench ──

function describe(kind: Kind): string {
  switch (kind) {
    case 'policy':
      return 'a policy decision (POST /v1/workspaces/{ws}/policy/evaluate, member token)';
    case 'catalog-304':
      return "a gateway's catalog fetch answered 304 (GET /v1/gateway/catalog, If-None-Match)";
    case 'catalog-200':
      return "a gateway's catalog fetch answered 200 (GET /v1/gateway/catalog)";
    case 'proxied':
      return `a proxied tools/call on an open MCP session (/mcp/{ws}/${SERVER}, a ${TOOL_DELAY_MS} ms tool upstream)`;
  }
}

async function run(): Promise<Figure[]> {
  requireBuild();
  const idle = await idleEmbedded();
  for (const line of idle.lines) note(`  idle embedded: ${line}`);

  let postgres: Service | undefined;
  let redis: Service | undefined;
  let upstream: { child: ChildProcess; url: string } | undefined;
  const installations: Installation[] = [];
  const load = new McpLoad();
  try {
    postgres = await startPostgres();
    redis = await startRedis();
    upstream = await startUpstream();
    const services = { postgres: postgres.url, redis: redis.url };
    const small = await startInstallation('small', services);
    installations.push(small);
    const large = await startInstallation('large', services);
    installations.push(large);
    await new Promise((wait) => setTimeout(wait, IDLE_SETTLE_MS));
    for (const installation of installations) installation.rss.idle = await steadyTreeRssMb(installation.process.pid!);
    await populate(small, 1, upstream.url);
    await populate(large, ORGANIZATIONS, upstream.url);

    // round 0 warms both up and is not counted: a process's first requests pay for its JIT, connections and pools
    for (let r = 0; r <= ROUNDS; r++) {
      const order = r % 2 === 0 ? [small, large] : [large, small];
      const took: Record<string, string[]> = {};
      for (const installation of order) {
        const window = installation.window(r);
        took[installation.label] = [];
        for (const kind of KINDS) {
          const started = performance.now();
          const samples =
            kind === 'proxied'
              ? await measureWindow(window.slice(0, PROXIED_WINDOW), CALLS, (chunk, calls) =>
                  proxiedPass(load, installation, chunk, calls),
                )
              : await measureWindow(window, CALLS, (chunk, calls) => restPass(installation, kind, chunk, calls));
          if (r > 0) installation.samples[kind].push(...samples);
          took[installation.label]!.push(
            `${kind} p50 ${percentile(samples, 50).toFixed(2)} p99 ${percentile(samples, 99).toFixed(2)} ms (${((performance.now() - started) / 1000).toFixed(0)} s)`,
          );
        }
      }
      note(`  round ${r}/${ROUNDS}${r === 0 ? ' (warm-up, not counted)' : ''}:`);
      for (const installation of installations)
        note(`    ${String(installation.tenants.length).padStart(5)}: ${took[installation.label]!.join(', ')}`);
    }
    // what stays once the work is done: a process whose load stopped gives its garbage back within seconds
    await new Promise((wait) => setTimeout(wait, IDLE_SETTLE_MS));
    const heaps: Record<string, string> = {};
    for (const installation of installations) {
      installation.rss['after the rounds'] = await steadyTreeRssMb(installation.process.pid!);
      heaps[installation.label] = await heapOf(installation.url);
      await collectGarbage(installation);
      installation.rss.measured = await steadyTreeRssMb(installation.process.pid!);
    }
    for (const installation of installations)
      note(
        `  ${installation.label} (${installation.tenants.length} workspaces): control plane RSS ` +
          Object.entries(installation.rss)
            .map(
              ([when, mb]) => `${when === 'measured' ? 'after a full garbage collection' : when} ${mb.toFixed(0)} MB`,
            )
            .join(', ') +
          `; before the collection ${heaps[installation.label]}, after it ${await heapOf(installation.url)}`,
      );

    const sizes = `${large.tenants.length} workspaces in ${ORGANIZATIONS} organisations`;
    const measured = `${ROUNDS} rounds after one to warm up, alternating which goes first, each ${CALLS} requests per kind and installation; at ${large.tenants.length} over a window of ${large.window(0).length} workspaces (one per organisation; ${PROXIED_WINDOW} of them for tools/call), a different one each round, ${CHUNK} at a time each warmed right before it is measured`;
    const p99Figure = (kind: Kind): Figure =>
      figure({
        bench: NAME,
        figure: `p99 of ${describe(kind)} with ${sizes} vs with ${small.tenants.length}`,
        value: percentile(large.samples[kind], 99),
        baseline: {
          what: `the same with ${small.tenants.length} workspaces in one organisation (server mode, PostgreSQL and Redis), ${measured}`,
          value: percentile(small.samples[kind], 99),
          unit: 'ms',
        },
        goal: 1.5,
        better: 'lower',
      });
    return [
      ...KINDS.map(p99Figure),
      figure({
        bench: NAME,
        figure: `resident memory of the control plane's process with ${sizes} vs with ${small.tenants.length}, after the same requests and a full garbage collection`,
        value: large.rss.measured!,
        baseline: {
          what: `the control plane with ${small.tenants.length} workspaces, server mode, after the rounds, ${IDLE_SETTLE_MS / 1000} s idle and a full garbage collection`,
          value: small.rss.measured!,
          unit: 'MB',
        },
        goal: 2,
        better: 'lower',
      }),
      figure({
        bench: NAME,
        figure:
          'resident memory of the idle `npm start` process tree (embedded mode, PGlite) vs the idle server-mode control plane',
        value: idle.tree,
        baseline: {
          what: `the control plane's process in server mode (PostgreSQL and Redis elsewhere), idle after start, ${IDLE_SETTLE_MS / 1000} s after`,
          value: small.rss.idle!,
          unit: 'MB',
        },
        goal: 2.5,
        better: 'lower',
      }),
    ];
  } finally {
    await load.close().catch(() => undefined);
    for (const installation of installations) await installation.stop().catch(() => undefined);
    upstream?.child.kill();
    redis?.stop();
    postgres?.stop();
  }
}

export const tenantsBench: Bench = {
  name: NAME,
  summary:
    'one installation, 10,000 workspaces in 1,000 organisations vs 10 (server mode): p99 of a policy decision, a catalog fetch (304, 200) and a proxied tools/call; the control plane RSS at both; the idle `npm start` RSS',
  run,
};
