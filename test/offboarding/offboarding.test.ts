import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JwtKeys } from '../../libs/auth/src';
import { browserSignIn, LocalIdp } from '../auth/local-idp';
import { aGateway, anOrganization, aToken, aUser, aWorkspace } from '../support/builders';
import { aReplicaOf, startApiControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aLinkChannel, LinkChannel } from '../support/link-channel';

/**
 * The commit of an offboarding drops what every replica cached of the person
 * before its answer leaves (the principal, session and gateway caches publish
 * their invalidations on the bus, and Redis hands a message to every
 * subscriber before it acknowledges the publish); the browser session, the
 * approvals and the review links are read from PostgreSQL on every use. So the
 * replica that offboarded refuses at once, and the other one as soon as it has
 * read the bus: a second is ample there, where the caches' own lifetimes
 * (10 s for sessions and gateways, 30 s for principals) would fail the test.
 */
const WITHIN_A_SECOND = { timeoutMs: 1_000 };

function refusal(res: TestResponse): string {
  return `${res.status} ${res.body?.code ?? ''}`.trim();
}

describe('offboarding a person on two replicas', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  let idp: LocalIdp;
  let ws: string;
  let organizationId: string;

  beforeAll(async () => {
    a = await startApiControlPlane();
    // the IdP listens on loopback, which server mode reaches only where allowed
    b = await aReplicaOf(a, { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' });
    idp = new LocalIdp('/idp');
    await idp.start();
    // as an operator sets AILERON_PUBLIC_URL to where people reach the control plane (the IdP sends browsers back
    // there), the same on every replica: it is also the issuer of the control plane's own JWTs
    for (const cp of [a, b]) cp.cp.config.publicUrl = a.url;
    await idp.trustedBy(a, { client_id: idp.clientId });
    ws = (await aWorkspace(a, a.ownerToken)).slug;
    organizationId = (await a.request('GET', '/v1/me')).body.organization.id;
    const policy = await a.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: { rules: [{ id: 'review-merges', effect: 'approval', tools: ['merge_*'] }] },
    });
    expect(policy.status, policy.text).toBe(200);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await idp?.stop();
  });

  /** A person an admin added, signed in through the IdP in a browser: the session cookie and its CSRF token. */
  async function aSignedInPerson(
    role: string,
  ): Promise<{ id: string; email: string; sub: string; headers: Record<string, string> }> {
    const user = await aUser(a, a.ownerToken, 'member');
    const put = await a.request('PUT', `/v1/workspaces/${ws}/members/${user.id}`, { body: { role } });
    expect(put.status, put.text).toBe(200);
    const sub = `idp-${randomBytes(4).toString('hex')}`;
    idp.person = { sub, email: user.email, email_verified: true, name: 'Leaving Person' };
    const signedIn = await browserSignIn(a);
    expect(signedIn.status, signedIn.text).toBe(302);
    const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0]!;
    expect(cookie).toMatch(/^aileron_session=/);
    const session = await a.request('GET', '/v1/auth/session', { token: null, headers: { cookie } });
    expect(session.body.principal.id, session.text).toBe(user.id);
    return { ...user, sub, headers: { cookie, 'x-aileron-csrf': session.body.csrf as string } };
  }

  it('ends their token, browser session, gateway, agent session, pending approval and review link on both replicas within a second; their audit history stays and verifies', async () => {
    const person = await aSignedInPerson('admin');
    const asPerson = (method: string, path: string, body?: unknown) =>
      a.request(method, path, { token: null, headers: person.headers, ...(body !== undefined ? { body } : {}) });

    // what they hold, each made with their browser session: a token (and one that token made), a gateway, an agent session
    const token = await asPerson('POST', '/v1/tokens', { name: 'laptop', role: 'admin', workspace: ws });
    expect(token.status, token.text).toBe(201);
    const madeWithTheirToken = await aToken(a, token.body.token, { name: 'ci', role: 'member', workspace: ws });
    const code = await asPerson('POST', `/v1/workspaces/${ws}/enrollment-codes`, {});
    expect(code.status, code.text).toBe(201);
    const enrolled = await a.request('POST', '/v1/gateway/enroll', {
      token: null,
      body: { enrollment_code: code.body.code, name: 'their-laptop' },
    });
    expect(enrolled.status, enrolled.text).toBe(201);
    const gateway = { id: enrolled.body.gateway_id as string, token: enrolled.body.token as string };
    const session = await asPerson('POST', `/v1/workspaces/${ws}/sessions`, { name: 'their-agent' });
    expect(session.status, session.text).toBe(201);
    // a call their gateway holds for a person's decision, asked in their name
    const approval = await a.request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: { server: 'github', tool: 'merge_pr', arguments: { n: 1 }, principal: person.email },
    });
    expect(approval.status, approval.text).toBe(201);
    // and a one-time review link sent to them, as an approver, for someone else's request
    const othersGateway = await aGateway(a, a.ownerToken, ws);
    const othersRequest = await a.request('POST', '/v1/gateway/approvals', {
      token: othersGateway.token,
      body: { server: 'github', tool: 'merge_pr', arguments: { n: 2 }, principal: 'someone-else@example.com' },
    });
    expect(othersRequest.status, othersRequest.text).toBe(201);
    const channel: LinkChannel = await aLinkChannel(a);
    let link: string;
    try {
      const sent = await a.request('POST', `/v1/approvals/${othersRequest.body.id}/links`, {
        body: { user: person.id },
      });
      expect(sent.status, sent.text).toBe(202);
      link = new URL(await channel.linkFor(othersRequest.body.id, person.id)).searchParams.get('link')!;
    } finally {
      await channel.close();
    }

    /** Each thing they hold, used on one replica: its status and code. */
    const probes: Record<string, (cp: TestControlPlane) => Promise<TestResponse>> = {
      'their API token': (cp) => cp.request('GET', `/v1/workspaces/${ws}`, { token: token.body.token }),
      'a token their token made': (cp) =>
        cp.request('GET', `/v1/workspaces/${ws}`, { token: madeWithTheirToken.token }),
      'their browser session': (cp) =>
        cp.request('GET', '/v1/me', { token: null, headers: { cookie: person.headers.cookie! } }),
      'their gateway': (cp) => cp.request('GET', '/v1/gateway/catalog', { token: gateway.token }),
      "their agent session's caveat token": (cp) =>
        cp.request('GET', `/v1/workspaces/${ws}/sessions/${session.body.id}/messages`, {
          token: session.body.caveat_token,
        }),
      'their review link': (cp) =>
        cp.request('GET', `/review/${othersRequest.body.id}/request?link=${encodeURIComponent(link)}`, { token: null }),
    };
    // every replica has each credential cached before the offboarding, as a busy installation would
    for (const cp of [a, b])
      for (const [what, probe] of Object.entries(probes)) expect((await probe(cp)).status, what).toBe(200);

    const deactivated = await a.request('POST', `/v1/users/${person.id}/deactivate`);
    expect(deactivated.status, deactivated.text).toBe(200);
    expect(deactivated.body).toMatchObject({ id: person.id, status: 'deactivated' });
    expect(deactivated.body.deactivated_at).toEqual(expect.any(String));

    const REFUSED: Record<string, string> = {
      'their API token': '401 TOKEN_REVOKED',
      'a token their token made': '401 TOKEN_REVOKED',
      'their browser session': '401 SESSION_INVALID',
      'their gateway': '401 GATEWAY_REVOKED',
      "their agent session's caveat token": '401 SESSION_ENDED',
      'their review link': '403 LINK_INVALID',
    };
    // the replica that offboarded them refuses at once
    for (const [what, probe] of Object.entries(probes)) expect(refusal(await probe(a)), what).toBe(REFUSED[what]);
    for (const [what, probe] of Object.entries(probes))
      await eventually(
        `${what} refused by the other replica`,
        async () => refusal(await probe(b)) === REFUSED[what],
        WITHIN_A_SECOND,
      );
    // their pending request is cancelled: nobody can approve it on either replica
    for (const cp of [a, b]) {
      const approve = await cp.request('POST', `/v1/approvals/${approval.body.id}/approve`, {
        token: a.ownerToken,
        body: {},
      });
      expect(refusal(approve)).toBe('409 APPROVAL_ALREADY_DECIDED');
      expect((await cp.request('GET', `/v1/approvals/${approval.body.id}`, { token: a.ownerToken })).body.status).toBe(
        'cancelled',
      );
    }
    // someone else's request they were sent a link for is still pending, for the others to decide
    expect((await a.request('GET', `/v1/approvals/${othersRequest.body.id}`)).body.status).toBe('pending');

    // they cannot come back in: neither through the browser nor with a token of the IdP's
    const again = await browserSignIn(a);
    expect([again.step, refusal(again)]).toEqual(['callback', '401 USER_DEACTIVATED']);
    const idpToken = idp.token({ sub: person.sub, email: person.email, email_verified: true });
    for (const cp of [a, b])
      expect(refusal(await cp.request('GET', '/v1/me', { token: idpToken }))).toBe('401 USER_DEACTIVATED');

    const users = await a.request('GET', '/v1/users?limit=200');
    expect(users.body.items.find((u: { id: string }) => u.id === person.id)).toMatchObject({
      status: 'deactivated',
      deactivated_at: deactivated.body.deactivated_at,
    });
    expect((await a.request('GET', `/v1/workspaces/${ws}/members?limit=200`)).text).not.toContain(person.id);
    // the gateways a person enrolled, by person
    const theirs = await a.request('GET', `/v1/workspaces/${ws}/gateways?enrolled_by=${person.id}`);
    expect(theirs.body.items).toEqual([
      expect.objectContaining({ id: gateway.id, enrolled_by: `user:${person.id}`, revoked_at: expect.any(String) }),
    ]);

    // the audit history stays: what they did, and each thing the offboarding ended, named and chained
    const did = await a.request('GET', `/v1/workspaces/${ws}/audit?actor=user:${person.id}&limit=200`);
    expect(did.body.items.map((r: { type: string }) => r.type)).toEqual(
      expect.arrayContaining(['token.created', 'gateway.enrollment_code_created', 'session.started']),
    );
    const offboarded = await a.request('GET', `/v1/audit?type=user.deactivated&limit=200`);
    expect(
      offboarded.body.items.find((r: { data: { user_id: string } }) => r.data.user_id === person.id),
    ).toMatchObject({
      actor: expect.stringMatching(/^token:/),
      data: {
        email: person.email,
        ended: {
          memberships: 1,
          api_tokens: 2,
          browser_sessions: 1,
          gateways: 1,
          agent_sessions: 1,
          approvals: 1,
          review_links: 1,
        },
      },
    });
    const ended = await a.request(
      'GET',
      `/v1/workspaces/${ws}/audit?type=member.removed,token.revoked,gateway.revoked,session.ended,approval.cancelled&limit=200`,
    );
    expect(ended.body.items.map((r: { type: string }) => r.type).sort()).toEqual([
      'approval.cancelled',
      'gateway.revoked',
      'member.removed',
      'session.ended',
      'token.revoked',
      'token.revoked',
    ]);
    for (const path of [`/v1/workspaces/${ws}/audit/verify`, '/v1/audit/verify'])
      expect((await b.request('GET', path, { token: a.ownerToken })).body, path).toMatchObject({ ok: true });
  });

  it("revokes a person's gateways in a workspace by person, on both replicas within a second; the person, their tokens and their gateways elsewhere stay", async () => {
    const person = await aUser(a, a.ownerToken, 'admin');
    const jwt = (await a.cp.app.get(JwtKeys).issue({ sub: `user:${person.id}`, org: organizationId })).token;
    const theirToken = await aToken(a, jwt, { name: 'their-ci', role: 'admin', workspace: ws });
    const elsewhere = (await aWorkspace(a, a.ownerToken)).slug;
    const gateways = {
      'enrolled with their code': await aGateway(a, jwt, ws),
      "enrolled with their token's code": await aGateway(a, theirToken.token, ws),
      'theirs in another workspace': await aGateway(a, jwt, elsewhere),
      "someone else's": await aGateway(a, a.ownerToken, ws),
    };
    const theirsHere = ['enrolled with their code', "enrolled with their token's code"];
    const poll = (cp: TestControlPlane, token: string) => cp.request('GET', '/v1/gateway/catalog', { token });
    // both replicas hold every gateway's credentials, as they do while the gateways poll
    for (const cp of [a, b])
      for (const [what, gateway] of Object.entries(gateways))
        expect((await poll(cp, gateway.token)).status, what).toBe(200);

    const revoke = (token: string, workspace = ws) =>
      a.request('POST', `/v1/workspaces/${workspace}/gateways/revoke`, { token, body: { enrolled_by: person.id } });
    // a member may not; an admin of another workspace does not see this one
    const member = await aToken(a, a.ownerToken, { role: 'member', workspace: ws });
    expect(refusal(await revoke(member.token))).toBe('403 FORBIDDEN');
    const neighbour = await aToken(a, a.ownerToken, { role: 'admin', workspace: elsewhere });
    expect(refusal(await revoke(neighbour.token))).toBe('404 WORKSPACE_NOT_FOUND');
    for (const gateway of Object.values(gateways)) expect((await poll(b, gateway.token)).status).toBe(200);

    const revoked = await revoke(a.ownerToken);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body.revoked.map((g: { id: string }) => g.id).sort()).toEqual(
      theirsHere.map((what) => gateways[what as keyof typeof gateways].id).sort(),
    );
    for (const view of revoked.body.revoked)
      expect(view).toMatchObject({
        revoked_at: expect.any(String),
        enrolled_by: expect.stringMatching(/^(user|token):/),
      });

    for (const what of theirsHere) {
      const { token } = gateways[what as keyof typeof gateways];
      expect(refusal(await poll(a, token)), what).toBe('401 GATEWAY_REVOKED');
      await eventually(
        `${what} refused by the other replica`,
        async () => refusal(await poll(b, token)) === '401 GATEWAY_REVOKED',
        WITHIN_A_SECOND,
      );
    }
    for (const cp of [a, b]) {
      expect((await poll(cp, gateways['theirs in another workspace'].token)).status).toBe(200);
      expect((await poll(cp, gateways["someone else's"].token)).status).toBe(200);
      // the person is not offboarded: they and their token still work
      expect((await cp.request('GET', `/v1/workspaces/${ws}`, { token: jwt })).status).toBe(200);
      expect((await cp.request('GET', `/v1/workspaces/${ws}`, { token: theirToken.token })).status).toBe(200);
    }

    // each revocation is recorded, naming who revoked and why
    const records = (await a.request('GET', `/v1/workspaces/${ws}/audit?type=gateway.revoked&limit=200`)).body.items
      .filter((r: { data: { reason?: string } }) => r.data.reason === 'revoked_by_person')
      .filter((r: { data: { gateway_id: string } }) =>
        theirsHere.some((what) => gateways[what as keyof typeof gateways].id === r.data.gateway_id),
      );
    expect(records).toHaveLength(2);
    for (const record of records) expect(record.actor).toMatch(/^token:/);
    // a second time there is nothing left to revoke
    expect((await revoke(a.ownerToken)).body).toEqual({ revoked: [] });
  });

  it('removing a person deletes the user; the records naming them stay and the chain still verifies', async () => {
    const person = await aUser(a, a.ownerToken, 'admin');
    const jwt = (await a.cp.app.get(JwtKeys).issue({ sub: `user:${person.id}`, org: organizationId })).token;
    const token = await aToken(a, jwt, { name: 'theirs', role: 'member' });
    for (const cp of [a, b]) expect((await cp.request('GET', '/v1/users', { token: jwt })).status).toBe(200);

    const removed = await b.request('DELETE', `/v1/users/${person.id}`, { token: a.ownerToken });
    expect(removed.status, removed.text).toBe(204);

    for (const cp of [a, b]) {
      expect(refusal(await cp.request('GET', '/v1/workspaces', { token: token.token }))).toBe('401 TOKEN_REVOKED');
      expect((await cp.request('GET', '/v1/users', { token: jwt })).status).toBe(401);
    }
    expect((await a.request('GET', '/v1/users?limit=200')).text).not.toContain(person.id);
    expect(refusal(await a.request('DELETE', `/v1/users/${person.id}`))).toBe('404 USER_NOT_FOUND');
    const audit = await a.request('GET', `/v1/audit?type=token.created,user.removed&limit=200`);
    const types = audit.body.items
      .filter(
        (r: { actor: string; data: { user_id?: string } }) =>
          r.actor === `user:${person.id}` || r.data.user_id === person.id,
      )
      .map((r: { type: string }) => r.type);
    expect(types.sort()).toEqual(['token.created', 'user.removed']);
    expect(audit.text).toContain(person.email);
    expect((await a.request('GET', '/v1/audit/verify')).body).toMatchObject({ ok: true });
  });

  it('refuses offboarding yourself, the last owner, someone above your role or of another organisation; reactivation lets them in without their memberships', async () => {
    const admin = await aUser(a, a.ownerToken, 'admin');
    const adminJwt = (await a.cp.app.get(JwtKeys).issue({ sub: `user:${admin.id}`, org: organizationId })).token;
    const adminsToken = await aToken(a, adminJwt, { name: 'admins', role: 'admin' });
    for (const credential of [adminJwt, adminsToken.token])
      expect(refusal(await a.request('POST', `/v1/users/${admin.id}/deactivate`, { token: credential }))).toBe(
        '403 SELF_OFFBOARDING_FORBIDDEN',
      );
    const owner = await aUser(a, a.ownerToken, 'owner');
    expect(refusal(await a.request('POST', `/v1/users/${owner.id}/deactivate`, { token: adminJwt }))).toBe(
      '403 ROLE_ESCALATION',
    );
    expect(refusal(await a.request('DELETE', `/v1/users/${owner.id}`, { token: adminJwt }))).toBe(
      '403 ROLE_ESCALATION',
    );

    const other = await anOrganization(a);
    const theirOwner = await aUser(a, other.token, 'owner');
    expect(refusal(await a.request('POST', `/v1/users/${theirOwner.id}/deactivate`))).toBe('404 USER_NOT_FOUND');
    expect(refusal(await a.request('POST', `/v1/users/${theirOwner.id}/deactivate`, { token: other.token }))).toBe(
      '409 LAST_OWNER',
    );
    const second = await aUser(a, other.token, 'owner');
    expect((await a.request('POST', `/v1/users/${theirOwner.id}/deactivate`, { token: other.token })).status).toBe(200);
    expect(refusal(await a.request('DELETE', `/v1/users/${second.id}`, { token: other.token }))).toBe('409 LAST_OWNER');

    // back in, with nothing of what they had
    const member = await aUser(a, a.ownerToken, 'member');
    expect(
      (await a.request('PUT', `/v1/workspaces/${ws}/members/${member.id}`, { body: { role: 'member' } })).status,
    ).toBe(200);
    const memberJwt = (await a.cp.app.get(JwtKeys).issue({ sub: `user:${member.id}`, org: organizationId })).token;
    expect((await a.request('POST', `/v1/users/${member.id}/deactivate`)).status).toBe(200);
    // a second deactivation changes nothing
    expect((await a.request('POST', `/v1/users/${member.id}/deactivate`)).body.status).toBe('deactivated');
    expect(refusal(await b.request('GET', '/v1/me', { token: memberJwt }))).toBe('401 USER_DEACTIVATED');
    const reactivated = await a.request('POST', `/v1/users/${member.id}/reactivate`);
    expect(reactivated.body).toMatchObject({ status: 'active', deactivated_at: null });
    for (const cp of [a, b]) {
      const me = await cp.request('GET', '/v1/me', { token: memberJwt });
      expect(me.status, me.text).toBe(200);
      expect(me.body.workspaces).toEqual([]);
    }
  });
});
