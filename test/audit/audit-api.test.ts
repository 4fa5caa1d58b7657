import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { aGateway, anOrganization, aToken, aWorkspace } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';
import { BACKENDS } from '../support/databases';

interface View {
  id: string;
  seq: number;
  type: string;
  recorded_at: string;
  occurred_at: string;
  source: string;
  actor: string | null;
  principal: string | null;
  execution_mode: string | null;
  server: string | null;
  tool: string | null;
  decision: string | null;
  session: string | null;
  workspace_id: string | null;
  data: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

const CSV_HEADER = [
  'seq',
  'id',
  'type',
  'recorded_at',
  'occurred_at',
  'source',
  'actor',
  'principal',
  'execution_mode',
  'server',
  'tool',
  'decision',
  'session',
  'workspace_id',
  'data',
  'prev_hash',
  'hash',
];

function gatewayEvent(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: randomUUID(),
    type: 'execution.succeeded',
    time: new Date(Date.now() - 5_000).toISOString(),
    execution_mode: 'local',
    principal: 'user:alice@example.com',
    server: 'github',
    tool: 'get_issue',
    decision: 'allow',
    session: 'sess-1',
    latency_ms: 12,
    arguments: { repo: 'acme/api', issue: 7 },
    ...overrides,
  };
}

