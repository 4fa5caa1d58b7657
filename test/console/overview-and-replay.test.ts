import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, anOrganization, aToken, aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

/** The policy in force while the calls are made: what the recorded decisions came from. */
const IN_FORCE = {
  rules: [
    { id: 'allow-the-rest', effect: 'allow' },
    { id: 'no-sums', effect: 'deny', tools: ['get-sum'] },
    { id: 'no-prod-echo', effect: 'deny', tools: ['echo'], arguments: [{ path: 'message', regex: '^prod' }] },
    { id: 'images-need-approval', effect: 'approval', tools: ['get-tiny-image'] },
    { id: 'no-force-push', effect: 'deny', tools: ['force_push'] },
  ],
};

interface Bucket {
  start: string;
  calls: number;
  allowed: number;
  denied: number;
  approval: number;
}

interface Replayed {
  id: string;
  server: string;
  tool: string;
  arguments: Record<string, unknown>;
  recorded: { decision: string; rules: string[] };
  draft: { decision: string; rules: string[]; reason: string };
}

/** A gateway's local call as it reports one, at `time`. */
function localCall(time: number, tool: string, decision: 'allow' | 'deny'): Record<string, unknown> {
  return {
    id: randomUUID(),
    type: decision === 'deny' ? 'execution.denied' : 'execution.succeeded',
    time: new Date(time).toISOString(),
    execution_mode: 'local',
    principal: 'user:dev@example.com',
    server: 'laptop-git',
    tool,
    decision,
    ...(decision === 'deny' ? { rule: 'no-force-push' } : {}),
    arguments: { repo: 'payments' },
  };
}

/**
 * The overview's aggregate endpoint and the policy replay, over calls really
 * made: through the pool (allowed, denied, one held for approval) and reported
 * by a gateway at chosen times (so the buckets they land in are known).
 */
