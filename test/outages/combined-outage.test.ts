import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalsService } from '../../libs/approvals/src';
import { aGateway, aWorkspace, uniqueSlug } from '../support/builders';
import {
  aReplicaOf,
  startOnOwnDatabase,
  TestControlPlane,
  TestResponse,
  withOwnerToken,
} from '../support/control-plane';
import { eventually } from '../support/eventually';
import { bounded, BOUND_MS, timed } from '../support/outage';
import { PostgresServer, RedisServer, startPostgres, startRedis } from '../support/services';
import { aReceiver, Receiver } from '../support/webhook-receiver';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { everyItem } from '../support/pages';

/** An approval long-poll re-reads PostgreSQL every 5 s (RECHECK_MS): a decision it was not woken for is seen by then. */
const RECHECK_MS = 5_000;
/** How long the test's clients long-poll: far longer than any answer the test expects, so an answer that came is one that was woken. */
const WAIT_SECONDS = 60;

interface Sample {
  phase: string;
  /** the phase when the answer came: a request asked just before an outage may meet it */
  answeredIn: string;
  what: string;
  ms: number;
  /** HTTP status, or 0 when the request threw */
  status: number;
  code?: string;
  retryAfter?: string | null;
  detail: string;
  /** when it was asked (performance.now()) */
  at: number;
}

interface Outage {
  name: string;
  away(): Promise<void>;
  back(): Promise<void>;
  /** PostgreSQL is what goes away (else Redis) */
  database: boolean;
}

const CALL = { server: 'deploy', tool: 'release', arguments: { service: 'payments' }, principal: 'alice@example.com' };

/**
 * PostgreSQL (stopped, killed) and Redis (stopped, killed) go away in turn
 * under two replicas sharing them, with a small steady load: REST writes on
 * both replicas, an MCP session making calls on A, a gateway long-polling an
 * approval on B while it is decided on A, and a webhook endpoint receiving an
 * event for every write, one delivery held in flight by the receiver while
 * the outage starts. Every answer comes within the bound and says what it is;
 * everything recovers without a restart; every acknowledged write is there
 * and its event reaches the receiver exactly once.
 * The figures it prints are the ones docs/operations.md quotes.
 */
