import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aCatalogServer, aGateway, anOrganization, aToken, aUser, aWorkspace, uniqueSlug } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';

/**
 * Every list pages the same way (API.md): `?limit=&cursor=` in, `{items,
 * next_cursor}` out, `next_cursor` null on the last page. Each list below gets
 * more rows than a page, the rows of created_at-ordered lists all written at
 * the same instant, and a client paging through sees each exactly once, in
 * the list's order.
 */

const ROWS = 5;
const LIMIT = 2;
/** one instant for every seeded row of a list ordered by created_at: only the id tells them apart */
const SAME_INSTANT = '2020-03-04T05:06:07.890Z';

interface ListCase {
  name: string;
  path: () => string;
  /** what tells two items apart */
  key: (item: any) => string;
  /** the seeded items' keys, in the order the list must give them */
  seeded: () => string[];
  /** whose list it is, when not the default organisation's owner's */
  token?: () => string;
}

function byId(ids: string[], direction: 'asc' | 'desc'): string[] {
  const sorted = [...ids].sort();
  return direction === 'asc' ? sorted : sorted.reverse();
}

describe('pagination', () => {
  let cp: TestControlPlane;
  let ws: string;
  let gatewayToken: string;
  const seeded: Record<string, string[]> = {};
  let sessionId: string;
  let webhookId: string;
  /** an organisation of its own for the audit sinks: their deliveries (to nowhere) follow only its quiet chain */
  let sinkOwner: string;

  async function sql(statement: string, ...params: unknown[]): Promise<void> {
    await cp.cp.database.client.$executeRawUnsafe(statement, ...params);
  }

  /** Gives rows one created_at, as if one transaction had written them all (an instant before the test, so later rows come after). */
  async function tie(table: string, ids: string[], column = 'created_at', idColumn = 'id'): Promise<void> {
    await sql(
      `UPDATE ${table} SET ${column} = $1::timestamptz WHERE ${idColumn}::text = ANY($2::text[])`,
      SAME_INSTANT,
      ids,
    );
  }

  async function created(method: string, path: string, body: unknown, token?: string): Promise<any> {
    const res = await cp.request(method, path, { body, ...(token ? { token } : {}) });
    expect([200, 201], `${method} ${path}: ${res.text}`).toContain(res.status);
    return res.body;
  }

  async function times<T>(n: number, make: (i: number) => Promise<T>): Promise<T[]> {
    const out: T[] = [];
    for (let i = 1; i <= n; i++) out.push(await make(i));
    return out;
  }

  /** Follows next_cursor from the first page to the last, as a client would. */
  async function pageThrough(path: string, token?: string): Promise<{ items: any[]; pages: number }> {
    const items: any[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const join = path.includes('?') ? '&' : '?';
      const res = await cp.request(
        'GET',
        `${path}${join}limit=${LIMIT}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        token ? { token } : {},
      );
      expect(res.status, `${path}: ${res.text}`).toBe(200);
      expect(Object.keys(res.body)).toEqual(expect.arrayContaining(['items', 'next_cursor']));
      expect(res.body.items.length).toBeLessThanOrEqual(LIMIT);
      items.push(...res.body.items);
      cursor = res.body.next_cursor;
      pages += 1;
      expect(pages, `${path} never ends`).toBeLessThan(100);
    } while (cursor !== null);
    return { items, pages };
  }

  const cases: ListCase[] = [
    { name: 'workspaces', path: () => '/v1/workspaces', key: (w) => w.slug, seeded: () => seeded.workspaces! },
    { name: 'users', path: () => '/v1/users', key: (u) => u.id, seeded: () => byId(seeded.users!, 'asc') },
    {
      name: 'members',
      path: () => `/v1/workspaces/${ws}/members`,
      key: (m) => m.user_id,
      seeded: () => byId(seeded.users!, 'asc'),
    },
    { name: 'tokens', path: () => '/v1/tokens', key: (t) => t.id, seeded: () => byId(seeded.tokens!, 'asc') },
    { name: 'catalog servers', path: () => '/v1/catalog/servers', key: (s) => s.name, seeded: () => seeded.servers! },
    {
      name: 'workspace servers',
      path: () => `/v1/workspaces/${ws}/servers`,
      key: (s) => s.server,
      seeded: () => seeded.servers!,
    },
    {
      name: 'gateways',
      path: () => `/v1/workspaces/${ws}/gateways`,
      key: (g) => g.id,
      seeded: () => byId(seeded.gateways!, 'desc'),
    },
    {
      name: 'policy versions',
      path: () => `/v1/workspaces/${ws}/policy/versions`,
      key: (v) => String(v.version),
      seeded: () => ['5', '4', '3', '2', '1'],
    },
    { name: 'audit', path: () => `/v1/workspaces/${ws}/audit`, key: (r) => String(r.seq), seeded: () => seeded.audit! },
    { name: 'organisation audit', path: () => '/v1/audit', key: (r) => String(r.seq), seeded: () => seeded.orgAudit! },
    {
      name: 'audit checkpoints',
      path: () => `/v1/workspaces/${ws}/audit/checkpoints`,
      key: (c) => String(c.seq),
      seeded: () => seeded.checkpoints!,
    },
    {
      name: 'audit sinks',
      path: () => '/v1/audit/sinks',
      key: (s) => s.id,
      seeded: () => byId(seeded.sinks!, 'asc'),
      token: () => sinkOwner,
    },
    { name: 'secrets', path: () => `/v1/workspaces/${ws}/secrets`, key: (s) => s.path, seeded: () => seeded.secrets! },
    {
      name: 'approvals',
      path: () => `/v1/workspaces/${ws}/approvals`,
      key: (a) => a.id,
      seeded: () => byId(seeded.approvals!, 'desc'),
    },
    {
      name: 'sessions',
      path: () => `/v1/workspaces/${ws}/sessions`,
      key: (s) => s.id,
      seeded: () => byId(seeded.sessions!, 'desc'),
    },
    {
      name: 'sessions (alias)',
      path: () => `/v1/sessions?workspace=${ws}`,
      key: (s) => s.id,
      seeded: () => byId(seeded.sessions!, 'desc'),
    },
    {
      name: 'session messages',
      path: () => `/v1/workspaces/${ws}/sessions/${sessionId}/messages`,
      key: (m) => m.id,
      seeded: () => byId(seeded.messages!, 'asc'),
    },
    {
      name: 'session keys',
      path: () => '/v1/session-keys',
      key: (k) => k.key_id,
      seeded: () => [...seeded.sessionKeys!].sort().reverse(),
    },
    {
      name: 'sandboxes',
      path: () => `/v1/workspaces/${ws}/sandboxes`,
      key: (s) => s.name,
      seeded: () => seeded.sandboxes!,
    },
    {
      name: 'sandbox snapshots',
      path: () => `/v1/workspaces/${ws}/sandboxes/${seeded.sandboxes![0]}/snapshots`,
      key: (s) => s.sha,
      seeded: () => seeded.snapshots!,
    },
    {
      name: 'tool pins',
      path: () => `/v1/workspaces/${ws}/servers/${seeded.servers![0]}/tools`,
      key: (p) => `${p.version}/${p.tool}`,
      seeded: () => seeded.pins!,
    },
    { name: 'webhooks', path: () => '/v1/webhooks', key: (w) => w.id, seeded: () => byId(seeded.webhooks!, 'asc') },
    {
      name: 'webhook deliveries',
      path: () => `/v1/webhooks/${webhookId}/deliveries`,
      key: (d) => d.id,
      seeded: () => seeded.deliveries!,
    },
  ];

  beforeAll(async () => {
    // the sinks' failed deliveries retry in the background: their warnings are not this test's
    cp = await startApiControlPlane({ LOG_LEVEL: 'error' });
    const owner = cp.ownerToken;
    const prefix = uniqueSlug('pg');
    const names = (kind: string) => Array.from({ length: ROWS }, (_, i) => `${prefix}-${kind}-${i + 1}`);

    seeded.workspaces = names('ws');
    for (const slug of seeded.workspaces) await aWorkspace(cp, owner, slug);
    ws = seeded.workspaces[0]!;

    seeded.users = (await times(ROWS, () => aUser(cp, owner))).map((u) => u.id);
    for (const id of seeded.users) await created('PUT', `/v1/workspaces/${ws}/members/${id}`, { role: 'member' });
    await tie('users', seeded.users);
    await tie('memberships', seeded.users, 'created_at', 'user_id');

    seeded.tokens = (await times(ROWS, () => aToken(cp, owner, { role: 'member', workspace: ws }))).map((t) => t.id);
    await tie('api_tokens', seeded.tokens);

    seeded.servers = names('srv');
    for (const name of seeded.servers) {
      await aCatalogServer(cp, owner, { name });
      await created('PUT', `/v1/workspaces/${ws}/servers/${name}`, { version: '1.0.0' });
    }

    const gateways = await times(ROWS, () => aGateway(cp, owner, ws));
    seeded.gateways = gateways.map((g) => g.id);
    gatewayToken = gateways[0]!.token;
    await tie('gateways', seeded.gateways, 'enrolled_at');

    for (let i = 1; i <= ROWS; i++) {
      await created('PUT', `/v1/workspaces/${ws}/policy`, {
        rules: [{ id: `review-${i}`, effect: 'approval', tools: ['merge_*'] }],
      });
    }

    sinkOwner = (await anOrganization(cp)).token;
    seeded.sinks = await times(
      ROWS,
      async (i) =>
        (
          await created(
            'POST',
            '/v1/audit/sinks',
            { name: `${prefix}-sink-${i}`, url: 'http://127.0.0.1:9/siem' },
            sinkOwner,
          )
        ).id,
    );
    await tie('audit_sinks', seeded.sinks);

    seeded.secrets = names('secret').map((n) => `team/${n}`);
    for (const path of seeded.secrets) await created('PUT', `/v1/workspaces/${ws}/secrets/${path}`, { value: 'v' });

    seeded.approvals = await times(
      ROWS,
      async (i) =>
        (
          await created(
            'POST',
            '/v1/gateway/approvals',
            { server: 'github', tool: 'merge_pr', arguments: { n: i }, principal: 'dev@example.com' },
            gatewayToken,
          )
        ).id,
    );
    await tie('approval_requests', seeded.approvals);

    seeded.sessions = await times(
      ROWS,
      async (i) => (await created('POST', `/v1/workspaces/${ws}/sessions`, { name: `agent-${i}` })).id,
    );
    await tie('agent_sessions', seeded.sessions);
    sessionId = seeded.sessions[0]!;
    seeded.messages = await times(
      ROWS,
      async (i) =>
        (await created('POST', `/v1/workspaces/${ws}/sessions/${sessionId}/messages`, { text: `answer ${i}` })).id,
    );
    await tie('session_messages', seeded.messages);

    seeded.sessionKeys = await times(
      ROWS,
      async () => (await created('POST', '/v1/session-keys/rotate', undefined)).key_id,
    );
    await tie('session_root_keys', seeded.sessionKeys, 'created_at', 'key_id');

    seeded.sandboxes = names('box').slice(0, 3);
    for (const name of seeded.sandboxes) await created('POST', `/v1/workspaces/${ws}/sandboxes`, { name });
    const box = (
      await cp.cp.database.client.$queryRawUnsafe<{ id: string; organization_id: string }[]>(
        'SELECT id, organization_id FROM sandboxes WHERE name = $1',
        seeded.sandboxes[0],
      )
    )[0]!;
    const shas = Array.from({ length: ROWS }, (_, i) => String(i + 1).repeat(40));
    for (const sha of shas) {
      await sql(
        `INSERT INTO sandbox_snapshots (id, organization_id, sandbox_id, sha, trigger, message, files, author, created_at) VALUES (gen_random_uuid(), $1::uuid, $2::uuid, $3, 'write', 'm', '[]', 'a <a@example.com>', $4::timestamptz)`,
        box.organization_id,
        box.id,
        sha,
        SAME_INSTANT,
      );
    }
    const snapshotIds = await cp.cp.database.client.$queryRawUnsafe<{ sha: string }[]>(
      'SELECT sha FROM sandbox_snapshots WHERE sandbox_id = $1::uuid ORDER BY id DESC',
      box.id,
    );
    seeded.snapshots = snapshotIds.map((r) => r.sha);

    const workspace = (
      await cp.cp.database.client.$queryRawUnsafe<{ id: string; organization_id: string }[]>(
        'SELECT id, organization_id FROM workspaces WHERE slug = $1',
        ws,
      )
    )[0]!;
    seeded.pins = [];
    for (const version of ['1.0.0', '1.1.0']) {
      for (const tool of ['alpha', 'beta', 'gamma']) {
        await sql(
          `INSERT INTO tool_pins (organization_id, workspace_id, server, version, tool, pinned_hash, created_at) VALUES ($1::uuid, $2::uuid, $3, $4, $5, 'h', $6::timestamptz)`,
          workspace.organization_id,
          workspace.id,
          seeded.servers[0],
          version,
          tool,
          SAME_INSTANT,
        );
        seeded.pins.push(`${version}/${tool}`);
      }
    }

    seeded.webhooks = await times(
      ROWS,
      async (i) =>
        (
          await created('POST', '/v1/webhooks', {
            name: `${prefix}-hook-${i}`,
            url: 'http://127.0.0.1:9/hook',
            events: ['pagination.never-sent'],
          })
        ).id,
    );
    await tie('webhook_endpoints', seeded.webhooks);
    webhookId = seeded.webhooks[0]!;
    for (let i = 1; i <= ROWS; i++) {
      await sql(
        `INSERT INTO webhook_deliveries (id, organization_id, endpoint_id, event_id, event_type, status, created_at) VALUES (gen_random_uuid(), $1::uuid, $2::uuid, $3, 'pagination.never-sent', 'skipped', $4::timestamptz)`,
        workspace.organization_id,
        webhookId,
        `evt_${i}`,
        SAME_INSTANT,
      );
    }
    seeded.deliveries = (
      await cp.cp.database.client.$queryRawUnsafe<{ id: string }[]>(
        'SELECT id::text FROM webhook_deliveries WHERE endpoint_id = $1::uuid ORDER BY id DESC',
        webhookId,
      )
    ).map((r) => r.id);

    // the audit chains: every change above wrote records; the list must give each once, newest first
    const chain = async (chainId: string) =>
      (
        await cp.cp.database.client.$queryRawUnsafe<{ seq: string }[]>(
          'SELECT seq::text AS seq FROM audit_events e WHERE chain_id = $1::uuid ORDER BY e.seq DESC',
          chainId,
        )
      ).map((r) => r.seq);
    seeded.audit = await chain(workspace.id);
    seeded.orgAudit = await chain(workspace.organization_id);
    expect(seeded.audit.length).toBeGreaterThan(LIMIT);
    expect(seeded.orgAudit.length).toBeGreaterThan(LIMIT);
    for (let seq = 1; seq <= ROWS; seq++) {
      await sql(
        `INSERT INTO audit_checkpoints (chain_id, seq, organization_id, hash, kind, key_id, signature) VALUES ($1::uuid, $2, $3::uuid, 'h', 'periodic', 'k', 's') ON CONFLICT DO NOTHING`,
        workspace.id,
        seq,
        workspace.organization_id,
      );
    }
    seeded.checkpoints = (
      await cp.cp.database.client.$queryRawUnsafe<{ seq: string }[]>(
        'SELECT seq::text AS seq FROM audit_checkpoints c WHERE chain_id = $1::uuid ORDER BY c.seq',
        workspace.id,
      )
    ).map((r) => r.seq);
  }, 240_000);
  afterAll(async () => cp?.close());

  for (const list of cases) {
    it(`${list.name}: a client paging through sees every row once, in order, and next_cursor ends null`, async () => {
      const { items, pages } = await pageThrough(list.path(), list.token?.());
      const keys = items.map(list.key);
      expect(new Set(keys).size, `repeated: ${keys.join(' ')}`).toBe(keys.length);
      const expected = list.seeded();
      expect(expected.length).toBeGreaterThan(LIMIT);
      expect(pages).toBeGreaterThan(1);
      // the seeded rows, in the order the list gives them: each once, in the list's order
      expect(keys.filter((k) => expected.includes(k))).toEqual(expected);
    });
  }

  it('refuses a cursor that does not decode, or that another list gave out, with 400 INVALID_CURSOR', async () => {
    const tokensPage = await cp.request('GET', `/v1/tokens?limit=1`);
    const foreign = tokensPage.body.next_cursor as string;
    expect(foreign).toEqual(expect.any(String));
    for (const list of cases.filter((c) => c.name !== 'tokens')) {
      for (const cursor of [foreign, 'not-a-cursor']) {
        const join = list.path().includes('?') ? '&' : '?';
        const res = await cp.request(
          'GET',
          `${list.path()}${join}cursor=${encodeURIComponent(cursor)}`,
          list.token ? { token: list.token() } : {},
        );
        expect(res.status, `${list.name}: ${res.text}`).toBe(400);
        expect(res.headers.get('content-type')).toContain('application/problem+json');
        expect(res.body.code, list.name).toBe('INVALID_CURSOR');
        expect(res.body.errors).toEqual([{ path: 'query.cursor', message: expect.any(String) }]);
      }
    }
  });

  it('answers the pages ahead of a list that grew meanwhile without repeating or skipping what was there', async () => {
    const first = await cp.request('GET', `/v1/workspaces/${ws}/approvals?limit=${LIMIT}`);
    // a request written after the first page comes first in newest-first order: the next pages do not shift
    await created(
      'POST',
      '/v1/gateway/approvals',
      { server: 'github', tool: 'merge_pr', arguments: { n: 'late' }, principal: 'dev@example.com' },
      gatewayToken,
    );
    const rest: any[] = [];
    let cursor: string | null = first.body.next_cursor;
    while (cursor) {
      const res = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/approvals?limit=${LIMIT}&cursor=${encodeURIComponent(cursor)}`,
      );
      rest.push(...res.body.items);
      cursor = res.body.next_cursor;
    }
    expect([...first.body.items, ...rest].map((a: any) => a.id)).toEqual(byId(seeded.approvals!, 'desc'));
  });

  describe('the parameters and fields of the last release, until 0.3.0', () => {
    it('policy versions: before= pages and next_before says where the next page starts', async () => {
      const first = await cp.request('GET', `/v1/workspaces/${ws}/policy/versions?limit=2`);
      expect(first.body.versions.map((v: any) => v.version)).toEqual([5, 4]);
      expect(first.body.next_before).toBe(4);
      const second = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/policy/versions?limit=2&before=${first.body.next_before}`,
      );
      expect(second.body.versions.map((v: any) => v.version)).toEqual([3, 2]);
      expect(second.body.items).toEqual(second.body.versions);
      const last = await cp.request('GET', `/v1/workspaces/${ws}/policy/versions?limit=2&before=2`);
      expect(last.body.versions.map((v: any) => v.version)).toEqual([1]);
      expect(last.body.next_before).toBeNull();
    });

    it('secrets: after= pages and next_after says where the next page starts', async () => {
      const first = await cp.request('GET', `/v1/workspaces/${ws}/secrets?limit=2`);
      expect(first.body.secrets.map((s: any) => s.path)).toEqual(seeded.secrets!.slice(0, 2));
      expect(first.body.next_after).toBe(seeded.secrets![1]);
      const second = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/secrets?limit=2&after=${encodeURIComponent(first.body.next_after)}`,
      );
      expect(second.body.secrets.map((s: any) => s.path)).toEqual(seeded.secrets!.slice(2, 4));
      // the CLI of the last release asks for 500 at once
      expect((await cp.request('GET', `/v1/workspaces/${ws}/secrets?limit=500`)).status).toBe(200);
    });

    it('approvals: before= (a created_at) answers the requests created before it', async () => {
      const older = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/approvals?before=${encodeURIComponent(SAME_INSTANT)}`,
      );
      expect(older.status, older.text).toBe(200);
      expect(older.body.approvals.map((a: any) => a.id).filter((id: string) => seeded.approvals!.includes(id))).toEqual(
        [],
      );
      const later = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/approvals?before=${encodeURIComponent('2099-01-01T00:00:00.000Z')}&limit=200`,
      );
      expect(later.body.approvals.map((a: any) => a.id).filter((id: string) => seeded.approvals!.includes(id))).toEqual(
        byId(seeded.approvals!, 'desc'),
      );
    });

    it('audit and webhook deliveries: cursors of the old format are still read', async () => {
      const newest = Number(seeded.audit![0]);
      const audit = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/audit?limit=2&cursor=${Buffer.from(`s:${newest}`).toString('base64url')}`,
      );
      expect(audit.status, audit.text).toBe(200);
      expect(audit.body.events.map((r: any) => String(r.seq))).toEqual(seeded.audit!.slice(1, 3));
      const [firstDelivery] = seeded.deliveries!;
      const old = Buffer.from(`${SAME_INSTANT}|${firstDelivery}`).toString('base64url');
      const deliveries = await cp.request('GET', `/v1/webhooks/${webhookId}/deliveries?limit=2&cursor=${old}`);
      expect(deliveries.status, deliveries.text).toBe(200);
      expect(deliveries.body.deliveries.map((d: any) => d.id)).toEqual(seeded.deliveries!.slice(1, 3));
    });

    it('every list still carries its items under the name it had', async () => {
      const named: [string, string][] = [
        ['/v1/workspaces', 'workspaces'],
        ['/v1/users', 'users'],
        [`/v1/workspaces/${ws}/members`, 'members'],
        ['/v1/tokens', 'tokens'],
        ['/v1/catalog/servers', 'servers'],
        [`/v1/workspaces/${ws}/servers`, 'servers'],
        [`/v1/workspaces/${ws}/gateways`, 'gateways'],
        [`/v1/workspaces/${ws}/audit/checkpoints`, 'checkpoints'],
        [`/v1/workspaces/${ws}/sessions`, 'sessions'],
        [`/v1/workspaces/${ws}/sessions/${sessionId}/messages`, 'messages'],
        ['/v1/session-keys', 'keys'],
        [`/v1/workspaces/${ws}/sandboxes`, 'sandboxes'],
        ['/v1/webhooks', 'webhooks'],
        [`/v1/workspaces/${ws}/pool/instances`, 'instances'],
      ];
      for (const [path, name] of named) {
        const res = await cp.request('GET', path);
        expect(res.status, `${path}: ${res.text}`).toBe(200);
        expect(res.body[name], path).toEqual(res.body.items);
      }
    });

    it("messages: the agent's long-poll after=<message id> still answers what came after it", async () => {
      const [, second, third] = byId(seeded.messages!, 'asc');
      const res = await cp.request(
        'GET',
        `/v1/workspaces/${ws}/sessions/${sessionId}/messages?after=${second}&limit=1`,
      );
      expect(res.body.messages.map((m: any) => m.id)).toEqual([third]);
    });
  });
});
