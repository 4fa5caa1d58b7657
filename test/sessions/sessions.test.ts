import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attenuateCaveatToken, AgentSessionsService } from '../../libs/sessions/src';
import { aGateway, aToken, aWorkspace } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { aReplicaOf, startApiControlPlane, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';

/**
 * Each replica remembers a live session for 10 s; refused well before that,
 * the change reached the other replica on the bus, not by the entry lapsing.
 */
const BEFORE_THE_CACHE_LAPSES = { timeoutMs: 5_000 };

describe('agent sessions (embedded)', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startApiControlPlane();
  });
  afterAll(async () => cp?.close());

  it('a member starts a session: default caps, a caveat token shown once, listed, audited', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const started = await cp.request('POST', '/v1/sessions', {
      token: member.token,
      body: { workspace: ws.slug, name: 'fix the build', agent: 'claude' },
    });
    expect(started.status, started.text).toBe(201);
    expect(started.body.caveat_token).toMatch(/^ail_ct_[A-Za-z0-9_-]+$/);
    expect(started.body.caps).toEqual(['actions:list', 'actions:run', 'approvals:poll', 'comms']);
    const ttl = new Date(started.body.expires_at).getTime() - Date.now();
    expect(ttl).toBeGreaterThan(7.9 * 3600_000);
    expect(ttl).toBeLessThanOrEqual(8 * 3600_000);

    const listed = await cp.request('GET', `/v1/sessions?workspace=${ws.slug}`, { token: member.token });
    expect(listed.status).toBe(200);
    expect(listed.body.sessions).toEqual([
      expect.objectContaining({
        id: started.body.id,
        name: 'fix the build',
        agent: 'claude',
        state: 'live',
        created_by: `token:${member.id}`,
      }),
    ]);
    expect(listed.text).not.toContain(started.body.caveat_token);
    const audit = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=session.started`);
    expect(audit.body.events).toEqual([expect.objectContaining({ actor: `token:${member.id}` })]);
    expect(audit.text).not.toContain(started.body.caveat_token);
  });

  it('refuses what a session may not be: caps outside the set, a TTL over 7 days, an auditor, a workspace the caller cannot see', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const bad = [
      { workspace: ws.slug, caps: ['vault:read'] },
      { workspace: ws.slug, ttl_seconds: 7 * 24 * 3600 + 1 },
      { workspace: ws.slug, caveats: { tools: ['bad glob!'] } },
      // a sandbox by another spelling than its name would reach none
      { workspace: ws.slug, caps: ['sandbox:use'], caveats: { sandbox: 'My_Box' } },
      { workspace: ws.slug, caps: ['sandbox:use'], caveats: { sandbox: 'box-' } },
      { workspace: ws.slug, extra: true },
    ];
    for (const body of bad) {
      const res = await cp.request('POST', '/v1/sessions', { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    const auditor = await aToken(cp, cp.ownerToken, { role: 'auditor', workspace: ws.slug });
    expect(
      (await cp.request('POST', '/v1/sessions', { token: auditor.token, body: { workspace: ws.slug } })).status,
    ).toBe(403);
    const other = await aWorkspace(cp, cp.ownerToken);
    const limited = await aToken(cp, cp.ownerToken, { role: 'member', workspace: other.slug });
    expect(
      (await cp.request('POST', '/v1/sessions', { token: limited.token, body: { workspace: ws.slug } })).status,
    ).toBe(404);
  });

  it('a leaked session token reaches its own channel and approvals only: every admin surface is 403 CAPABILITY_REQUIRED', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const { body } = await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } });
    const token = body.caveat_token as string;
    const refused = [
      ['GET', `/v1/workspaces/${ws.slug}/secrets`],
      ['PUT', `/v1/workspaces/${ws.slug}/policy`, { rules: [] }],
      ['GET', `/v1/workspaces/${ws.slug}/audit`],
      ['POST', '/v1/tokens', { name: 'x', role: 'owner' }],
      ['POST', '/v1/sessions', { workspace: ws.slug }],
      ['POST', `/v1/workspaces/${ws.slug}/enrollment-codes`, {}],
      ['GET', `/v1/sessions/${body.id}`],
      ['DELETE', `/v1/sessions/${body.id}`],
      ['GET', '/v1/me'],
    ] as const;
    for (const [method, path, payload] of refused) {
      const res = await cp.request(method, path, { token, ...(payload ? { body: payload } : {}) });
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(403);
      expect(res.body.code, `${method} ${path}`).toBe('CAPABILITY_REQUIRED');
    }
    // its own channel works
    expect(
      (await cp.request('POST', `/v1/sessions/${body.id}/messages`, { token, body: { text: 'hello' } })).status,
    ).toBe(201);
  });

  it("refuses a NUL in a session's name or an agent's message with 400 TEXT_NOT_STORABLE, and keeps a lone surrogate as U+FFFD", async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const named = await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug, name: 'fix\u0000it' } });
    expect(named.status, named.text).toBe(400);
    expect(named.body.code).toBe('TEXT_NOT_STORABLE');
    const session = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;
    const path = `/v1/sessions/${session.id}/messages`;
    const nul = await cp.request('POST', path, { token: session.caveat_token, body: { text: 'done\u0000' } });
    expect(nul.status, nul.text).toBe(400);
    expect(nul.body.code).toBe('TEXT_NOT_STORABLE');
    const lone = await cp.request('POST', path, { token: session.caveat_token, body: { text: 'half \ud800' } });
    expect(lone.status, lone.text).toBe(201);
    expect(lone.body.text).toBe('half \uFFFD');
    // nothing of the refused ones was kept
    const read = await cp.request('GET', path);
    expect(read.body.messages.map((m: { text: string }) => m.text)).toEqual(['half \uFFFD']);
  });

  it('the channel: the agent writes, a person answers, the agent long-polls the answer; session A cannot read B', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const a = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;
    const b = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;
    const question = await cp.request('POST', `/v1/sessions/${a.id}/messages`, {
      token: a.caveat_token,
      body: { text: 'May I drop the table?', level: 'question' },
    });
    expect(question.status, question.text).toBe(201);
    expect(question.body).toMatchObject({ direction: 'agent', level: 'question', author: `session:${a.id}` });

    const waiting = cp.request('GET', `/v1/sessions/${a.id}/messages?wait=60`, { token: a.caveat_token });
    await eventually('the long-poll parked', () => cp.cp.app.get(AgentSessionsService).waiting.sleeping(a.id) === 1);
    const answer = await cp.request('POST', `/v1/sessions/${a.id}/messages`, { body: { text: 'No. Rename it.' } });
    expect(answer.status, answer.text).toBe(201);
    const got = await waiting;
    expect(got.status, got.text).toBe(200);
    expect(got.body.messages).toEqual([expect.objectContaining({ direction: 'people', text: 'No. Rename it.' })]);
    // nothing newer yet: an immediate poll after it is empty
    expect(
      (await cp.request('GET', `/v1/sessions/${a.id}/messages?after=${answer.body.id}`, { token: a.caveat_token })).body
        .messages,
    ).toEqual([]);
    // people read the whole conversation
    const all = await cp.request('GET', `/v1/sessions/${a.id}/messages`);
    expect(all.body.messages.map((m: { text: string }) => m.text)).toEqual(['May I drop the table?', 'No. Rename it.']);
    const events = await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=session.message`);
    expect(events.body.events).toHaveLength(2);

    for (const [method, payload] of [
      ['GET', undefined],
      ['POST', { text: 'spoof' }],
    ] as const) {
      const cross = await cp.request(method, `/v1/sessions/${a.id}/messages`, {
        token: b.caveat_token,
        ...(payload ? { body: payload } : {}),
      });
      expect(cross.status, cross.text).toBe(404);
    }
  });

  it('a narrowed token loses what it dropped; a forged or tampered one is refused with a stable code', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const s = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;
    const noComms = attenuateCaveatToken(s.caveat_token, [{ kind: 'caps', caps: ['actions:list', 'actions:run'] }]);
    const res = await cp.request('POST', `/v1/sessions/${s.id}/messages`, { token: noComms, body: { text: 'x' } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('CAPABILITY_REQUIRED');
    const expired = attenuateCaveatToken(s.caveat_token, [{ kind: 'expires', at: Math.floor(Date.now() / 1000) - 1 }]);
    expect((await cp.request('GET', `/v1/sessions/${s.id}/messages`, { token: expired })).body.code).toBe(
      'TOKEN_EXPIRED',
    );
    const token = s.caveat_token as string;
    const tampered = token.slice(0, -3) + (token.endsWith('AAA') ? 'BBB' : 'AAA');
    const refused = await cp.request('GET', `/v1/sessions/${s.id}/messages`, { token: tampered });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('TOKEN_INVALID');
    expect((await cp.request('GET', `/v1/sessions/${s.id}/messages`, { token: 'ail_ct_garbage' })).body.code).toBe(
      'TOKEN_INVALID',
    );
  });

  it('a session past its time refuses its token, lists as expired and takes no more messages', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const s = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug, ttl_seconds: 60 } })).body;
    const poll = () => cp.request('GET', `/v1/sessions/${s.id}/messages`, { token: s.caveat_token });
    expect((await poll()).status).toBe(200);
    advanceClock(cp, 61_000);
    try {
      const refused = await poll();
      expect(refused.status, refused.text).toBe(401);
      expect(refused.body.code).toBe('TOKEN_EXPIRED');
      const live = await cp.request('GET', `/v1/sessions?workspace=${ws.slug}&live=true`);
      expect(live.status, live.text).toBe(200);
      expect((live.body.sessions as { id: string }[]).map((x) => x.id)).not.toContain(s.id);
      expect((await cp.request('GET', `/v1/sessions/${s.id}`)).body.state).toBe('expired');
      const written = await cp.request('POST', `/v1/sessions/${s.id}/messages`, { body: { text: 'still there?' } });
      expect(written.status, written.text).toBe(409);
      expect(written.body.code).toBe('SESSION_CLOSED');
    } finally {
      resetClock(cp);
    }
  });

  it('rotating the session root key keeps old tokens working until the old key is removed', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const old = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;
    const poll = (s: { id: string; caveat_token: string }) =>
      cp.request('GET', `/v1/sessions/${s.id}/messages`, { token: s.caveat_token });
    const before = (await cp.request('GET', '/v1/session-keys')).body.keys as { key_id: string }[];
    const rotated = await cp.request('POST', '/v1/session-keys/rotate');
    expect(rotated.status, rotated.text).toBe(201);
    const fresh = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;
    expect((await poll(old)).status).toBe(200);
    expect((await poll(fresh)).status).toBe(200);
    const keys = (await cp.request('GET', '/v1/session-keys')).body.keys as {
      key_id: string;
      retired_at: string | null;
    }[];
    expect(keys.filter((k) => k.retired_at === null).map((k) => k.key_id)).toEqual([rotated.body.key_id]);
    expect(JSON.stringify(keys)).not.toMatch(/sealed|rk-/);
    // the current key cannot be removed, only a retired one
    expect((await cp.request('DELETE', `/v1/session-keys/${rotated.body.key_id}`)).status).toBe(404);
    for (const key of before) expect((await cp.request('DELETE', `/v1/session-keys/${key.key_id}`)).status).toBe(204);
    const refused = await poll(old);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('TOKEN_INVALID');
    expect((await poll(fresh)).status).toBe(200);
  });

  it('a gateway starts sessions in its own workspace only and sees only those', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const other = await aWorkspace(cp, cp.ownerToken);
    const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    const mine = await cp.request('POST', '/v1/sessions', {
      token: gateway.token,
      body: { workspace: ws.slug, agent: 'codex' },
    });
    expect(mine.status, mine.text).toBe(201);
    expect(
      (await cp.request('POST', '/v1/sessions', { token: gateway.token, body: { workspace: other.slug } })).status,
    ).toBe(404);
    await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug, name: 'a person’s' } });
    const listed = await cp.request('GET', `/v1/sessions?workspace=${ws.slug}`, { token: gateway.token });
    expect(listed.body.sessions.map((s: { id: string }) => s.id)).toEqual([mine.body.id]);
    // the token works, and ends when its gateway ends it
    expect(
      (await cp.request('GET', `/v1/sessions/${mine.body.id}/messages`, { token: mine.body.caveat_token })).status,
    ).toBe(200);
    expect((await cp.request('DELETE', `/v1/sessions/${mine.body.id}`, { token: gateway.token })).body.state).toBe(
      'ended',
    );
    const after = await cp.request('GET', `/v1/sessions/${mine.body.id}/messages`, { token: mine.body.caveat_token });
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('SESSION_ENDED');
  });
});

