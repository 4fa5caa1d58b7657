import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalsService } from '../../libs/approvals/src';
import { aGateway, anOrganization, aWorkspace } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { aLinkChannel } from '../support/link-channel';
import { BACKENDS } from '../support/databases';
import { eventually } from '../support/eventually';
import { People } from './people';

type Gateway = { id: string; token: string };
type Call = { server: string; tool: string; arguments?: Record<string, unknown>; session?: string; principal: string };

/** The call every test asks about: a gateway wants to release a service on a developer's behalf. */
const CALL: Call = {
  server: 'deploy',
  tool: 'release',
  arguments: { service: 'payments', version: '2.4.1', canary: { percent: 10, regions: ['eu-west-1'] } },
  session: 'sess-1',
  principal: 'alice@example.com',
};

/**
 * `release` goes to the built-in route (the workspace's owners, admins and
 * approvers); a tool named after a route goes to that route (the built-in one
 * too while the workspace's routing does not define it); `status` is allowed
 * and `teardown` denied outright.
 */
const ROUTES = ['quick', 'pair', 'sre', 'leads', 'on-call'];
const POLICY = {
  rules: [
    { id: 'releases-need-approval', effect: 'approval', servers: ['deploy'], tools: ['release'] },
    ...ROUTES.map((route) => ({
      id: `via-${route}`,
      effect: 'approval',
      approval_route: route,
      servers: ['deploy'],
      tools: [route],
    })),
    { id: 'status-is-free', effect: 'allow', servers: ['deploy'], tools: ['status'] },
    { id: 'no-teardown', effect: 'deny', servers: ['deploy'], tools: ['teardown'] },
  ],
};

/** What one control plane offers a test: a workspace with the approval policy, routing and a gateway. */
function approvalsOn(cp: () => TestControlPlane) {
  const api = {
    async workspace(routing?: Record<string, unknown>): Promise<{ slug: string; gateway: Gateway }> {
      const { slug } = await aWorkspace(cp(), cp().ownerToken);
      const policy = await cp().request('PUT', `/v1/workspaces/${slug}/policy`, { body: POLICY });
      expect(policy.status, policy.text).toBe(200);
      if (routing) await api.route(slug, routing);
      return { slug, gateway: await aGateway(cp(), cp().ownerToken, slug) };
    },
    async route(slug: string, routing: Record<string, unknown>): Promise<number> {
      const put = await cp().request('PUT', `/v1/workspaces/${slug}/approval-routes`, { body: routing });
      expect(put.status, put.text).toBe(200);
      return put.body.version;
    },
    async ask(gateway: Gateway, call: Call = CALL): Promise<any> {
      const res = await cp().request('POST', '/v1/gateway/approvals', { token: gateway.token, body: call });
      expect(res.status, res.text).toBe(201);
      return res.body;
    },
    consume: (gateway: Gateway, id: string, call: Call = CALL) =>
      cp().request('POST', `/v1/gateway/approvals/${id}/consume`, { token: gateway.token, body: call }),
    approve: (id: string, token = cp().ownerToken, reason?: string) =>
      cp().request('POST', `/v1/approvals/${id}/approve`, { token, body: reason ? { reason } : {} }),
    deny: (id: string, token = cp().ownerToken, reason?: string) =>
      cp().request('POST', `/v1/approvals/${id}/deny`, { token, body: reason ? { reason } : {} }),
    get: (id: string, token = cp().ownerToken) => cp().request('GET', `/v1/approvals/${id}`, { token }),
    async audit(ws: string, type: string, approvalId: string): Promise<any[]> {
      const res = await cp().request('GET', `/v1/workspaces/${ws}/audit?type=${type}&limit=500`);
      expect(res.status, res.text).toBe(200);
      return res.body.events.filter((e: { data: { approval_id?: string } }) => e.data.approval_id === approvalId);
    },
    /** The events subscribers get (webhooks, the live stream) leave through the outbox. */
    async events(topic: string, approvalId: string): Promise<unknown[]> {
      return cp().cp.database.client.$queryRawUnsafe(
        `SELECT payload FROM outbox_messages WHERE topic = $1 AND payload->>'approval_id' = $2`,
        topic,
        approvalId,
      );
    },
  };
  return api;
}