/** RFC 4180, as spreadsheet tools read it: quoted fields may hold commas, doubled quotes and newlines. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || (c === '\r' && text[i + 1] === '\n')) {
      if (c === '\r') i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (field !== '' || row.length > 0) rows.push([...row, field]);
  return rows;
}

describe.each(BACKENDS)('audit API on %s', (backend) => {
  let cp: TestControlPlane;
  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane(backend);
  });

  const ingest = (gatewayToken: string, events: unknown[]) =>
    cp.request('POST', '/v1/gateway/audit', { token: gatewayToken, body: { events } });

  /** Every page of a search, newest first, as a client walks next_cursor. */
  async function searchAll(ws: string, query: string, limit = 500): Promise<{ events: View[]; pages: number[] }> {
    const events: View[] = [];
    const pages: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/audit?limit=${limit}${query ? `&${query}` : ''}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(res.status, res.text).toBe(200);
      events.push(...res.body.events);
      pages.push(res.body.events.length);
      cursor = res.body.next_cursor;
      expect(pages.length).toBeLessThan(100);
    } while (cursor);
    return { events, pages };
  }

  async function exportJsonl(ws: string, query = ''): Promise<View[]> {
    const res = await cp.request('GET', `/v1/workspaces/${ws}/audit/export?format=jsonl${query ? `&${query}` : ''}`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    return res.text
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as View);
  }

  const verify = async (ws: string) => (await cp.request('GET', `/v1/workspaces/${ws}/audit/verify`)).body;

  describe('gateway ingest', () => {
    let ws: { slug: string; id: string };
    let gateway: { id: string; token: string };
    beforeAll(async () => {
      ws = await aWorkspace(cp, cp.ownerToken);
      gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    });

    it('accepts a batch; the same batch again, or part of it, stores nothing twice', async () => {
      const session = `retry-${randomUUID()}`;
      const batch = Array.from({ length: 5 }, (_, i) => gatewayEvent({ session, arguments: { issue: i } }));
      const first = await ingest(gateway.token, batch);
      expect([first.status, first.body]).toEqual([200, { accepted: 5, duplicates: 0, rejected: [] }]);

      const again = await ingest(gateway.token, batch);
      expect(again.body).toEqual({ accepted: 0, duplicates: 5, rejected: [] });

      const fresh = [gatewayEvent({ session }), gatewayEvent({ session })];
      const mixed = await ingest(gateway.token, [...batch.slice(0, 3), ...fresh]);
      expect(mixed.body).toEqual({ accepted: 2, duplicates: 3, rejected: [] });

      // one id twice in a batch (a gateway that re-queued an event) is kept once
      const twice = gatewayEvent({ session });
      expect((await ingest(gateway.token, [twice, { ...twice }])).body).toEqual({
        accepted: 1,
        duplicates: 1,
        rejected: [],
      });

      const stored = (await searchAll(ws.slug, `session=${session}`)).events;
      expect(stored.map((e) => e.id).sort()).toEqual([...batch, ...fresh, twice].map((e) => e.id as string).sort());
      expect(stored.every((e) => e.source === 'gateway' && e.actor === `gateway:${gateway.id}`)).toBe(true);
      expect(await verify(ws.slug)).toMatchObject({ ok: true });
    });

    it('keeps the good events of a mixed batch and rejects each bad one with its index and reason', async () => {
      const session = `mixed-${randomUUID()}`;
      const good = () => gatewayEvent({ session });
      const events: unknown[] = [
        good(),
        gatewayEvent({ session, id: 'not-a-uuid' }),
        good(),
        gatewayEvent({ session, type: 'Execution Succeeded' }),
        (({ time: _t, ...rest }) => rest)(gatewayEvent({ session })),
        gatewayEvent({ session, tool: 'get\u0000issue' }),
        gatewayEvent({ session, surprise: true }),
        gatewayEvent({ session, time: new Date(Date.now() + 7 * 86_400_000).toISOString() }),
        good(),
        'not an event',
        gatewayEvent({ session, decision: 'maybe' }),
        // nested past what the chain's hashing and PostgreSQL walk (a few thousand levels overflow them)
        gatewayEvent({ session, data: { deep: JSON.parse(`${'['.repeat(3_000)}${']'.repeat(3_000)}`) } }),
      ];
      const res = await ingest(gateway.token, events);
      expect(res.status, res.text).toBe(200);
      expect(res.body.accepted).toBe(3);
      expect(res.body.duplicates).toBe(0);
      const idOf = (i: number) => (events[i] as { id: string }).id;
      // each field at fault is named as a 400 names it, under the event's index
      const at = (path: string) => [{ path, message: expect.any(String) }];
      expect(res.body.rejected).toEqual([
        {
          index: 1,
          id: 'not-a-uuid',
          code: 'EVENT_INVALID',
          reason: expect.stringMatching(/^id: .*UUID/),
          errors: at('body.events[1].id'),
        },
        {
          index: 3,
          id: idOf(3),
          code: 'EVENT_INVALID',
          reason: expect.stringMatching(/^type: /),
          errors: at('body.events[3].type'),
        },
        {
          index: 4,
          id: idOf(4),
          code: 'EVENT_INVALID',
          reason: expect.stringMatching(/^time: /),
          errors: at('body.events[4].time'),
        },
        {
          index: 5,
          id: idOf(5),
          code: 'EVENT_INVALID',
          reason: expect.stringMatching(/NUL/),
          errors: at('body.events[5]'),
        },
        {
          index: 6,
          id: idOf(6),
          code: 'EVENT_INVALID',
          reason: expect.stringMatching(/surprise/),
          errors: at('body.events[6]'),
        },
        {
          index: 7,
          id: idOf(7),
          code: 'EVENT_INVALID',
          reason: expect.stringMatching(/^time: .*future/),
          errors: at('body.events[7].time'),
        },
        { index: 9, id: null, code: 'EVENT_INVALID', reason: expect.any(String), errors: at('body.events[9]') },
        {
          index: 10,
          id: idOf(10),
          code: 'EVENT_INVALID',
          reason: expect.stringMatching(/^decision: /),
          errors: at('body.events[10].decision'),
        },
        {
          index: 11,
          id: idOf(11),
          code: 'EVENT_INVALID',
          reason: 'data: nests deeper than 64 levels',
          errors: at('body.events[11].data'),
        },
      ]);
      const stored = (await searchAll(ws.slug, `session=${session}`)).events;
      expect(stored.map((e) => e.id).sort()).toEqual([0, 2, 8].map(idOf).sort());
      // a batch of nothing but bad events stores nothing and still answers
      const allBad = await ingest(gateway.token, [{ id: randomUUID() }]);
      expect(allBad.body).toMatchObject({
        accepted: 0,
        duplicates: 0,
        rejected: [{ index: 0, code: 'EVENT_INVALID' }],
      });
      expect(await verify(ws.slug)).toMatchObject({ ok: true });
    });

    it('takes 1000 events in one batch and refuses 1001 as a whole, with a problem document', async () => {
      const session = `big-${randomUUID()}`;
      const full = await ingest(
        gateway.token,
        Array.from({ length: 1000 }, () => gatewayEvent({ session })),
      );
      expect(full.body).toEqual({ accepted: 1000, duplicates: 0, rejected: [] });

      const over = `over-${randomUUID()}`;
      const tooMany = await ingest(
        gateway.token,
        Array.from({ length: 1001 }, () => gatewayEvent({ session: over })),
      );
      expect(tooMany.status).toBe(400);
      expect(tooMany.headers.get('content-type')).toContain('application/problem+json');
      expect(tooMany.body.code).toBe('VALIDATION_FAILED');
      expect(tooMany.body.errors.map((e: { path: string }) => e.path)).toContain('body.events');
      expect((await searchAll(ws.slug, `session=${over}`)).events).toEqual([]);
      expect((await searchAll(ws.slug, `session=${session}`)).events).toHaveLength(1000);
    });

    it("keeps the gateway's time as occurred_at while the chain orders by arrival", async () => {
      const session = `clock-${randomUUID()}`;
      const hour = 3600_000;
      const now = Math.floor(Date.now() / 1000) * 1000;
      const a = gatewayEvent({ session, time: new Date(now - 1 * hour).toISOString() });
      // a gateway in another time zone, and one that was offline and sends its older events late
      const b = gatewayEvent({ session, time: new Date(now - 3 * hour).toISOString().replace('Z', '+00:00') });
      const c = gatewayEvent({ session, time: '2026-01-01T10:00:00.123+02:00' });
      expect((await ingest(gateway.token, [a])).body.accepted).toBe(1);
      expect((await ingest(gateway.token, [b, c])).body.accepted).toBe(2);

      const chain = await exportJsonl(ws.slug, `session=${session}`);
      expect(chain.map((e) => e.id)).toEqual([a.id, b.id, c.id]);
      expect(chain.map((e) => e.occurred_at)).toEqual([
        new Date(now - hour).toISOString(),
        new Date(now - 3 * hour).toISOString(),
        '2026-01-01T08:00:00.123Z',
      ]);
      expect(chain[0]!.seq).toBeLessThan(chain[1]!.seq);
      expect(chain[1]!.seq).toBeLessThan(chain[2]!.seq);
      const recorded = chain.map((e) => Date.parse(e.recorded_at));
      expect(recorded[0]).toBeLessThanOrEqual(recorded[1]!);
      expect(recorded[0]).toBeGreaterThan(now - 60_000);
    });

    it("stores an older gateway's names in the one execution shape, and finds approved calls under either name", async () => {
      const session = `names-${randomUUID()}`;
      const approved = gatewayEvent({
        session,
        decision: 'approval',
        rule: 'reads-need-a-look',
        result_size: 2048,
        approval_id: 'ap-1',
      });
      const denied = gatewayEvent({ session, type: 'execution.denied', decision: 'deny', rule: 'no-deletes' });
      const current = gatewayEvent({
        session,
        execution_id: 'call-7',
        rules: ['reads'],
        result_bytes: 10,
        policy_version: 3,
      });
      const res = await ingest(gateway.token, [approved, denied, current]);
      expect(res.body, res.text).toEqual({ accepted: 3, duplicates: 0, rejected: [] });

      const byId = new Map((await searchAll(ws.slug, `session=${session}`)).events.map((e) => [e.id, e]));
      expect(byId.get(approved.id as string)).toMatchObject({
        type: 'execution.succeeded',
        decision: 'approved',
        // a gateway that names nobody else ran the call for itself
        principal: 'user:alice@example.com',
        data: {
          execution_id: approved.id,
          rules: ['reads-need-a-look'],
          result_bytes: 2048,
          approval_id: 'ap-1',
          latency_ms: 12,
          arguments: { repo: 'acme/api', issue: 7 },
        },
      });
      expect(byId.get(approved.id as string)!.data).not.toHaveProperty('rule');
      expect(byId.get(approved.id as string)!.data).not.toHaveProperty('result_size');
      expect(byId.get(denied.id as string)).toMatchObject({
        type: 'execution.failed',
        decision: 'deny',
        data: { rules: ['no-deletes'] },
      });
      expect(byId.get(current.id as string)!.data).toMatchObject({
        execution_id: 'call-7',
        rules: ['reads'],
        result_bytes: 10,
        policy_version: 3,
      });

      for (const decision of ['approved', 'approval']) {
        const found = (await searchAll(ws.slug, `session=${session}&decision=${decision}`)).events;
        expect(found.map((e) => e.id)).toEqual([approved.id]);
      }
      expect(await verify(ws.slug)).toMatchObject({ ok: true });
    });

    it('rejects an execution record that is not of the one shape, naming every field at fault', async () => {
      const session = `shape-${randomUUID()}`;
      const { server: _s, tool: _t, ...noCall } = gatewayEvent({ session });
      const events = [
        noCall,
        gatewayEvent({ session, data: { approval_id: 42 } }),
        gatewayEvent({ session, data: { rules: 'no-deletes', result_bytes: -1 } }),
        gatewayEvent({ session, type: 'execution.finished' }),
        gatewayEvent({ session, decision: undefined }),
        // another kind of event keeps its own shape
        gatewayEvent({ session, type: 'gateway.restarted', server: undefined, decision: undefined, rule: 'x' }),
      ];
      const res = await ingest(gateway.token, events);
      expect(res.status, res.text).toBe(200);
      expect(res.body.accepted).toBe(1);
      const paths = (i: number) =>
        res.body.rejected.find((r: { index: number }) => r.index === i).errors.map((e: { path: string }) => e.path);
      expect(res.body.rejected.map((r: { index: number; code: string }) => [r.index, r.code])).toEqual([
        [0, 'EVENT_INVALID'],
        [1, 'EVENT_INVALID'],
        [2, 'EVENT_INVALID'],
        [3, 'EVENT_INVALID'],
        [4, 'EVENT_INVALID'],
      ]);
      expect(paths(0)).toEqual(['body.events[0].server', 'body.events[0].tool']);
      expect(res.body.rejected[0].reason).toBe('server: required in an execution record');
      expect(paths(1)).toEqual(['body.events[1].data.approval_id']);
      expect(paths(2)).toEqual(['body.events[2].data.rules', 'body.events[2].data.result_bytes']);
      expect(paths(3)).toEqual(['body.events[3].type']);
      expect(paths(4)).toEqual(['body.events[4].decision']);
      const stored = (await searchAll(ws.slug, `session=${session}`)).events;
      expect(stored.map((e) => [e.type, e.data])).toEqual([
        ['gateway.restarted', expect.objectContaining({ rule: 'x' })],
      ]);
    });
  });

  describe('verify', () => {
    it('reports ok while records are appended as it runs: it verifies the chain as far as the head it read first', async () => {
      const ws = await aWorkspace(cp, cp.ownerToken);
      const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
      const before = (await verify(ws.slug)).events;
      // two gateways' worth of batches, one after another, until the verifies are done
      let appending = true;
      let appended = 0;
      const appends = Array.from({ length: 2 }, async () => {
        while (appending) {
          const res = await ingest(
            gateway.token,
            Array.from({ length: 5 }, () => gatewayEvent()),
          );
          expect(res.status, res.text).toBe(200);
          appended++;
        }
      });
      const results: { ok: boolean; events: number }[] = [];
      try {
        // each verify reads the head and then the records: appends commit in between
        while (results.length < 30 || appended < 30) results.push(await verify(ws.slug));
      } finally {
        appending = false;
        await Promise.all(appends);
      }
      expect(results.filter((r) => !r.ok)).toEqual([]);
      // the chain grew under them: later verifies covered more records
      expect(results[results.length - 1]!.events).toBeGreaterThan(results[0]!.events);
      expect(await verify(ws.slug)).toMatchObject({ ok: true, events: before + 5 * appended });
    });
  });

  describe('search', () => {
    let ws: { slug: string; id: string };
    let gateway: { id: string; token: string };
    let ownerActor: string;
    let all: View[];
    const base = Math.floor((Date.now() - 86_400_000) / 60_000) * 60_000;
    const minute = (i: number) => new Date(base + i * 60_000).toISOString();
    const events = Array.from({ length: 12 }, (_, i) =>
      gatewayEvent({
        time: minute(i),
        server: i % 3 === 0 ? 'slack' : 'github',
        tool: i % 2 ? 'get_issue' : 'list_issues',
        decision: ['allow', 'deny', 'approval'][i % 3],
        session: i < 6 ? 'sess-a' : 'sess-b',
        execution_mode: i % 4 === 0 ? 'remote' : 'local',
        type: i % 5 === 0 ? 'execution.failed' : 'execution.succeeded',
        principal: i % 2 ? 'user:alice@example.com' : 'user:bob@example.com',
      }),
    );
    beforeAll(async () => {
      ws = await aWorkspace(cp, cp.ownerToken);
      gateway = await aGateway(cp, cp.ownerToken, ws.slug);
      expect((await ingest(gateway.token, events.slice(0, 7))).body.accepted).toBe(7);
      expect(
        (await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/github/token`, { body: { value: 'ghp_x' } }))
          .status,
      ).toBe(200);
      expect((await ingest(gateway.token, events.slice(7))).body.accepted).toBe(5);
      expect(
        (await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/slack/token`, { body: { value: 'xoxb' } })).status,
      ).toBe(200);
      ownerActor = `token:${(await cp.request('GET', '/v1/me')).body.principal.id}`;
      all = await exportJsonl(ws.slug);
    });

    it.each([
      ['type', () => 'type=execution.failed', (e: View) => e.type === 'execution.failed', 3],
      [
        'several types',
        () => 'type=execution.failed,secret.written',
        (e: View) => ['execution.failed', 'secret.written'].includes(e.type),
        3,
      ],
      ['server', () => 'server=slack', (e: View) => e.server === 'slack', 4],
      ['tool', () => 'tool=list_issues', (e: View) => e.tool === 'list_issues', 6],
      ['decision', () => 'decision=deny', (e: View) => e.decision === 'deny', 4],
      ['session', () => 'session=sess-b', (e: View) => e.session === 'sess-b', 6],
      ['execution mode', () => 'execution_mode=remote', (e: View) => e.execution_mode === 'remote', 3],
      [
        'principal',
        () => `principal=${encodeURIComponent('user:bob@example.com')}`,
        (e: View) => e.principal === 'user:bob@example.com',
        6,
      ],
      [
        'from/to (occurred_at, from inclusive, to exclusive)',
        () => `from=${encodeURIComponent(minute(3))}&to=${encodeURIComponent(minute(7))}`,
        (e: View) => e.occurred_at >= minute(3) && e.occurred_at < minute(7),
        4,
      ],
      ['gateway actor', () => `actor=gateway:${gateway.id}`, (e: View) => e.actor === `gateway:${gateway.id}`, 12],
      ['owner actor', () => `actor=${ownerActor}`, (e: View) => e.actor === ownerActor, -1],
      [
        'filters together',
        () => 'server=github&decision=deny&session=sess-b',
        (e: View) => e.server === 'github' && e.decision === 'deny' && e.session === 'sess-b',
        2,
      ],
    ])('filters by %s', async (_label, query, matches, mine) => {
      const expected = all.filter(matches).reverse();
      expect(expected.length).toBeGreaterThan(0);
      expect(expected.length).toBeLessThan(all.length);
      // the gateway events this test wrote: exactly the ones the filter is about
      if (mine >= 0) expect(expected.filter((e) => events.some((g) => g.id === e.id)).length).toBe(mine);
      else expect(expected.filter((e) => e.type === 'secret.written')).toHaveLength(2);
      const found = (await searchAll(ws.slug, query())).events;
      expect(found.map((e) => e.id)).toEqual(expected.map((e) => e.id));
      // and exports take the same filters, in chain order
      expect((await exportJsonl(ws.slug, query())).map((e) => e.id)).toEqual(expected.map((e) => e.id).reverse());
    });

    it('pages through 25 records 10 at a time: every record once, newest first', async () => {
      const paged = await aWorkspace(cp, cp.ownerToken);
      const pagedGateway = await aGateway(cp, cp.ownerToken, paged.slug);
      const batch = Array.from({ length: 25 }, () => gatewayEvent({ session: 'paged' }));
      for (const part of [batch.slice(0, 9), batch.slice(9, 20), batch.slice(20)])
        expect((await ingest(pagedGateway.token, part)).body.accepted).toBe(part.length);

      const filtered = await searchAll(paged.slug, 'session=paged', 10);
      expect(filtered.pages).toEqual([10, 10, 5]);
      expect(filtered.events.map((e) => e.id)).toEqual(batch.map((e) => e.id).reverse());

      // unfiltered, whatever else the workspace's chain holds
      const everything = await searchAll(paged.slug, '', 10);
      const seqs = everything.events.map((e) => e.seq);
      expect(seqs).toEqual([...seqs].sort((x, y) => y - x));
      expect(new Set(everything.events.map((e) => e.id)).size).toBe(everything.events.length);
      expect(everything.events.map((e) => e.id)).toEqual((await exportJsonl(paged.slug)).map((e) => e.id).reverse());
      expect(everything.events.length).toBeGreaterThanOrEqual(25);
    });

    it('refuses a cursor it did not give out and a limit out of range', async () => {
      for (const cursor of [
        'garbage',
        Buffer.from('s:abc').toString('base64url'),
        Buffer.from('x:5').toString('base64url'),
        'a'.repeat(65),
      ]) {
        const res = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?cursor=${cursor}`);
        expect(res.status, cursor).toBe(400);
        expect(res.headers.get('content-type')).toContain('application/problem+json');
        expect(res.body.code).toBe('INVALID_CURSOR');
      }
      for (const limit of ['0', '501', 'ten'])
        expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?limit=${limit}`)).status).toBe(400);
      expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?decision=perhaps`)).status).toBe(400);
    });
  });

  describe('export', () => {
    let ws: { slug: string; id: string };
    const awkward = 'say "hi", then, on a new line,\nleave — naïve ✓';
    let special: Record<string, unknown>;
    beforeAll(async () => {
      ws = await aWorkspace(cp, cp.ownerToken);
      const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
      special = gatewayEvent({
        arguments: { q: awkward, list: ['a,b', '"c"'] },
        error: 'line one\r\nline "two"',
        server: 'git,hub',
      });
      expect(
        (await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/github/token`, { body: { value: 'ghp_x' } }))
          .status,
      ).toBe(200);
      expect(
        (await ingest(gateway.token, [gatewayEvent(), special, gatewayEvent({ decision: 'deny' })])).body.accepted,
      ).toBe(3);
      expect(
        (await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/github/token`, { body: { value: 'ghp_y' } }))
          .status,
      ).toBe(200);
    });

    it('JSON Lines: every record, one per line, in chain order, as search shows them', async () => {
      const lines = await exportJsonl(ws.slug);
      const { events } = await searchAll(ws.slug, '');
      expect(lines.map((l) => l.seq)).toEqual(lines.map((_, i) => i + 1));
      expect(lines).toEqual([...events].reverse());
      expect(lines.length).toBe((await verify(ws.slug)).events);
      for (let i = 1; i < lines.length; i++) expect(lines[i]!.prev_hash).toBe(lines[i - 1]!.hash);
      expect(lines.find((l) => l.id === special.id)!.data).toMatchObject({
        arguments: { q: awkward, list: ['a,b', '"c"'] },
      });
    });

    it('CSV: a header row, one row per record, and awkward text round-trips', async () => {
      const res = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit/export?format=csv`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/csv');
      expect(res.headers.get('content-disposition')).toContain('audit.csv');
      const [header, ...rows] = parseCsv(res.text);
      expect(header).toEqual(CSV_HEADER);
      const lines = await exportJsonl(ws.slug);
      expect(rows).toHaveLength(lines.length);
      for (const [i, row] of rows.entries()) {
        expect(row).toHaveLength(CSV_HEADER.length);
        const record = Object.fromEntries(CSV_HEADER.map((name, c) => [name, row[c]]));
        const line = lines[i]!;
        expect(record).toMatchObject({
          seq: String(line.seq),
          id: line.id,
          type: line.type,
          hash: line.hash,
          prev_hash: line.prev_hash,
          actor: line.actor ?? '',
          decision: line.decision ?? '',
        });
        expect(JSON.parse(record.data!)).toEqual(line.data);
      }
      const row = rows.find((r) => r[1] === special.id)!;
      expect(row[CSV_HEADER.indexOf('server')]).toBe('git,hub');
      expect(JSON.parse(row[CSV_HEADER.indexOf('data')]!)).toMatchObject({
        arguments: { q: awkward, list: ['a,b', '"c"'] },
        error: 'line one\r\nline "two"',
      });
    });

    it('an empty chain exports a header and nothing else', async () => {
      const empty = await aWorkspace(cp, cp.ownerToken);
      const res = await cp.request('GET', `/v1/workspaces/${empty.slug}/audit/export?format=csv&session=nobody`);
      expect(parseCsv(res.text)).toEqual([CSV_HEADER]);
      expect((await cp.request('GET', `/v1/workspaces/${empty.slug}/audit/export?session=nobody`)).text).toBe('');
    });
  });

  describe('who may read the log', () => {
    let ws: { slug: string; id: string };
    beforeAll(async () => {
      ws = await aWorkspace(cp, cp.ownerToken);
      const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
      expect((await ingest(gateway.token, [gatewayEvent({ session: 'private-session' })])).body.accepted).toBe(1);
    });
    const routes = (slug: string) => [
      `/v1/workspaces/${slug}/audit`,
      `/v1/workspaces/${slug}/audit/verify`,
      `/v1/workspaces/${slug}/audit/export`,
    ];

    it('a member of the workspace is refused; an auditor reads', async () => {
      const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
      for (const path of routes(ws.slug)) {
        const res = await cp.request('GET', path, { token: member.token });
        expect([res.status, res.body?.code], path).toEqual([403, 'FORBIDDEN']);
        expect(res.text).not.toContain('private-session');
      }
      const orgMember = await aToken(cp, cp.ownerToken, { role: 'member' });
      for (const path of ['/v1/audit', '/v1/audit/verify', '/v1/audit/export', ...routes(ws.slug)]) {
        const res = await cp.request('GET', path, { token: orgMember.token });
        expect([res.status, res.body.code], path).toEqual([403, 'FORBIDDEN']);
      }
      expect(
        (await cp.request('PUT', '/v1/organization/audit-retention', { token: orgMember.token, body: { days: 1 } }))
          .status,
      ).toBe(403);

      const auditor = await aToken(cp, cp.ownerToken, { role: 'auditor' });
      const read = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?session=private-session`, {
        token: auditor.token,
      });
      expect(read.status).toBe(200);
      expect(read.body.events).toHaveLength(1);
      expect(
        (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit/verify`, { token: auditor.token })).body,
      ).toMatchObject({ ok: true });
      // reading the log is not managing it
      expect(
        (await cp.request('PUT', '/v1/organization/audit-retention', { token: auditor.token, body: { days: 1 } }))
          .status,
      ).toBe(403);
      expect((await cp.request('GET', '/v1/organization/audit-retention')).body).toEqual({ days: null });
    });

    it("another organisation's owner gets 404 on our workspace's log and sees none of it in their own", async () => {
      const other = await anOrganization(cp);
      for (const path of routes(ws.slug)) {
        const res = await cp.request('GET', path, { token: other.token });
        expect(res.status, path).toBe(404);
        expect(res.text).not.toContain('private-session');
        expect(res.text).not.toContain(ws.id);
      }
      const theirs = await cp.request('GET', '/v1/audit?limit=500', { token: other.token });
      expect(theirs.status).toBe(200);
      expect(theirs.text).not.toContain('private-session');
      expect(theirs.text).not.toContain(ws.id);
      expect(
        (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?session=private-session`)).body.events,
      ).toHaveLength(1);
    });

    it('a gateway token reads nothing, and no token is a 401', async () => {
      const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
      const asGateway = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit`, { token: gateway.token });
      expect([asGateway.status, asGateway.body.code]).toEqual([403, 'GATEWAY_TOKEN_NOT_ALLOWED']);
      expect(asGateway.text).not.toContain('private-session');
      expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/audit`, { token: null })).status).toBe(401);
      expect(
        (await cp.request('POST', '/v1/gateway/audit', { token: null, body: { events: [gatewayEvent()] } })).status,
      ).toBe(401);
      // an owner's API token is not a gateway
      const asOwner = await cp.request('POST', '/v1/gateway/audit', { body: { events: [gatewayEvent()] } });
      expect([asOwner.status, asOwner.body.code]).toEqual([403, 'GATEWAY_TOKEN_REQUIRED']);
    });
  });
});
