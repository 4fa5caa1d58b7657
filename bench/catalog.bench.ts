import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { startBenchControlPlane } from './control-plane';
import { Bench, Figure, figure, median, note } from './figures';

const NAME = 'catalog';
const CONNECTIONS = 10;
const WARMUP_SECONDS = 2;
/**
 * A/B then B/A and so on, in short rounds: on a shared virtual machine the
 * speed the host gives us swings by a fifth within seconds, and many short
 * rounds spread that over both sides where a few long ones let it land on one.
 */
const SECONDS = 1;
const ROUNDS = 30;

interface Target {
  label: string;
  url: string;
  headers: Record<string, string>;
  /** the only status that counts as an answer */
  status: number;
}

interface Measured {
  answered: number;
  seconds: number;
}

/**
 * autocannon runs in a worker thread: on the server's own event loop the load
 * generator would take a share of every request's time and hide the very cost
 * being compared.
 */
async function load(target: Target, seconds: number): Promise<Measured> {
  const result = await autocannon({
    url: target.url,
    headers: target.headers,
    connections: CONNECTIONS,
    duration: seconds,
    workers: 1,
  });
  const answered = result.statusCodeStats?.[`${target.status}`]?.count ?? 0;
  const other = Object.entries(result.statusCodeStats ?? {})
    .filter(([code]) => code !== `${target.status}`)
    .map(([code, stats]) => `${code}×${stats.count ?? 0}`);
  if (other.length > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `${target.label}: expected only ${target.status}, got ${[...other, `errors×${result.errors}`, `timeouts×${result.timeouts}`].join(', ')}`,
    );
  }
  if (answered === 0) throw new Error(`${target.label}: no ${target.status} answers in ${seconds} s`);
  return { answered, seconds: result.duration };
}

async function call(
  base: string,
  method: string,
  path: string,
  token: string | null,
  body?: unknown,
): Promise<Response> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function json<T>(response: Response, what: string): Promise<T> {
  const text = await response.text();
  if (!response.ok) throw new Error(`${what}: HTTP ${response.status}: ${text.slice(0, 500)}`);
  return (text === '' ? undefined : JSON.parse(text)) as T;
}

/** A gateway enrolled in `workspace` as its admin would: an enrolment code, then the gateway's enrolment; its token. */
export async function enrol(base: string, owner: string, workspace: string, name: string): Promise<string> {
  const { code } = await json<{ code: string }>(
    await call(base, 'POST', `/v1/workspaces/${workspace}/enrollment-codes`, owner, {}),
    'enrolment code',
  );
  const { token } = await json<{ token: string }>(
    await call(base, 'POST', '/v1/gateway/enroll', null, { enrollment_code: code, name }),
    'enrolment',
  );
  return token;
}

/** An enrolled gateway whose workspace has one server, and the ETag of its catalog. */
export async function enrolGateway(controlPlane: ControlPlane): Promise<{ token: string; etag: string }> {
  const base = controlPlane.url;
  const owner = readFileSync(join(controlPlane.config.dataDir, 'admin-token'), 'utf8').trim();
  const token = await enrol(base, owner, 'default', 'bench-gateway');
  await json(
    await call(base, 'POST', '/v1/catalog/servers', owner, {
      name: 'memory',
      version: '1.0.0',
      mode: 'remote',
      transport: 'stdio',
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-memory'],
    }),
    'publish catalog server',
  );
  await json(
    await call(base, 'PUT', '/v1/workspaces/default/servers/memory', owner, { version: '1.0.0' }),
    'assign server',
  );

  const first = await call(base, 'GET', '/v1/gateway/catalog', token);
  const catalog = await json<{ servers: unknown[] }>(first, 'catalog');
  const etag = first.headers.get('etag');
  if (!etag) throw new Error('GET /v1/gateway/catalog sent no ETag');
  if (catalog.servers.length === 0) throw new Error('the catalog is empty after assigning a server');

  const conditional = await fetch(`${base}/v1/gateway/catalog`, {
    headers: { authorization: `Bearer ${token}`, 'if-none-match': etag },
  });
  await conditional.arrayBuffer();
  if (conditional.status !== 304)
    throw new Error(`GET /v1/gateway/catalog with If-None-Match answered ${conditional.status}, not 304`);
  return { token, etag };
}

async function run(): Promise<Figure[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-'));
  let controlPlane: ControlPlane | undefined;
  const bare = Fastify();
  try {
    controlPlane = await startBenchControlPlane(dataDir);
    const { token, etag } = await enrolGateway(controlPlane);

    bare.get('/hello', async () => ({ hello: 'world' }));
    const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });

    const subject: Target = {
      label: 'GET /v1/gateway/catalog (304)',
      url: `${controlPlane.url}/v1/gateway/catalog`,
      headers: { authorization: `Bearer ${token}`, 'if-none-match': etag },
      status: 304,
    };
    const baseline: Target = { label: 'bare Fastify GET /hello', url: `${bareUrl}/hello`, headers: {}, status: 200 };

    await load(subject, WARMUP_SECONDS);
    await load(baseline, WARMUP_SECONDS);

    const totals = { subject: { answered: 0, seconds: 0 }, baseline: { answered: 0, seconds: 0 } };
    const ratios: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? (['subject', 'baseline'] as const) : (['baseline', 'subject'] as const);
      const rates = { subject: 0, baseline: 0 };
      for (const which of order) {
        const measured = await load(which === 'subject' ? subject : baseline, SECONDS);
        totals[which].answered += measured.answered;
        totals[which].seconds += measured.seconds;
        rates[which] = measured.answered / measured.seconds;
      }
      ratios.push(rates.subject / rates.baseline);
      note(
        `  round ${r + 1}/${ROUNDS}: 304 path ${rates.subject.toFixed(0)} req/s, bare Fastify ${rates.baseline.toFixed(0)} req/s, ratio ${(rates.subject / rates.baseline).toFixed(3)}`,
      );
    }
    const subjectRate = totals.subject.answered / totals.subject.seconds;
    const baselineRate = totals.baseline.answered / totals.baseline.seconds;
    note(`  median per-round ratio ${median(ratios).toFixed(3)}; the figure uses the totals`);

    return [
      figure({
        bench: NAME,
        figure: 'requests/s of GET /v1/gateway/catalog 304 vs bare Fastify hello-world',
        value: subjectRate,
        baseline: {
          what: `bare Fastify GET /hello in the same process, autocannon ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${SECONDS} s each`,
          value: baselineRate,
          unit: 'req/s',
        },
        goal: 1.0,
        better: 'higher',
      }),
    ];
  } finally {
    await bare.close().catch(() => undefined);
    await controlPlane?.close().catch((error: unknown) => note(`  control plane close failed: ${String(error)}`));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const catalogBench: Bench = {
  name: NAME,
  summary: "gateway API: requests/s of the catalog's 304 answer against a bare Fastify hello-world",
  run,
};