describe('the overview and the policy replay', () => {
  let cp: TestControlPlane;
  let ws = '';
  let server = '';
  let gateway: { id: string; name: string; token: string };
  /** when the calls were made: every pool call falls between these */
  let madeFrom = 0;
  let madeTo = 0;
  let now = 0;

  const overview = (window: string, token?: string) =>
    cp.request('GET', `/v1/workspaces/${ws}/overview?window=${window}`, token ? { token } : {});
  const replay = (body: unknown, query = '', workspace = ws, token?: string) =>
    cp.request('POST', `/v1/workspaces/${workspace}/policy/replay${query}`, { body, ...(token ? { token } : {}) });

  beforeAll(async () => {
    // a call that needs approval answers at once with its pending request, rather than wait for a decision
    cp = await startTestControlPlane('pglite', { AILERON_POOL_APPROVAL_WAIT_SECONDS: '0' });
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    const put = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: IN_FORCE });
    expect(put.status, put.text).toBe(200);
    server = await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.everything);
    gateway = await aGateway(cp, cp.ownerToken, ws);

    now = Date.now();
    const shipped = await cp.request('POST', '/v1/gateway/audit', {
      token: gateway.token,
      body: {
        events: [
          localCall(now - 10 * MINUTE, 'status', 'allow'),
          localCall(now - 10 * MINUTE, 'status', 'allow'),
          localCall(now - 10 * MINUTE, 'status', 'allow'),
          localCall(now - 10 * MINUTE, 'force_push', 'deny'),
          localCall(now - 5 * HOUR, 'status', 'allow'),
          localCall(now - 5 * HOUR, 'status', 'allow'),
          localCall(now - 2 * DAY, 'status', 'allow'),
        ],
      },
    });
    expect(shipped.body, shipped.text).toMatchObject({ accepted: 7, rejected: [] });

    madeFrom = Date.now();
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws}/${server}`);
    try {
      for (const n of [1, 2, 3]) {
        const ok = await client.callTool({ name: 'echo', arguments: { message: `hello ${n}` } });
        expect(ok.isError, textOf(ok)).toBeFalsy();
      }
      const prod = await client.callTool({ name: 'echo', arguments: { message: 'prod deploy' } });
      expect(textOf(prod)).toContain('POLICY_DENIED');
      const sum = await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } });
      expect(textOf(sum)).toContain('POLICY_DENIED');
      const image = await client.callTool({ name: 'get-tiny-image', arguments: {} });
      expect(textOf(image)).toContain('APPROVAL_PENDING');
    } finally {
      await client.close();
    }
    madeTo = Date.now();
    // the pool writes its execution records in batches, after the calls answer
    await eventually('the pool calls in the audit log', async () => {
      const seen = await overview('1h');
      return seen.body.totals.calls === 10;
    });
  });
  afterAll(async () => {
    await cp?.close();
  });

  it('counts the last hour by minute: calls, denials and approvals, each in the minute it happened', async () => {
    const res = await overview('1h');
    expect(res.status, res.text).toBe(200);
    const o = res.body;
    expect(o).toMatchObject({ window: '1h', bucket_seconds: 60 });
    expect(o.buckets).toHaveLength(60);
    // 3 echoes allowed, an echo to prod and a sum denied, an image held; 3 local calls allowed and a push denied
    expect(o.totals).toEqual({ calls: 10, allowed: 6, denied: 3, approval: 1 });
    const buckets = o.buckets as Bucket[];
    const minuteOf = (t: number) => new Date(Math.floor(t / MINUTE) * MINUTE).toISOString();
    expect(buckets.find((b) => b.start === minuteOf(now - 10 * MINUTE))).toEqual({
      start: minuteOf(now - 10 * MINUTE),
      calls: 4,
      allowed: 3,
      denied: 1,
      approval: 0,
    });
    // the pool's six calls are in the minutes they were made in, and nowhere else
    const during = buckets.filter((b) => b.start >= minuteOf(madeFrom) && b.start <= minuteOf(madeTo));
    expect(during.reduce((n, b) => n + b.calls, 0)).toBe(6);
    expect(during.reduce((n, b) => n + b.denied, 0)).toBe(2);
    expect(during.reduce((n, b) => n + b.approval, 0)).toBe(1);
    // the buckets are consecutive minutes ending with the current one
    expect(Date.parse(buckets[59]!.start)).toBe(Math.floor(Date.parse(o.to) / MINUTE - 1) * MINUTE);
    expect(Date.parse(buckets[1]!.start) - Date.parse(buckets[0]!.start)).toBe(MINUTE);
  });

  it('counts the last day by hour, without the calls of the day before', async () => {
    const o = (await overview('1d')).body;
    expect(o).toMatchObject({ window: '1d', bucket_seconds: 3600 });
    expect(o.buckets).toHaveLength(24);
    expect(o.totals).toEqual({ calls: 12, allowed: 8, denied: 3, approval: 1 });
    const hourOf = (t: number) => new Date(Math.floor(t / HOUR) * HOUR).toISOString();
    expect((o.buckets as Bucket[]).find((b) => b.start === hourOf(now - 5 * HOUR))).toMatchObject({
      calls: 2,
      allowed: 2,
    });
  });

  it('shows the approval waiting, the pool instance and its health, and the gateway last seen', async () => {
    const o = (await overview('1h')).body;
    expect(o.approvals_waiting).toBe(1);
    expect(o.pool.instances).toEqual([
      expect.objectContaining({ server, version: '1.0.0', state: 'running', crashes: 0 }),
    ]);
    expect(o.gateways).toMatchObject({ enrolled: 1, seen_in_window: 1 });
    expect(o.gateways.recent).toEqual([expect.objectContaining({ id: gateway.id, name: gateway.name })]);
    expect(Date.parse(o.gateways.recent[0].last_seen_at)).toBeGreaterThanOrEqual(now - MINUTE);
  });

  it('refuses a window it does not know with a stable code naming the parameter', async () => {
    for (const window of ['7d', '', '1H']) {
      const res = await overview(window);
      expect(res.status, window).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
      expect(res.body.errors).toEqual([expect.objectContaining({ path: 'query.window' })]);
    }
  });

  it("keeps the figures and the recorded calls to the audit log's readers", async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws });
    const auditor = await aToken(cp, cp.ownerToken, { role: 'auditor', workspace: ws });
    const since = new Date(Date.now() - DAY).toISOString();
    for (const res of [
      await overview('1h', member.token),
      await replay({ document: IN_FORCE, since }, '', ws, member.token),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('FORBIDDEN');
    }
    expect((await overview('1h', auditor.token)).body.totals.calls).toBe(10);
  });

  it("shows an admin of another organisation nothing of this one's", async () => {
    const other = await anOrganization(cp);
    const since = new Date(Date.now() - DAY).toISOString();
    const seen = await overview('1h', other.token);
    expect(seen.status).toBe(404);
    expect(seen.body.code).toBe('WORKSPACE_NOT_FOUND');
    const replayed = await replay({ document: IN_FORCE, since }, '', ws, other.token);
    expect(replayed.status).toBe(404);
    expect(replayed.text).not.toContain(server);
    // a workspace of the same name in their organisation shows their figures, not these
    expect(
      (await cp.request('POST', '/v1/workspaces', { token: other.token, body: { slug: ws, name: 'theirs' } })).status,
    ).toBe(201);
    expect((await overview('1d', other.token)).body.totals.calls).toBe(0);
  });

  const since = () => new Date(Date.now() - DAY).toISOString();

  it('finds no difference when the draft is the policy in force', async () => {
    const res = await replay({ document: IN_FORCE, since: since() });
    expect(res.status, res.text).toBe(200);
    // the prod echo was denied by its argument: the denied call's arguments were recorded, so it is denied again
    expect(res.body).toMatchObject({ items: [], next_cursor: null, examined: 12 });
  });

  it('lists exactly the recorded calls of a tool the draft denies, as allow → deny with its rule, each once across pages', async () => {
    const draft = { rules: [...IN_FORCE.rules, { id: 'no-echo', effect: 'deny', tools: ['echo'] }] };
    const body = { document: draft, since: since() };
    const items: Replayed[] = [];
    const cursors: (string | null)[] = [];
    let cursor: string | null = null;
    do {
      const page = await replay(body, `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status, page.text).toBe(200);
      expect(page.body.items.length).toBeLessThanOrEqual(2);
      items.push(...(page.body.items as Replayed[]));
      cursor = page.body.next_cursor;
      cursors.push(cursor);
    } while (cursor && cursors.length < 10);
    expect(cursors).toHaveLength(2);
    expect(items.map((i) => i.arguments.message).sort()).toEqual(['hello 1', 'hello 2', 'hello 3']);
    expect(new Set(items.map((i) => i.id)).size).toBe(3);
    for (const item of items) {
      expect(item).toMatchObject({
        server,
        tool: 'echo',
        recorded: { decision: 'allow' },
        draft: { decision: 'deny', reason: 'rule', rules: ['no-echo'] },
      });
    }
  });

  it('names the change whatever its direction: deny → allow, approval → deny, allow → approval', async () => {
    const draft = {
      rules: [
        { id: 'allow-the-rest', effect: 'allow' },
        // the request recorded the call's execution mode: a rule naming it decides the call again
        { id: 'no-remote-images', effect: 'deny', tools: ['get-tiny-image'], execution_mode: 'remote' },
        {
          id: 'pushes-need-a-look',
          effect: 'approval',
          approval_route: 'security',
          tools: ['force_push', 'status'],
          execution_mode: 'local',
        },
      ],
    };
    const res = await replay({ document: draft, since: since() }, '?limit=50');
    expect(res.status, res.text).toBe(200);
    const changes = (res.body.items as Replayed[]).map(
      (i) => `${i.tool}: ${i.recorded.decision} → ${i.draft.decision}`,
    );
    expect(changes.sort()).toEqual([
      'echo: deny → allow',
      'force_push: deny → approval',
      'get-sum: deny → allow',
      'get-tiny-image: approval → deny',
      // the local calls of the last day; the one of two days ago is out of the replay's range
      ...Array(5).fill('status: allow → approval'),
    ]);
    // a denied call is listed with the arguments it was denied for (recorded, redacted as any call's)
    const prod = (res.body.items as Replayed[]).find((i) => i.tool === 'echo')!;
    expect(prod).toMatchObject({ arguments: { message: 'prod deploy' }, recorded: { rules: ['no-prod-echo'] } });
    const push = (res.body.items as Replayed[]).find((i) => i.tool === 'force_push')!;
    expect(push).toMatchObject({
      recorded: { decision: 'deny', rules: ['no-force-push'] },
      draft: { decision: 'approval', rules: ['pushes-need-a-look'], approval_route: 'security' },
    });
  });

  it('decides at most 2,000 recorded calls a request, and the cursor goes on from there', async () => {
    const big = (await aWorkspace(cp, cp.ownerToken)).slug;
    expect((await cp.request('PUT', `/v1/workspaces/${big}/policy`, { body: IN_FORCE })).status).toBe(200);
    const laptop = await aGateway(cp, cp.ownerToken, big);
    const start = Date.now() - HOUR;
    const deploys = new Set([4, 1499, 2399]);
    const events = Array.from({ length: 2500 }, (_, i) =>
      localCall(start + i * 1000, deploys.has(i) ? 'deploy' : 'status', 'allow'),
    );
    for (let i = 0; i < events.length; i += 1000) {
      const res = await cp.request('POST', '/v1/gateway/audit', {
        token: laptop.token,
        body: { events: events.slice(i, i + 1000) },
      });
      expect(res.body.accepted, res.text).toBe(Math.min(1000, events.length - i));
    }
    const body = {
      document: { rules: [...IN_FORCE.rules, { id: 'no-deploys', effect: 'deny', tools: ['deploy'] }] },
      since: since(),
    };
    const first = await replay(body, '', big);
    expect(first.status, first.text).toBe(200);
    expect(first.body.examined).toBe(2000);
    expect(first.body.items.map((i: Replayed) => i.id)).toEqual([events[4]!.id, events[1499]!.id]);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const second = await replay(body, `?cursor=${encodeURIComponent(first.body.next_cursor)}`, big);
    expect(second.body).toMatchObject({ examined: 500, next_cursor: null, until: first.body.until });
    expect(second.body.items.map((i: Replayed) => i.id)).toEqual([events[2399]!.id]);

    // the cursor belongs to that draft and that since
    const other = { ...body, document: IN_FORCE };
    const mixed = await replay(other, `?cursor=${encodeURIComponent(first.body.next_cursor)}`, big);
    expect(mixed.status).toBe(400);
    expect(mixed.body.code).toBe('INVALID_CURSOR');
  });

  it('refuses a since beyond the maximum window, in the future or missing, and a draft that is not a policy', async () => {
    const tooOld = await replay({ document: IN_FORCE, since: new Date(Date.now() - 31 * DAY).toISOString() });
    expect(tooOld.status).toBe(400);
    expect(tooOld.body).toMatchObject({
      code: 'REPLAY_WINDOW_TOO_LONG',
      max_days: 30,
      errors: [{ path: 'body.since', message: 'must be within the last 30 days' }],
    });
    const future = await replay({ document: IN_FORCE, since: new Date(Date.now() + HOUR).toISOString() });
    expect(future.body).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'body.since' }] });
    const missing = await replay({ document: IN_FORCE });
    expect(missing.body).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'body.since' }] });
    const invalid = await replay({ document: { rules: [{ id: 'x', effect: 'maybe' }] }, since: since() });
    expect(invalid.status).toBe(400);
    expect(invalid.body.code).toBe('POLICY_INVALID');
    expect(invalid.body.errors[0].path).toBe('body.document.rules[0].effect');
  });
});