function expectRefused(res: { status: number; body: any; text: string }, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.code, res.text).toBe(code);
}

describe.each(BACKENDS)('approvals on %s', (backend) => {
  let cp: TestControlPlane;
  const people = new People();
  const a = approvalsOn(() => cp);

  beforeAll(async () => {
    await people.start();
    // links reach people through a webhook receiver on 127.0.0.1, and the IdP's JWKS listens there: server mode refuses loopback unless allowed
    cp = await startTestControlPlane(backend, people.outboundEnv);
    await people.trustedBy(cp);
  });
  afterEach(() => resetClock(cp));
  afterAll(async () => {
    await cp?.close();
    await people.stop();
  });

  it('an approval lets exactly the approved call through, once; any other call is refused with what differs', async () => {
    const { gateway } = await a.workspace();
    const asked = await a.ask(gateway);
    expect(asked).toMatchObject({
      status: 'pending',
      server: 'deploy',
      tool: 'release',
      requester: CALL.principal,
      session: 'sess-1',
      rules: ['releases-need-approval'],
      quorum: 1,
    });
    expect(asked.review_url).toMatch(new RegExp(`/review/${asked.id}$`));

    const early = await a.consume(gateway, asked.id);
    expectRefused(early, 409, 'APPROVAL_NOT_USABLE');
    expect(early.body.detail).toMatch(/pending, not approved/);

    expect((await a.approve(asked.id)).body.status).toBe('approved');
    const different: Record<string, Call> = {
      arguments: { ...CALL, arguments: { ...CALL.arguments, canary: { percent: 100, regions: ['eu-west-1'] } } },
      session: { ...CALL, session: 'sess-other' },
      requester: { ...CALL, principal: 'mallory@example.com' },
      tool: { ...CALL, tool: 'hotfix' },
    };
    for (const [what, call] of Object.entries(different)) {
      const refused = await a.consume(gateway, asked.id, call);
      expectRefused(refused, 409, 'APPROVAL_NOT_USABLE');
      expect(refused.body.detail, what).toMatch(new RegExp(`differs from the approved one \\(${what}\\)`));
    }
    // a session-less call is another session too
    const { session: _session, ...sessionless } = CALL;
    expect((await a.consume(gateway, asked.id, sessionless)).body.detail).toMatch(/\(session\)/);

    // refusals did not use the approval up; key order is not part of "identical" (canonical JSON)
    const reordered = {
      ...CALL,
      arguments: { canary: { regions: ['eu-west-1'], percent: 10 }, version: '2.4.1', service: 'payments' },
    };
    const used = await a.consume(gateway, asked.id, reordered);
    expect(used.status, used.text).toBe(200);
    expect(used.body.consumed_at).not.toBeNull();

    const again = await a.consume(gateway, asked.id);
    expectRefused(again, 409, 'APPROVAL_NOT_USABLE');
    expect(again.body.detail).toMatch(/used already/);
    expect((await a.get(asked.id)).body).toMatchObject({ status: 'approved', consumed_at: used.body.consumed_at });
  });

  it('asks for arguments PostgreSQL cannot hold (NUL, a lone surrogate): shown with U+FFFD, and only those arguments get through', async () => {
    const { gateway } = await a.workspace();
    const odd = { ...CALL, arguments: { service: 'pay\u0000ments', ['note\u0000']: 'half \ud800 a pair' } };
    const asked = await a.ask(gateway, odd);
    expect(asked.arguments).toEqual({ service: 'pay\uFFFDments', ['note\uFFFD']: 'half \uFFFD a pair' });
    expect(await a.events('approval.requested', asked.id)).toHaveLength(1);
    expect((await a.approve(asked.id)).body.status).toBe('approved');
    // the approval is for the arguments as asked, not as shown
    const shown = { ...CALL, arguments: asked.arguments };
    expect((await a.consume(gateway, asked.id, shown)).body.detail).toMatch(/\(arguments\)/);
    expect((await a.consume(gateway, asked.id, odd)).status).toBe(200);
    // a NUL where no U+FFFD may stand in (the session the approval binds) is the caller's to fix
    const nulSession = await cp.request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: { ...CALL, session: 'sess\u0000' },
    });
    expectRefused(nulSession, 400, 'TEXT_NOT_STORABLE');
    // arguments nested past what their record holds are the caller's to fix, not a 500 from the walks over them
    const deep = `{"server":"${CALL.server}","tool":"${CALL.tool}","principal":"${CALL.principal}","arguments":{"a":${'['.repeat(3_000)}${']'.repeat(3_000)}}}`;
    for (const path of ['/v1/gateway/approvals', `/v1/gateway/approvals/${asked.id}/consume`]) {
      const refused = await fetch(`${cp.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gateway.token}`, 'content-type': 'application/json' },
        body: deep,
      });
      const problem = (await refused.json()) as { code?: string; errors?: { path: string; message: string }[] };
      expect(refused.status, JSON.stringify(problem)).toBe(400);
      expect(problem.code).toBe('VALIDATION_FAILED');
      expect(problem.errors).toContainEqual({ path: 'body.arguments', message: 'nests deeper than 63 levels' });
    }
  });

  it('nobody decides their own request, whether it names them by e-mail or by user id', async () => {
    const { slug, gateway } = await a.workspace();
    const alice = await people.aPerson(cp, slug, 'approver');
    const bob = await people.aPerson(cp, slug, 'approver');
    for (const principal of [alice.email, alice.email.toUpperCase(), `user:${alice.id}`]) {
      const asked = await a.ask(gateway, { ...CALL, principal });
      expectRefused(await a.approve(asked.id, alice.token), 403, 'SELF_APPROVAL_FORBIDDEN');
      expectRefused(await a.deny(asked.id, alice.token), 403, 'SELF_APPROVAL_FORBIDDEN');
      expect((await a.get(asked.id)).body).toMatchObject({ status: 'pending', decisions: [] });
      // someone else may
      const approved = await a.approve(asked.id, bob.token, 'checked the diff');
      expect(approved.body).toMatchObject({
        status: 'approved',
        reason: 'checked the diff',
        decisions: [{ approver: `user:${bob.id}`, decision: 'approve', via: 'rest' }],
      });
    }
  });

  it('nobody decides their own request with an API token they made, or one made with it', async () => {
    const { slug, gateway } = await a.workspace();
    const ada = await people.aPerson(cp, slug, 'admin');
    const mint = async (token: string, role: string) => {
      const res = await cp.request('POST', '/v1/tokens', { token, body: { name: 'mine', role, workspace: slug } });
      expect(res.status, res.text).toBe(201);
      return { id: res.body.id as string, token: res.body.token as string };
    };
    const hers = await mint(ada.token, 'admin');
    const madeWithHers = await mint(hers.token, 'approver');
    for (const principal of [`user:${ada.id}`, ada.email]) {
      const asked = await a.ask(gateway, { ...CALL, principal });
      for (const token of [hers, madeWithHers])
        expectRefused(await a.approve(asked.id, token.token), 403, 'SELF_APPROVAL_FORBIDDEN');
      // a token someone else made still decides
      expect((await a.approve(asked.id, cp.ownerToken)).body.status).toBe('approved');
    }
    // the other way round: an agent runs with her token (the pool names it `token:<id>`), she approves with her own login or another token of hers
    for (const agentToken of [hers, madeWithHers]) {
      const asked = await a.ask(gateway, { ...CALL, principal: `token:${agentToken.id}` });
      for (const approver of [ada.token, hers.token, madeWithHers.token])
        expectRefused(await a.approve(asked.id, approver), 403, 'SELF_APPROVAL_FORBIDDEN');
      expect((await a.get(asked.id)).body).toMatchObject({ status: 'pending', decisions: [] });
      const bob = await people.aPerson(cp, slug, 'approver');
      expect((await a.approve(asked.id, bob.token)).body.status).toBe('approved');
    }
  });

  it("only the route's approvers decide: a member, a gateway and an owner outside the route are refused", async () => {
    const { slug, gateway } = await a.workspace();
    const member = await people.aPerson(cp, slug, 'member');
    const asked = await a.ask(gateway);
    expectRefused(await a.approve(asked.id, member.token), 403, 'NOT_AN_APPROVER');
    expectRefused(await a.approve(asked.id, gateway.token), 403, 'GATEWAY_TOKEN_NOT_ALLOWED');

    const { slug: narrow, gateway: narrowGateway } = await a.workspace({
      routes: { leads: { approvers: [{ role: 'approver' }] } },
    });
    const lead = await people.aPerson(cp, narrow, 'approver');
    const routed = await a.ask(narrowGateway, { ...CALL, tool: 'leads' });
    expect(routed.route).toBe('leads');
    // an owner runs the workspace, but this route names only approvers
    expectRefused(await a.approve(routed.id, cp.ownerToken), 403, 'NOT_AN_APPROVER');
    expect((await a.get(routed.id)).body.decisions).toEqual([]);
    expect((await a.approve(routed.id, lead.token)).body.status).toBe('approved');
  });

  it('a quorum of two needs two different approvers; a deny ends it for good', async () => {
    const { slug, gateway } = await a.workspace();
    const [alice, bob, carol] = [
      await people.aPerson(cp, slug),
      await people.aPerson(cp, slug),
      await people.aPerson(cp, slug),
    ];
    // people by e-mail or by id; members of the workspace, approvers only through this route
    await a.route(slug, {
      routes: { pair: { approvers: [{ user: alice.email }, { user: bob.id }, { user: carol.email }], quorum: 2 } },
    });

    const asked = await a.ask(gateway, { ...CALL, tool: 'pair' });
    expect(asked.quorum).toBe(2);
    const first = await a.approve(asked.id, alice.token);
    expect(first.body).toMatchObject({
      status: 'pending',
      decisions: [{ approver: `user:${alice.id}`, decision: 'approve' }],
    });
    expectRefused(await a.approve(asked.id, alice.token), 409, 'ALREADY_VOTED');
    expect((await a.consume(gateway, asked.id, { ...CALL, tool: 'pair' })).status).toBe(409);
    const second = await a.approve(asked.id, bob.token);
    expect(second.body.status).toBe('approved');
    expect(second.body.decisions.map((d: { approver: string }) => d.approver)).toEqual([
      `user:${alice.id}`,
      `user:${bob.id}`,
    ]);

    const denied = await a.ask(gateway, { ...CALL, tool: 'pair', session: 'sess-2' });
    expect((await a.approve(denied.id, alice.token)).body.status).toBe('pending');
    const no = await a.deny(denied.id, bob.token, 'not during the freeze');
    expect(no.body).toMatchObject({ status: 'denied', reason: 'not during the freeze' });
    expectRefused(await a.approve(denied.id, carol.token), 409, 'APPROVAL_ALREADY_DECIDED');
    expectRefused(await a.deny(denied.id, carol.token), 409, 'APPROVAL_ALREADY_DECIDED');
    const refused = await a.consume(gateway, denied.id, { ...CALL, tool: 'pair', session: 'sess-2' });
    expectRefused(refused, 409, 'APPROVAL_NOT_USABLE');
    expect(refused.body.detail).toMatch(/denied, not approved/);
  });

  it('routes to a group, a role and whoever is on call; an override covering now changes who that is', async () => {
    const { slug, gateway } = await a.workspace();
    const [dave, erin, frank] = [
      await people.aPerson(cp, slug),
      await people.aPerson(cp, slug),
      await people.aPerson(cp, slug),
    ];
    const gina = await people.aPerson(cp, slug, 'approver');
    const now = Date.now();
    const routing = {
      routes: {
        sre: { approvers: [{ group: 'sre' }] },
        leads: { approvers: [{ role: 'approver' }] },
        'on-call': { approvers: [{ rotation: 'primary' }] },
      },
      groups: { sre: [dave.email] },
      // the first shift (erin's) started an hour ago; frank's is tomorrow
      rotations: {
        primary: {
          period: 'daily',
          start: new Date(now - 3600_000).toISOString(),
          members: [erin.email, frank.id],
          overrides: [] as unknown[],
        },
      },
    };
    expect(await a.route(slug, routing)).toBe(1);

    const bySre = await a.ask(gateway, { ...CALL, tool: 'sre' });
    expectRefused(await a.approve(bySre.id, erin.token), 403, 'NOT_AN_APPROVER');
    expectRefused(await a.approve(bySre.id, cp.ownerToken), 403, 'NOT_AN_APPROVER');
    expect((await a.approve(bySre.id, dave.token)).body.status).toBe('approved');

    const byRole = await a.ask(gateway, { ...CALL, tool: 'leads' });
    expectRefused(await a.approve(byRole.id, dave.token), 403, 'NOT_AN_APPROVER');
    expect((await a.approve(byRole.id, gina.token)).body.status).toBe('approved');

    const onCall = await a.ask(gateway, { ...CALL, tool: 'on-call' });
    expectRefused(await a.approve(onCall.id, frank.token), 403, 'NOT_AN_APPROVER');
    expect((await a.approve(onCall.id, erin.token)).body.status).toBe('approved');

    routing.rotations.primary.overrides = [
      { from: new Date(now - 60_000).toISOString(), to: new Date(now + 3600_000).toISOString(), member: frank.id },
    ];
    expect(await a.route(slug, routing)).toBe(2);
    const covered = await a.ask(gateway, { ...CALL, tool: 'on-call', session: 'sess-2' });
    expectRefused(await a.approve(covered.id, erin.token), 403, 'NOT_AN_APPROVER');
    expect((await a.approve(covered.id, frank.token)).body.status).toBe('approved');
  });

  it('refuses a routing document whose route names a missing group, naming the path, and keeps the one in force', async () => {
    const { slug } = await a.workspace({ routes: { sre: { approvers: [{ role: 'admin' }] } } });
    const bad = await cp.request('PUT', `/v1/workspaces/${slug}/approval-routes`, {
      body: {
        routes: { sre: { approvers: [{ role: 'admin' }, { group: 'platform' }] } },
        groups: { sre: ['x@example.com'] },
      },
    });
    expectRefused(bad, 400, 'VALIDATION_FAILED');
    expect(bad.body.errors).toEqual([
      { path: 'body.routes.sre.approvers[1].group', message: expect.stringContaining('"platform"') },
    ]);
    const current = await cp.request('GET', `/v1/workspaces/${slug}/approval-routes`);
    expect(current.body).toMatchObject({
      version: 1,
      document: { routes: { sre: { approvers: [{ role: 'admin' }] } } },
    });
  });

  it('records every transition in the audit log and as an event, once', async () => {
    const { slug, gateway } = await a.workspace();
    const approved = await a.ask(gateway);
    await a.approve(approved.id, cp.ownerToken, 'looks right');
    const denied = await a.ask(gateway, { ...CALL, session: 'sess-2' });
    await a.deny(denied.id, cp.ownerToken, 'wrong version');
    const owner = (await cp.request('GET', '/v1/me')).body.principal.id as string;

    const [requested] = await a.audit(slug, 'approval.requested', approved.id);
    expect(requested).toMatchObject({
      actor: `gateway:${gateway.id}`,
      data: { server: 'deploy', tool: 'release', requester: CALL.principal, rules: ['releases-need-approval'] },
    });
    expect(await a.audit(slug, 'approval.approved', approved.id)).toEqual([
      expect.objectContaining({ actor: `token:${owner}`, data: expect.objectContaining({ reason: 'looks right' }) }),
    ]);
    expect(await a.audit(slug, 'approval.denied', denied.id)).toEqual([
      expect.objectContaining({ actor: `token:${owner}`, data: expect.objectContaining({ reason: 'wrong version' }) }),
    ]);
    expect(await a.audit(slug, 'approval.approved', denied.id)).toEqual([]);
    for (const [topic, id] of [
      ['approval.requested', approved.id],
      ['approval.approved', approved.id],
      ['approval.requested', denied.id],
      ['approval.denied', denied.id],
    ]) {
      expect(await a.events(topic!, id!), `${topic} ${id}`).toHaveLength(1);
    }
  });

  it('asks for approval only where the policy says so; other tenants see nothing and change nothing', async () => {
    const { slug, gateway } = await a.workspace();
    for (const [tool, decision] of [
      ['status', 'allow'],
      ['teardown', 'deny'],
    ]) {
      const res = await cp.request('POST', '/v1/gateway/approvals', { token: gateway.token, body: { ...CALL, tool } });
      expectRefused(res, 409, 'APPROVAL_NOT_REQUIRED');
      expect(res.body.detail).toContain(`"${decision}"`);
    }
    const asked = await a.ask(gateway);
    const inbox = await cp.request('GET', `/v1/workspaces/${slug}/approvals?status=pending`);
    expect(inbox.body.approvals.map((r: { id: string }) => r.id)).toEqual([asked.id]);

    const stranger = await anOrganization(cp);
    expectRefused(await a.get(asked.id, stranger.token), 404, 'APPROVAL_NOT_FOUND');
    expectRefused(await a.approve(asked.id, stranger.token), 404, 'APPROVAL_NOT_FOUND');
    expectRefused(await a.deny(asked.id, stranger.token), 404, 'APPROVAL_NOT_FOUND');
    const strangerUser = (
      await cp.request('POST', '/v1/users', {
        token: stranger.token,
        body: { email: `s-${Date.now()}@example.com`, role: 'admin' },
      })
    ).body.id;
    expectRefused(
      await cp.request('POST', `/v1/approvals/${asked.id}/links`, {
        token: stranger.token,
        body: { user: strangerUser },
      }),
      404,
      'APPROVAL_NOT_FOUND',
    );
    // another gateway of the same workspace neither reads nor uses it
    const neighbour = await aGateway(cp, cp.ownerToken, slug);
    expectRefused(await a.get(asked.id, neighbour.token), 404, 'APPROVAL_NOT_FOUND');
    // once approved, neither another gateway of the workspace nor another workspace's can use it
    await a.approve(asked.id);
    const { gateway: elsewhere } = await a.workspace();
    expectRefused(await a.consume(neighbour, asked.id), 404, 'APPROVAL_NOT_FOUND');
    expectRefused(await a.consume(elsewhere, asked.id), 404, 'APPROVAL_NOT_FOUND');
    expect((await a.get(asked.id)).body).toMatchObject({
      status: 'approved',
      consumed_at: null,
      decisions: [{ approver: expect.stringMatching(/^token:/) }],
    });
    expect((await a.consume(gateway, asked.id)).status).toBe(200);
  });

  it('a one-time link goes to its approver, never to the caller, shows the request and decides once, for that request only', async () => {
    const { slug, gateway } = await a.workspace();
    const approver = await people.aPerson(cp, slug, 'approver');
    const asked = await a.ask(gateway);
    // without an endpoint that carries links to people, nothing is sent and the caller is told why
    expectRefused(
      await cp.request('POST', `/v1/approvals/${asked.id}/links`, { body: { user: approver.id } }),
      409,
      'LINK_CHANNEL_MISSING',
    );
    const channel = await aLinkChannel(cp);
    try {
      const sent = await cp.request('POST', `/v1/approvals/${asked.id}/links`, { body: { user: approver.id } });
      expect(sent.status, sent.text).toBe(202);
      expect(sent.body).toEqual({ user: approver.id, expires_at: asked.expires_at, channels: 1 });
      expect(sent.text).not.toContain('ail_lnk_');
      const url = new URL(await channel.linkFor(asked.id, approver.id));
      expect(url.pathname).toBe(`/review/${asked.id}`);
      const link = url.searchParams.get('link')!;
      expect(link).toMatch(/^ail_lnk_/);
      // the event stream and the audit log say a link was sent, to whom, and never hold the link
      const audit = await cp.request('GET', `/v1/workspaces/${slug}/audit?limit=200`);
      const record = audit.body.events.find((e: { type: string }) => e.type === 'approval.link');
      expect(record, audit.text).toBeDefined();
      expect(JSON.stringify(record)).toContain(approver.id);
      expect(audit.text).not.toContain(link);

      const shown = await cp.request('GET', `/review/${asked.id}/request?link=${encodeURIComponent(link)}`, {
        token: null,
      });
      expect(shown.status, shown.text).toBe(200);
      expect(shown.body).toMatchObject({
        id: asked.id,
        server: 'deploy',
        tool: 'release',
        arguments: CALL.arguments,
        status: 'pending',
      });

      const decided = await cp.request('POST', `/review/${asked.id}/decision`, {
        token: null,
        body: { link, decision: 'approve', reason: 'from chat' },
      });
      expect(decided.status, decided.text).toBe(200);
      expect(decided.body).toMatchObject({
        status: 'approved',
        decisions: [{ approver: `user:${approver.id}`, decision: 'approve', reason: 'from chat', via: 'link' }],
      });
      expectRefused(
        await cp.request('POST', `/review/${asked.id}/decision`, { token: null, body: { link, decision: 'deny' } }),
        403,
        'LINK_USED',
      );
      // decided: no more links for it
      expectRefused(
        await cp.request('POST', `/v1/approvals/${asked.id}/links`, { body: { user: approver.id } }),
        409,
        'APPROVAL_ALREADY_DECIDED',
      );

      const other = await a.ask(gateway, { ...CALL, session: 'sess-2' });
      expect(
        (await cp.request('POST', `/v1/approvals/${other.id}/links`, { body: { user: approver.id } })).status,
      ).toBe(202);
      const otherLink = new URL(await channel.linkFor(other.id, approver.id)).searchParams.get('link')!;
      const third = await a.ask(gateway, { ...CALL, session: 'sess-3' });
      expectRefused(
        await cp.request('GET', `/review/${third.id}/request?link=${encodeURIComponent(otherLink)}`, { token: null }),
        403,
        'LINK_INVALID',
      );
      expectRefused(
        await cp.request('POST', `/review/${third.id}/decision`, {
          token: null,
          body: { link: otherLink, decision: 'approve' },
        }),
        403,
        'LINK_INVALID',
      );
      expect((await a.get(third.id)).body.status).toBe('pending');
      // the link was not spent on the wrong request
      expect(
        (
          await cp.request('POST', `/review/${other.id}/decision`, {
            token: null,
            body: { link: otherLink, decision: 'deny' },
          })
        ).body.status,
      ).toBe('denied');

      // a link for someone who may not decide is not made
      const member = await people.aPerson(cp, slug, 'member');
      expectRefused(
        await cp.request('POST', `/v1/approvals/${third.id}/links`, { body: { user: member.id } }),
        403,
        'NOT_AN_APPROVER',
      );
    } finally {
      await channel.close();
    }
  });

  it('a gateway cannot send itself, or anyone, a review link, nor decide: its own request stays pending', async () => {
    const { slug, gateway } = await a.workspace();
    const approver = await people.aPerson(cp, slug, 'approver');
    const asked = await a.ask(gateway);
    for (const res of [
      await cp.request('POST', `/v1/approvals/${asked.id}/links`, {
        token: gateway.token,
        body: { user: approver.id },
      }),
      await a.approve(asked.id, gateway.token),
      await a.deny(asked.id, gateway.token),
    ]) {
      expect([403, 404], res.text).toContain(res.status);
      expect(res.text).not.toContain('ail_lnk_');
    }
    expect((await a.get(asked.id)).body).toMatchObject({ status: 'pending', decisions: [] });
  });

  it('an approval not used before it expires lets nothing through, and an unanswered request expires on its own', async () => {
    const { slug, gateway } = await a.workspace({
      routes: { quick: { approvers: [{ role: 'owner' }], expires_in_seconds: 30 } },
    });
    const approved = await a.ask(gateway, { ...CALL, tool: 'quick' });
    expect((await a.approve(approved.id)).body.status).toBe('approved');
    const unanswered = await a.ask(gateway, { ...CALL, tool: 'quick', session: 'sess-2' });
    expect((await a.get(unanswered.id)).body.status).toBe('pending');
    // the route's 30 s pass
    advanceClock(cp, 31_000);

    const late = await a.consume(gateway, approved.id, { ...CALL, tool: 'quick' });
    expectRefused(late, 409, 'APPROVAL_NOT_USABLE');
    expect(late.body.detail).toMatch(/expired/);

    expect((await a.get(unanswered.id)).body.status).toBe('expired');
    const undecidable = await a.approve(unanswered.id);
    expect(undecidable.status, undecidable.text).toBe(409);
    expect(['APPROVAL_EXPIRED', 'APPROVAL_ALREADY_DECIDED']).toContain(undecidable.body.code);
    const inbox = await cp.request('GET', `/v1/workspaces/${slug}/approvals?status=pending`);
    expect(inbox.body.approvals).toEqual([]);
    const [expired] = await eventually('the expiry sweep', async () => {
      const found = await a.audit(slug, 'approval.expired', unanswered.id);
      return found.length > 0 && found;
    });
    expect(expired).toMatchObject({ actor: 'system' });
    expect(await a.events('approval.expired', unanswered.id)).toHaveLength(1);
    expect(await a.events('approval.expired', approved.id)).toHaveLength(0);
  });
});