describe('agent sessions across replicas (server mode)', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  beforeAll(async () => {
    a = await startTestControlPlane('postgres');
    b = await aReplicaOf(a);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('ending a session on one replica refuses its token on the other at once (not when its cache lapses)', async () => {
    const ws = await aWorkspace(a, a.ownerToken);
    const s = (await a.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;
    const poll = () => b.request('GET', `/v1/sessions/${s.id}/messages`, { token: s.caveat_token });
    expect((await poll()).status).toBe(200);
    expect((await a.request('DELETE', `/v1/sessions/${s.id}`)).status).toBe(200);
    await eventually(
      'the token refused on the other replica',
      async () => (await poll()).status === 401,
      BEFORE_THE_CACHE_LAPSES,
    );
    expect((await poll()).body.code).toBe('SESSION_ENDED');
  });

  it("revoking the session's creator refuses its token on the other replica at once (not when its cache lapses)", async () => {
    const ws = await aWorkspace(a, a.ownerToken);
    const creator = await aToken(a, a.ownerToken, { role: 'member', workspace: ws.slug });
    const s = (await a.request('POST', '/v1/sessions', { token: creator.token, body: { workspace: ws.slug } })).body;
    const poll = () => b.request('GET', `/v1/sessions/${s.id}/messages`, { token: s.caveat_token });
    expect((await poll()).status).toBe(200);
    expect((await a.request('DELETE', `/v1/tokens/${creator.id}`)).status).toBe(204);
    await eventually(
      'the token refused on the other replica',
      async () => (await poll()).status === 401,
      BEFORE_THE_CACHE_LAPSES,
    );
    expect((await poll()).body.code).toBe('SESSION_ENDED');
  });
});