describe('PostgreSQL and Redis going away under two replicas: approvals and webhooks too', { timeout: 300_000 }, () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let a: TestControlPlane;
  let b: TestControlPlane;
  let receiver: Receiver;
  let hook: string;
  let gateway: { token: string };
  let session: { client: Client };
  const samples: Sample[] = [];
  const acknowledged: string[] = [];
  /** the phase each acknowledged write was answered in: where a lost event went missing */
  const acknowledgedIn = new Map<string, string>();
  const figures: Record<string, Record<string, number | string>> = {};
  let phase = 'up';

  async function sample(what: string, run: () => Promise<TestResponse | boolean>): Promise<void> {
    let entry: Omit<Sample, 'answeredIn' | 'ms' | 'at'>;
    // the phase it was asked in
    const asked = phase;
    const at = performance.now();
    const { ms } = await timed(async () => {
      try {
        const result = await bounded(run());
        entry =
          typeof result === 'boolean'
            ? { phase: asked, what, status: result ? 200 : 0, detail: result ? '' : 'unexpected answer' }
            : {
                phase: asked,
                what,
                status: result.status,
                code: result.body?.code,
                retryAfter: result.headers.get('retry-after'),
                detail: result.status < 300 ? '' : result.text,
              };
      } catch (error) {
        entry = { phase: asked, what, status: 0, detail: String(error) };
      }
    });
    samples.push({ ...entry!, answeredIn: phase, ms, at });
  }

  /** REST writes on both replicas and MCP calls on A's session, ~6 a second each, until the returned function is called. */
  function steadyLoad(): () => Promise<void> {
    let running = true;
    const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 150));
    const loops = [
      (async () => {
        for (let i = 0; running; i++) {
          const slug = uniqueSlug('load');
          await sample('POST /v1/workspaces', async () => {
            const res = await (i % 2 ? b : a).request('POST', '/v1/workspaces', { body: { slug, name: slug } });
            if (res.status === 201) {
              acknowledged.push(slug);
              acknowledgedIn.set(slug, phase);
            }
            return res;
          });
          await pause();
        }
      })(),
      (async () => {
        for (let i = 0; running; i++) {
          await sample('MCP tools/call on A', async () =>
            textOf(await session.client.callTool({ name: 'echo', arguments: { message: `call ${i}` } })).includes(
              `call ${i}`,
            ),
          );
          await pause();
        }
      })(),
    ];
    return async () => {
      running = false;
      await Promise.all(loops);
    };
  }

  const approvalsOf = (replica: TestControlPlane): ApprovalsService => replica.cp.app.get(ApprovalsService);

  /** A gateway's long-poll on B, started: it answers when the request is decided, or when it cannot read it any more. */
  async function aLongPollOnB(id: string): Promise<{ answer: Promise<{ res: TestResponse; ms: number }> }> {
    const sleeping = approvalsOf(b).waiting.sleeping(id);
    const poll = timed(() =>
      b.request('GET', `/v1/approvals/${id}?wait=${WAIT_SECONDS}`, { token: gateway.token }),
    ).then(({ value, ms }) => ({ res: value, ms }));
    await eventually("B's long-poll to wait", () => approvalsOf(b).waiting.sleeping(id) > sleeping);
    // wrapped: an async function returning the promise itself would wait for it
    return { answer: poll };
  }

  const decideOnA = (id: string): Promise<TestResponse> =>
    a.request('POST', `/v1/approvals/${id}/approve`, { body: { reason: 'checked' } });

  /** The receiver's requests for one delivery. */
  const requestsFor = (delivery: string) =>
    receiver.requests.filter((r) => r.headers['x-aileron-delivery'] === delivery);

  /**
   * One outage under the load: a pending approval long-polled on B, a
   * delivery held in flight, then the dependency goes; the approval is decided
   * on A across it, the delivery released into it; then it comes back.
   */
  async function anOutage(outage: Outage): Promise<void> {
    const figure: Record<string, number | string> = {};
    figures[outage.name] = figure;
    const asked = await a.request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: { ...CALL, session: uniqueSlug('sess') },
    });
    expect(asked.status, asked.text).toBe(201);
    const poll = await aLongPollOnB(asked.body.id);

    // the next event the load's writes make is held at the receiver
    const held = receiver.holdNext();
    const inFlight = await bounded(held.arrived, 30_000, 'a delivery to hold');
    const delivery = String(inFlight.headers['x-aileron-delivery']);
    expect(JSON.parse(inFlight.raw)).toMatchObject({ type: 'workspace.created' });

    // named before it goes: what is asked while it goes meets the outage
    phase = outage.name;
    await outage.away();
    const downAt = performance.now();
    // the receiver answers the held delivery now: the replica sending it records the answer while the dependency is away
    held.release();
    try {
      if (outage.database) {
        // nobody can decide while the database is away: a clear refusal, at once
        const refused = await timed(() => decideOnA(asked.body.id));
        expect({ status: refused.value.status, code: refused.value.body?.code }, refused.value.text).toEqual({
          status: 503,
          code: 'DATABASE_UNAVAILABLE',
        });
        expect(Number(refused.value.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(refused.ms).toBeLessThan(BOUND_MS);
        figure.decisionRefusedMs = Math.round(refused.ms);
        // the long-poll's next read of the request finds the database away: it answers the same, instead of waiting on blind
        const answered = await bounded(poll.answer, RECHECK_MS + BOUND_MS + 5_000, "the long-poll's answer");
        expect({ status: answered.res.status, code: answered.res.body?.code }, answered.res.text).toEqual({
          status: 503,
          code: 'DATABASE_UNAVAILABLE',
        });
        expect(Number(answered.res.headers.get('retry-after'))).toBeGreaterThan(0);
        figure.longPoll503AfterOutageMs = Math.round(performance.now() - downAt);
      } else {
        // decided on A while Redis is away: A cannot tell B over the bus; B's long-poll sees it by reading PostgreSQL again
        const decided = await timed(() => decideOnA(asked.body.id));
        expect(decided.value.status, decided.value.text).toBe(200);
        expect(decided.value.body.status).toBe('approved');
        expect(decided.ms).toBeLessThan(BOUND_MS);
        figure.decisionMs = Math.round(decided.ms);
        const decidedAt = performance.now();
        const answered = await bounded(poll.answer, RECHECK_MS + BOUND_MS + 5_000, "the long-poll's answer");
        expect(answered.res.status, answered.res.text).toBe(200);
        // woken long before its 60 s were up: it answers with the decision
        expect(answered.res.body.status).toBe('approved');
        figure.longPollAnsweredAfterDecisionMs = Math.round(performance.now() - decidedAt);
      }
      // the load goes on meanwhile
      await eventually(
        'the load to meet the outage',
        () => samples.filter((s) => s.phase === phase && s.what === 'POST /v1/workspaces').length >= 3,
        { timeoutMs: 15_000 },
      );
    } finally {
      const upAt = performance.now();
      await outage.back();
      phase = `${outage.name}, back`;
      figure.outageMs = Math.round(upAt - downAt);
    }

    // the load's writes succeed again by themselves
    const backAt = performance.now();
    const firstWrite = await eventually(
      'a write to succeed again',
      () => samples.find((s) => s.phase === phase && s.what === 'POST /v1/workspaces' && s.status === 201),
      { timeoutMs: 30_000 },
    );
    figure.firstWriteAfterBackMs = Math.round(Math.max(0, firstWrite.at + firstWrite.ms - backAt));
    // ready again by itself, on both
    for (const replica of [a, b])
      await eventually(
        'ready again',
        async () => (await replica.request('GET', '/readyz', { token: null })).status === 200,
        { timeoutMs: 30_000, intervalMs: 100 },
      );
    if (outage.database) {
      // the client polls again, as Retry-After told it; the approver decides again once the database is back
      const again = await aLongPollOnB(asked.body.id);
      const decided = await eventually('a decision on A once PostgreSQL is back', async () => {
        const res = await decideOnA(asked.body.id);
        expect(res.status === 200 || res.body?.code === 'DATABASE_UNAVAILABLE', res.text).toBe(true);
        return res.status === 200 && res;
      });
      expect(decided.body.status).toBe('approved');
      const answered = await bounded(again.answer, BOUND_MS + RECHECK_MS, "the long-poll's answer");
      expect(answered.res.status, answered.res.text).toBe(200);
      expect(answered.res.body.status).toBe('approved');
    }

    // the held delivery is logged delivered once, and the receiver has it once: it was not sent again because its answer came during the outage
    const log = await eventually('the held delivery to be logged delivered', async () => {
      const [row] = await a.cp.database.client.$queryRaw<{ status: string; attempts: number; last_status: number }[]>`
        SELECT status, attempts, last_status FROM webhook_deliveries WHERE id = ${delivery}::uuid`;
      return row?.status === 'delivered' && row;
    });
    expect(log).toMatchObject({ attempts: 1, last_status: 204 });
    expect(requestsFor(delivery)).toHaveLength(1);
  }

  beforeAll(async () => {
    // durable: a write acknowledged before a SIGKILL must survive it, as it does in production
    [postgres, redis] = await Promise.all([startPostgres({ durable: true }), startRedis()]);
    // the webhook receiver listens on 127.0.0.1: server mode refuses loopback unless allowed
    const env = {
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      AILERON_QUEUE_PREFIX: uniqueSlug('combined'),
      UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32',
    };
    a = await startOnOwnDatabase(env);
    b = withOwnerToken(await aReplicaOf(a, env), a.ownerToken);
    const ws = (await aWorkspace(a, a.ownerToken)).slug;
    const policy = await a.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: {
        default: 'allow',
        rules: [{ id: 'releases-need-approval', effect: 'approval', servers: ['deploy'], tools: ['release'] }],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    gateway = await aGateway(a, a.ownerToken, ws);
    receiver = await aReceiver([]);
    const created = await a.request('POST', '/v1/webhooks', {
      body: { name: 'outage-receiver', url: receiver.url, events: ['workspace.created'] },
    });
    expect(created.status, created.text).toBe(201);
    hook = created.body.id;
    const server = await aRemoteServer(a, a.ownerToken, ws, SERVERS.everything);
    session = await connect(a, a.ownerToken, `/mcp/${ws}/${server}`);
  }, 180_000);

  afterAll(async () => {
    await session?.client.close().catch(() => undefined);
    await b?.close();
    await a?.close();
    await receiver?.close();
    redis?.stop();
    postgres?.stop();
  });

  it('answers within the bounds with the right codes, recovers without a restart, and delivers every event exactly once', async () => {
    const stop = steadyLoad();
    try {
      await eventually('the load to run', () => acknowledged.length > 2);
      await anOutage({
        name: 'PostgreSQL stopped',
        database: true,
        away: () => postgres.halt('fast'),
        back: () => postgres.resume(),
      });
      await anOutage({
        name: 'PostgreSQL killed',
        database: true,
        away: () => postgres.halt('kill'),
        back: () => postgres.resume(),
      });
      await anOutage({
        name: 'Redis stopped',
        database: false,
        away: async () => redis.pause(),
        back: async () => redis.resume(),
      });
      await anOutage({
        name: 'Redis killed',
        database: false,
        away: async () => redis.kill(),
        back: () => redis.restart(),
      });
      // a little load after the last return
      const before = acknowledged.length;
      await eventually('writes after the last outage', () => acknowledged.length > before + 2);
    } finally {
      await stop();
    }

    const byPhase: Record<string, Record<string, string | number>> = {};
    for (const s of samples) {
      const entry = (byPhase[`${s.phase}: ${s.what}`] ??= { n: 0, slowestMs: 0, answers: '' });
      entry.n = Number(entry.n) + 1;
      entry.slowestMs = Math.max(Number(entry.slowestMs), Math.round(s.ms));
      const answer = `${s.status}${s.code ? ` ${s.code}` : ''}`;
      if (!String(entry.answers).split(', ').includes(answer))
        entry.answers = [entry.answers, answer].filter(Boolean).join(', ');
    }
    console.log(`[combined outage] ${JSON.stringify({ figures, load: byPhase }, null, 1)}`);

    // within the bound, always; while PostgreSQL is away a write or call may be refused, clearly; otherwise everything works
    expect(samples.filter((s) => s.ms >= BOUND_MS).map((s) => `${s.phase}, ${s.what}: ${Math.round(s.ms)} ms`)).toEqual(
      [],
    );
    // (until the first success after PostgreSQL is back: the pool's first connections may still meet the old server's end)
    const recovered = (s: Sample): boolean =>
      samples.some((t) => t.phase === s.phase && t.what === s.what && t.status < 300 && t.at < s.at);
    const unexpected = samples.filter((s) => {
      if (s.status === 200 || s.status === 201) return false;
      const during = (phase: string) => phase === 'PostgreSQL stopped' || phase === 'PostgreSQL killed';
      const databaseAway =
        during(s.phase) || during(s.answeredIn) || (s.phase.startsWith('PostgreSQL') && !recovered(s));
      return !(databaseAway && s.status === 503 && s.code === 'DATABASE_UNAVAILABLE' && Number(s.retryAfter) > 0);
    });
    expect(unexpected.map((s) => `${s.phase}, ${s.what}: ${s.status} ${s.detail}`)).toEqual([]);

    // every acknowledged write is there
    const listed = new Set((await everyItem<{ slug: string }>(a, '/v1/workspaces')).map((w) => w.slug));
    expect(acknowledged.filter((slug) => !listed.has(slug))).toEqual([]);

    // every delivery is finished (nothing is left to send), and the receiver has each acknowledged write's event exactly once
    await eventually(
      'every delivery to be finished',
      async () => {
        const pending = await a.cp.database.client.$queryRaw<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ${hook}::uuid AND status <> 'delivered'`;
        return pending[0]!.n === 0;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    const events = receiver.requests.map((r) => ({
      delivery: String(r.headers['x-aileron-delivery']),
      ...(JSON.parse(r.raw) as { id: string; workspace: string }),
    }));
    const count = (list: string[]): Map<string, number> =>
      list.reduce((m, k) => m.set(k, (m.get(k) ?? 0) + 1), new Map<string, number>());
    const perWorkspace = count(events.map((e) => e.workspace));
    expect(
      acknowledged
        .filter((slug) => perWorkspace.get(slug) !== 1)
        .map((slug) => `${slug}: ${perWorkspace.get(slug) ?? 0} (acknowledged in "${acknowledgedIn.get(slug)}")`),
    ).toEqual([]);
    expect([...count(events.map((e) => e.id))].filter(([, n]) => n > 1)).toEqual([]);
    expect([...count(events.map((e) => e.delivery))].filter(([, n]) => n > 1)).toEqual([]);
  });
});