describe('approvals across PostgreSQL replicas', () => {
  let first: TestControlPlane;
  let second: TestControlPlane;
  const a = approvalsOn(() => first);
  beforeAll(async () => {
    first = await startTestControlPlane('postgres');
    const database = first.cp.config.database;
    if (database.kind !== 'postgres') throw new Error('expected postgres');
    second = await startTestControlPlane('postgres', { DATABASE_URL: database.url });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it('two executions racing for one approval: exactly one runs (20 rounds, one on each replica)', async () => {
    const { gateway } = await a.workspace();
    for (let round = 0; round < 20; round++) {
      const call = { ...CALL, session: `race-${round}` };
      const asked = await a.ask(gateway, call);
      await a.approve(asked.id);
      const path = `/v1/gateway/approvals/${asked.id}/consume`;
      const results = await Promise.all(
        [first, second].map((replica) => replica.request('POST', path, { token: gateway.token, body: call })),
      );
      expect(results.map((r) => r.status).sort(), `round ${round}`).toEqual([200, 409]);
      expect(results.find((r) => r.status === 409)!.body.detail).toMatch(/used already/);
    }
  });

  it('every long-poll on one replica answers `approved` when the decision is made on the other', async () => {
    const { gateway } = await a.workspace();
    const asked = await a.ask(gateway);
    const reader = (await first.request('POST', '/v1/tokens', { body: { name: 'watcher', role: 'member' } })).body
      .token as string;
    let answered = 0;
    const waits = [gateway.token, gateway.token, first.ownerToken, reader].map(async (token) => {
      const res = await second.request('GET', `/v1/approvals/${asked.id}?wait=30`, { token });
      answered++;
      return res;
    });
    // the waiters are parked on the other replica before anyone decides
    await eventually('four parked waiters', () => second.cp.app.get(ApprovalsService).waiting.sleeping(asked.id) === 4);
    expect(answered).toBe(0);
    expect((await a.approve(asked.id)).body.status).toBe('approved');
    const results = await Promise.all(waits);
    for (const res of results) expect(res.body).toMatchObject({ id: asked.id, status: 'approved' });
  });
});

describe('approval expiry across a restart (PostgreSQL)', () => {
  let before: TestControlPlane;
  const after: TestControlPlane[] = [];
  afterAll(async () => {
    for (const replica of after) await replica.close();
    await before?.close();
  });

  it('a request that lapses while no control plane runs is expired afterwards, recorded once, and cannot be approved', async () => {
    before = await startTestControlPlane('postgres');
    const database = before.cp.config.database;
    if (database.kind !== 'postgres') throw new Error('expected postgres');
    const a = approvalsOn(() => before);
    const { slug, gateway } = await a.workspace({
      routes: { quick: { approvers: [{ role: 'owner' }], expires_in_seconds: 30 } },
    });
    const asked = await a.ask(gateway, { ...CALL, tool: 'quick' });
    await before.cp.close();

    // two replicas come back once the request's 30 s have passed; both sweep for lapsed requests
    after.push(await startTestControlPlane('postgres', { DATABASE_URL: database.url }));
    after.push(await startTestControlPlane('postgres', { DATABASE_URL: database.url }));
    for (const replica of after) advanceClock(replica, 31_000);
    const b = approvalsOn(() => after[0]!);
    const request = (method: string, path: string, body?: unknown) =>
      after[0]!.request(method, path, { token: before.ownerToken, body });

    expect((await request('GET', `/v1/approvals/${asked.id}`)).body.status).toBe('expired');
    const refused = await request('POST', `/v1/approvals/${asked.id}/approve`, {});
    expect(refused.status, refused.text).toBe(409);
    const audited = async () => {
      const res = await request('GET', `/v1/workspaces/${slug}/audit?type=approval.expired`);
      return res.body.events.filter((e: { data: { approval_id: string } }) => e.data.approval_id === asked.id);
    };
    await eventually('the expiry sweep', async () => (await audited()).length > 0);
    // more sweeps, on both replicas, find nothing left to expire and record nothing more
    for (const replica of after) expect(await replica.cp.app.get(ApprovalsService).expireDue()).toBe(0);
    expect(await audited()).toHaveLength(1);
    expect(await b.events('approval.expired', asked.id)).toHaveLength(1);
    expect((await request('GET', `/v1/approvals/${asked.id}`)).body).toMatchObject({
      status: 'expired',
      decisions: [],
    });
  });
});
