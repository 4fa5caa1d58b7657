import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessService, PrincipalResolver } from '@aileron/auth';
import { OauthGrants } from '@aileron/oauth';
import { ExecutionJournal } from '@aileron/pool';
import { SandboxesService } from '@aileron/sandboxes';
import { RouteCatalog, RouteDefinition } from '../../libs/platform/http/src';
import { aCatalogServer, aGateway, aToken, aUser, aWorkspace, anOrganization } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { connect } from '../pool/mcp-client';

/**
 * For every tenant-owned route the app serves (enumerated from the running
 * app, so new routes join by construction), callers from another organisation
 * and from another workspace get a 404 and change nothing.
 */

/**
 * Every tenant-owned table, read from the database itself (the tenants, and
 * every table with an organization_id column), so a new table is covered the
 * day it is created. A table without that column must be named below with
 * why it is not a tenant's, or this fails: nothing is left out by silence.
 */
async function tenantTables(cp: TestControlPlane): Promise<string[]> {
  const rows = await cp.cp.database.client.$queryRawUnsafe<{ table_name: string; tenant: boolean }[]>(
    `SELECT table_name, bool_or(column_name = 'organization_id' OR (table_name = 'organizations' AND column_name = 'id')) AS tenant
       FROM information_schema.columns c
      WHERE table_schema = current_schema()
        AND EXISTS (SELECT 1 FROM information_schema.tables t WHERE t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE')
      GROUP BY table_name ORDER BY table_name`,
  );
  const unclassified = rows.filter((r) => !r.tenant && !(r.table_name in NOT_TENANT_OWNED)).map((r) => r.table_name);
  expect(unclassified, 'tables with no organization_id that NOT_TENANT_OWNED does not explain').toEqual([]);
  return rows
    .filter((r) => r.tenant)
    .map((r) => r.table_name)
    .filter((table) => !SIGNED_IN_THE_BACKGROUND.includes(table));
}

/** Tables with no organization_id, and why no tenant owns them (or why their tenant's rows are covered elsewhere). */
const NOT_TENANT_OWNED: Record<string, string> = {
  _prisma_migrations: 'the schema history of the installation',
  system_secrets: 'installation-wide keys',
  signing_keys: 'installation-wide signing keys',
  outbox_deliveries: "the outbox's per-consumer bookkeeping, written by dispatchers in the background",
  audit_sink_cursors: "a sink's progress, advanced by background deliveries; the sink itself (audit_sinks) is covered",
  oauth_entries:
    "the OAuth provider's protocol records (codes, tokens, its sessions), found by the credential itself; the consents they belong to (oauth_grants) are covered",
};

// periodic audit checkpoints are signed by the system on its own clock, whatever callers do
const SIGNED_IN_THE_BACKGROUND = ['audit_checkpoints'];

// webhook deliveries update endpoint health and attempt counts in the background; only those tables drop these columns
const BACKGROUND_COLUMNS: Record<string, string[]> = {
  webhook_endpoints: ['failing_since', 'paused_at', 'paused_reason'],
  webhook_deliveries: ['attempts', 'status', 'last_status', 'last_attempt_at', 'delivered_at'],
};

describe('tenancy matrix', () => {
  let cp: TestControlPlane;
  let routes: RouteDefinition[];
  const target: Record<string, string> = {};
  let otherOrgOwner: string;
  let otherWorkspaceAdmin: string;
  let targetIds: string[];
  let targetGateway: string;
  let tables: string[];

  /** Every row of every tenant table, minus bookkeeping the attacker's own requests update. */
  /** every row of every table, as text: one statement, so a snapshot per attacked route stays cheap */
  async function snapshot(): Promise<string> {
    const selects = tables.map(
      (table) =>
        `SELECT '${table}' AS tbl, (to_jsonb(t) - 'last_used_at' - 'last_login_at' - 'last_seen_at' - 'dispatched_at' - 'completed_at' - 'dispatch_count'
           - 'checkpoint_seq' - 'last_error' - 'last_error_at' - 'lease_until' - 'last_delivered_at'${(BACKGROUND_COLUMNS[table] ?? []).map((c) => ` - '${c}'`).join('')})::text AS row FROM ${table} t`,
    );
    const rows = await cp.cp.database.client.$queryRawUnsafe<{ tbl: string; row: string }[]>(
      `${selects.join('\nUNION ALL\n')}\nORDER BY 1, 2`,
    );
    return rows.map((r) => `${r.tbl}: ${r.row}`).join('\n');
  }

  function fill(value: string): string {
    return value.replace(/\{(\w+)\}/g, (_, key: string) => {
      const replacement = target[key];
      if (!replacement) throw new Error(`no target value for placeholder {${key}}`);
      return replacement;
    });
  }

  function fillDeep(value: unknown): unknown {
    if (typeof value === 'string') return fill(value);
    if (Array.isArray(value)) return value.map(fillDeep);
    if (value && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fillDeep(v)]));
    return value;
  }

  function pathFor(route: RouteDefinition): string {
    // a trailing `*` takes the rest of the path (secret paths such as github/token)
    return route.path.replace(/:(\w+)|\*$/g, (match: string, param: string | undefined) => {
      const name = param ?? match;
      if (name === 'ws') return target.ws!;
      const example = route.example?.params?.[name];
      if (!example)
        throw new Error(
          `${route.method} ${route.path}: no example for :${name}; add one so the tenancy matrix can attack it`,
        );
      return fill(example);
    });
  }

  /** Routes whose request names a resource of the target tenant (in the path or the body). */
  function attackable(route: RouteDefinition): boolean {
    // gateway routes act in the workspace the caller's own gateway token names: there is nothing else to point them at
    if (
      route.auth === 'public' ||
      route.tenancy === 'platform' ||
      route.tenancy === 'none' ||
      route.tenancy === 'gateway'
    )
      return false;
    const inPath = /:\w+/.test(route.path);
    const inBody = /\{\w+\}/.test(JSON.stringify(route.example?.body ?? null));
    return inPath || inBody;
  }

  beforeAll(async () => {
    // the fixture's execution records wait seconds for their batch: only the fixture's own wait below puts them in before the snapshots
    cp = await startApiControlPlane({ AILERON_POOL_AUDIT_BATCH_MS: '5000' });
    routes = cp.cp.app.get(RouteCatalog).all();
    tables = await tenantTables(cp);
    // the schema has these at least; an empty or short list would make the snapshots prove nothing
    expect(tables).toEqual(
      expect.arrayContaining([
        'organizations',
        'workspaces',
        'secrets',
        'audit_events',
        'approval_requests',
        'webhook_endpoints',
      ]),
    );
    // the target tenant: a workspace with a member, a token and a user in the default organisation
    const ws = await aWorkspace(cp, cp.ownerToken);
    const user = await aUser(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/members/${user.id}`, { body: { role: 'member' } });
    const token = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    // and a policy, a catalog server assigned with a rollout, and an enrolled gateway
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: {
        rules: [
          { id: 'target-secret-rule', effect: 'deny', tools: ['x'] },
          { id: 'target-review', effect: 'approval', tools: ['merge_*'] },
          { id: 'target-sandbox', effect: 'allow', servers: ['sandbox'] },
        ],
      },
    });
    const server = await aCatalogServer(cp, cp.ownerToken);
    await aCatalogServer(cp, cp.ownerToken, { name: server.name, version: '1.1.0' });
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/servers/${server.name}`, { body: { version: '1.0.0' } });
    const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    targetGateway = gateway.token;
    // a secret, audit records (the changes above wrote some) and a SIEM sink (its delivery fails in the background: nothing listens)
    const secretValue = `target-secret-value-${ws.id}`;
    expect(
      (await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/github/token`, { body: { value: secretValue } }))
        .status,
    ).toBe(200);
    const sink = await cp.request('POST', '/v1/audit/sinks', {
      body: { name: `target-${ws.slug}`, url: 'http://127.0.0.1:9/siem' },
    });
    expect(sink.status).toBe(201);
    // a webhook endpoint (enabled, so a PATCH that disables it would show) for an event nobody sends: no delivery adds rows while snapshots are compared
    const webhook = await cp.request('POST', '/v1/webhooks', {
      body: { name: `target-${ws.slug}`, url: 'http://127.0.0.1:9/hook', events: ['matrix.never-sent'] },
    });
    expect(webhook.status, webhook.text).toBe(201);
    // a pending approval request of the target, asked for by its gateway
    const approval = await cp.request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: { server: 'github', tool: 'merge_pr', arguments: { n: 1 }, principal: user.email },
    });
    expect(approval.status, approval.text).toBe(201);
    // an agent session its gateway started, with a message from the agent
    const session = await cp.request('POST', '/v1/sessions', {
      token: gateway.token,
      body: { workspace: ws.slug, name: 'target-agent' },
    });
    expect(session.status, session.text).toBe(201);
    const message = await cp.request('POST', `/v1/sessions/${session.body.id}/messages`, {
      token: session.body.caveat_token,
      body: { text: 'target-agent-message' },
    });
    expect(message.status, message.text).toBe(201);
    // a sandbox with one snapshot, its file written through the sandbox tools
    expect(
      (await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, { body: { name: 'target-box' } })).status,
    ).toBe(201);
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws.slug}/sandbox`);
    await client.callTool({
      name: 'write',
      arguments: { sandbox: 'target-box', path: 'target.txt', content: 'target-sandbox-file' },
    });
    await client.close();
    // the write's snapshot and its execution records are written after it answered: in before the first snapshot of the tables
    await cp.cp.app.get(SandboxesService).settledAll();
    await cp.cp.app.get(ExecutionJournal).flush();
    const written = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=execution.succeeded&tool=write`);
    expect(written.body.events, written.text).toHaveLength(1);
    const snapshots = await eventually(
      'the target snapshot',
      async () =>
        (await cp.request('GET', `/v1/workspaces/${ws.slug}/sandboxes/target-box/snapshots`)).body.snapshots?.[0],
    );
    // a connected MCP client of the target's member (the consent an OAuth sign-in records)
    const organizationId = (await cp.request('GET', '/v1/me')).body.organization.id as string;
    const member = await cp.cp.app.get(PrincipalResolver).byReference(organizationId, 'user', user.id);
    const oauthClient = await cp.cp.app
      .get(OauthGrants)
      .connect(member, await cp.cp.app.get(AccessService).workspace(member, ws.slug, 'mcp.use'), {
        grantId: `target-grant-${ws.id}`,
        clientId: 'https://client.example.com/target-client.json',
        clientName: 'target-client',
        registration: 'metadata_document',
        resource: `${cp.url}/mcp/${ws.slug}`,
        scope: 'mcp',
      });
    // the member's OAuth connection to an upstream server, as the callback leaves it (test/connections signs in for real)
    const [connection] = await cp.cp.database.client.$queryRawUnsafe<{ id: string }[]>(
      `INSERT INTO upstream_connections (id, organization_id, workspace_id, server, subject, user_id, state, upstream, has_refresh_token, created_by, connected_at)
         VALUES (gen_random_uuid(), $1::uuid, $2::uuid, $3, 'user:' || $4, $4::uuid, 'connected', $5::jsonb, true, 'user:' || $4, now())
       RETURNING id`,
      organizationId,
      ws.id,
      server.name,
      user.id,
      JSON.stringify({
        authorizationServer: 'https://as.target.example',
        metadata: null,
        resource: null,
        redirectUri: `${cp.url}/oauth/connections/callback`,
        client: { client_id: 'target-pool-client', registration: 'dynamic', secret: null },
      }),
    );
    Object.assign(target, {
      connection: connection!.id,
      oauth_client: oauthClient.id,
      sandbox: 'target-box',
      sha: snapshots.sha,
      ws: ws.slug,
      user: user.id,
      token: token.id,
      server: server.name,
      gateway: gateway.id,
      sink: sink.body.id,
      webhook: webhook.body.id,
      approval: approval.body.id,
      session: session.body.id,
    });
    // ids only: a 404 may echo the slug the caller itself sent
    targetIds = [
      connection!.id,
      oauthClient.id,
      ws.id,
      user.id,
      token.id,
      user.email,
      gateway.id,
      'target-secret-rule',
      secretValue,
      sink.body.id,
      webhook.body.id,
      webhook.body.secret,
      session.body.id,
      'target-agent-message',
    ];

    otherOrgOwner = (await anOrganization(cp)).token;
    await cp.request('POST', '/v1/workspaces', { token: otherOrgOwner, body: { slug: 'theirs', name: 'Theirs' } });
    const sibling = await aWorkspace(cp, cp.ownerToken);
    otherWorkspaceAdmin = (await aToken(cp, cp.ownerToken, { role: 'admin', workspace: sibling.slug })).token;
  });
  afterAll(async () => cp?.close());

  it('knows every protected route and how to attack each tenant-owned one', () => {
    const tenantOwned = routes.filter(attackable);
    expect(tenantOwned.length).toBeGreaterThanOrEqual(8);
    for (const route of routes) {
      if (route.auth === 'public') continue;
      expect(['workspace', 'organization', 'caller', 'platform', 'gateway'], `${route.method} ${route.path}`).toContain(
        route.tenancy,
      );
      if (route.tenancy === 'workspace') expect(attackable(route), `${route.method} ${route.path}`).toBe(true);
      expect(() => pathFor(route), `${route.method} ${route.path}`).not.toThrow();
    }
  });

  for (const [label, caller] of [
    ['another organisation (its owner)', () => otherOrgOwner],
    ['another workspace (an admin token limited to it)', () => otherWorkspaceAdmin],
  ] as const) {
    it(`a caller from ${label} gets 404 on every tenant-owned route and changes nothing`, async () => {
      const attacked: string[] = [];
      // what every attack must leave as it was: each one is compared with it, so one taken before them all serves
      const before = await snapshot();
      expect(before, 'the snapshot holds the target').toContain(target.ws);
      for (const route of routes.filter(attackable)) {
        // organisation-wide resources are not visible to a workspace-limited token at all (403)
        const expected = label.startsWith('another workspace') && route.tenancy === 'organization' ? [403, 404] : [404];
        const path = pathFor(route);
        const body = route.example?.body !== undefined ? fillDeep(route.example.body) : route.body ? {} : undefined;
        const res = await cp.request(route.method, path, { token: caller(), ...(body !== undefined ? { body } : {}) });
        expect(expected, `${route.method} ${route.path} → ${res.status} ${res.text}`).toContain(res.status);
        // an error may echo what the caller sent; anything else of the target's is a leak
        const sent = path + JSON.stringify(body ?? null);
        for (const id of targetIds.filter((i) => !sent.includes(i)))
          expect(res.text, `${route.method} ${route.path} leaks ${id}`).not.toContain(id);
        expect(await snapshot(), `${route.method} ${route.path} changed data`).toBe(before);
        attacked.push(`${route.method} ${route.path}`);
      }
      expect(attacked.length).toBeGreaterThanOrEqual(8);
    }, 180_000);
  }

  /**
   * The review page's session routes are public to the guard (the session
   * cookie is the credential), so the sweep above skips them: a signed-in
   * person of another organisation, or of another workspace, gets the same 404.
   */
  it('a review-page session from another organisation or workspace gets 404 on the target approval and changes nothing', async () => {
    const sibling = await aWorkspace(cp, cp.ownerToken);
    const neighbour = await aUser(cp, cp.ownerToken);
    expect(
      (await cp.request('PUT', `/v1/workspaces/${sibling.slug}/members/${neighbour.id}`, { body: { role: 'admin' } }))
        .status,
    ).toBe(200);
    const outsiders = {
      'another organisation': await aUser(cp, otherOrgOwner, 'owner'),
      'another workspace': neighbour,
    };
    for (const [label, user] of Object.entries(outsiders)) {
      // a session as the IdP sign-in leaves it (test/approvals/review-idp.test.ts signs in for real)
      const token = `ail_ses_${randomBytes(32).toString('base64url')}`;
      await cp.cp.database.client.$executeRawUnsafe(
        `INSERT INTO login_sessions (id, organization_id, user_id, token_hash, expires_at)
           SELECT gen_random_uuid(), organization_id, id, $2, now() + interval '1 hour' FROM users WHERE id = $1::uuid`,
        user.id,
        createHash('sha256').update(token).digest('hex'),
      );
      const cookie = `aileron_session=${token}`;
      const csrf = (await cp.request('GET', '/v1/auth/session', { token: null, headers: { cookie } })).body
        .csrf as string;
      const before = await snapshot();
      const attempts = [
        await cp.request('GET', `/review/${target.approval}/session`, { token: null, headers: { cookie } }),
        await cp.request('POST', `/review/${target.approval}/session/decision`, {
          token: null,
          body: { decision: 'approve' },
          headers: { cookie, 'x-aileron-csrf': csrf },
        }),
      ];
      for (const res of attempts) {
        expect(res.status, `${label}: ${res.text}`).toBe(404);
        for (const id of targetIds) expect(res.text, `${label} leaks ${id}`).not.toContain(id);
      }
      expect(await snapshot(), `${label} changed data`).toBe(before);
    }
  });

  /**
   * A gateway token lives on a developer's laptop. Every route it gets past
   * the auth layer with is listed here: a new one fails this test until
   * someone decides a gateway should reach it (and never a decision, a link,
   * a grant or an admin read).
   */
  it('a gateway token reaches exactly the gateway API, its own approvals and sessions, MCP and /v1/me, nothing else, in its own workspace', async () => {
    const REACHABLE = [
      'GET /v1/me',
      'GET /v1/approvals/:id',
      // agent sessions: a gateway starts them for the agents it launches, and sees and ends its own
      'POST /v1/workspaces/:ws/sessions',
      'GET /v1/workspaces/:ws/sessions',
      'GET /v1/workspaces/:ws/sessions/:id',
      'DELETE /v1/workspaces/:ws/sessions/:id',
      'GET /v1/workspaces/:ws/sessions/:id/agent-config',
      // and their /v1/sessions aliases
      'POST /v1/sessions',
      'GET /v1/sessions',
      'GET /v1/sessions/:id',
      'DELETE /v1/sessions/:id',
      'GET /v1/sessions/:id/agent-config',
      'GET /mcp/:ws',
      'POST /mcp/:ws',
      'DELETE /mcp/:ws',
      'GET /mcp/:ws/:server',
      'POST /mcp/:ws/:server',
      'DELETE /mcp/:ws/:server',
    ];
    const reached: string[] = [];
    const refused: string[] = [];
    for (const route of routes) {
      if (route.auth === 'public' || route.tenancy === 'gateway') continue;
      const path = pathFor(route);
      const body = route.example?.body !== undefined ? fillDeep(route.example.body) : route.body ? {} : undefined;
      const res = await cp.request(route.method, path, {
        token: targetGateway,
        ...(body !== undefined ? { body } : {}),
      });
      expect(res.status, `${route.method} ${route.path} → ${res.text}`).not.toBe(500);
      // 401 would mean the token itself was not taken; a refusal is 403 (not for gateways) or 404 (not its resource)
      expect(res.status, `${route.method} ${route.path}`).not.toBe(401);
      if (res.status === 403 || res.status === 404) refused.push(`${route.method} ${route.path}`);
      else reached.push(`${route.method} ${route.path}`);
      expect(res.text, `${route.method} ${route.path} answers a gateway a review link`).not.toContain('ail_lnk_');
    }
    expect(reached.sort()).toEqual([...REACHABLE].sort());
    expect(refused).toEqual(
      expect.arrayContaining([
        'POST /v1/approvals/:id/links',
        'POST /v1/approvals/:id/approve',
        'POST /v1/approvals/:id/deny',
        'POST /v1/tokens',
        'POST /v1/auth/token',
      ]),
    );
    // the gateway API is its own: every gateway route takes it
    expect(routes.filter((r) => r.tenancy === 'gateway').length).toBeGreaterThanOrEqual(5);
  });

  /**
   * The route map: a session caveat token with every capability reaches
   * exactly the routes that declare one (the MCP endpoints, its approvals, its
   * channel); every other route answers 403 CAPABILITY_REQUIRED before its
   * handler runs, whatever the session's creator may do.
   */
  it('a session caveat token with every capability reaches exactly the mapped routes, nothing else', async () => {
    const REACHABLE = [
      'GET /v1/approvals/:id',
      'POST /v1/workspaces/:ws/sessions/:id/messages',
      'GET /v1/workspaces/:ws/sessions/:id/messages',
      'POST /v1/sessions/:id/messages',
      'GET /v1/sessions/:id/messages',
      'GET /mcp/:ws',
      'POST /mcp/:ws',
      'DELETE /mcp/:ws',
      'GET /mcp/:ws/:server',
      'POST /mcp/:ws/:server',
      'DELETE /mcp/:ws/:server',
    ];
    // started by the workspace's owner, so the creator could reach everything: only the map stands in the way
    const started = await cp.request('POST', '/v1/sessions', { body: { workspace: target.ws, name: 'route-map' } });
    expect(started.status, started.text).toBe(201);
    const reached: string[] = [];
    for (const route of routes) {
      if (route.auth === 'public') continue;
      const path = pathFor(route).replace(target.session!, started.body.id);
      const body = route.example?.body !== undefined ? fillDeep(route.example.body) : route.body ? {} : undefined;
      const res = await cp.request(route.method, path, {
        token: started.body.caveat_token,
        ...(body !== undefined ? { body } : {}),
      });
      expect(res.status, `${route.method} ${route.path} → ${res.text}`).not.toBe(500);
      expect(res.status, `${route.method} ${route.path} → ${res.text}`).not.toBe(401);
      if (res.status === 403 && res.body?.code === 'CAPABILITY_REQUIRED') continue;
      reached.push(`${route.method} ${route.path}`);
    }
    expect(reached.sort()).toEqual([...REACHABLE].sort());
    // another session's channel and approvals are not its own: 404, as for any other tenant
    const other = await cp.request('GET', `/v1/sessions/${target.session}/messages`, {
      token: started.body.caveat_token,
    });
    expect(other.status).toBe(404);
    expect(
      (await cp.request('GET', `/v1/approvals/${target.approval}`, { token: started.body.caveat_token })).status,
    ).toBe(404);
  });

  it('organisation-level reads by another organisation show only its own data', async () => {
    const reads = routes.filter((r) => r.method === 'GET' && r.auth !== 'public' && !attackable(r));
    expect(reads.map((r) => r.path)).toEqual(
      expect.arrayContaining(['/v1/me', '/v1/workspaces', '/v1/tokens', '/v1/users']),
    );
    for (const route of reads) {
      const res = await cp.request('GET', route.path, { token: otherOrgOwner });
      for (const id of targetIds) expect(res.text, `${route.path} leaks ${id}`).not.toContain(id);
    }
  });
});
