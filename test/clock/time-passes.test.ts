import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentSessionsService } from '../../libs/sessions/src';
import { browserSignIn, LocalIdp } from '../auth/local-idp';
import { anOrganization, aToken, aWorkspace } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/**
 * What lapses with time lapses when the control plane's Clock moves: each
 * test sets the clock past a deadline instead of waiting for it, so each
 * fails if that deadline were read from the system time (docs/rules/clock.md).
 */
describe('deadlines follow the Clock', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    // the local identity provider listens on loopback
    cp = await startTestControlPlane('postgres', { UPSTREAM_ALLOW_CIDRS: '127.0.0.0/8' });
  });
  afterAll(() => cp?.close());
  afterEach(() => resetClock(cp));

  it('an enrolment code enrols until its time is up, and is refused as expired a moment after', async () => {
    const ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    const aCode = async () => {
      const res = await cp.request('POST', `/v1/workspaces/${ws}/enrollment-codes`, {
        body: { expires_in_seconds: 60 },
      });
      expect(res.status, res.text).toBe(201);
      return res.body.code as string;
    };
    const enrol = (code: string, name: string) =>
      cp.request('POST', '/v1/gateway/enroll', { token: null, body: { enrollment_code: code, name } });
    const [early, late] = [await aCode(), await aCode()];

    advanceClock(cp, 59_000);
    const inTime = await enrol(early, 'in-time');
    expect(inTime.status, inTime.text).toBe(201);

    advanceClock(cp, 2_000);
    const tooLate = await enrol(late, 'too-late');
    expect([tooLate.status, tooLate.body.code], tooLate.text).toEqual([401, 'ENROLLMENT_CODE_EXPIRED']);
  });

  it('a browser sign-in left at the identity provider for more than 10 minutes must start again', async () => {
    const idp = new LocalIdp('/idp');
    await idp.start();
    try {
      // as an operator sets AILERON_PUBLIC_URL: the IdP sends browsers back there
      cp.cp.config.publicUrl = cp.url;
      await idp.trustedBy(cp, { client_id: idp.clientId });

      const quick = await browserSignIn(cp, 'default', () => advanceClock(cp, 9 * MINUTE));
      expect([quick.step, quick.status], quick.text).toEqual(['callback', 302]);

      const slow = await browserSignIn(cp, 'default', () => advanceClock(cp, 10 * MINUTE + 1_000));
      expect([slow.step, slow.status, slow.body?.code], slow.text).toEqual(['callback', 400, 'SIGN_IN_EXPIRED']);
    } finally {
      await idp.stop();
    }
  });

  it("an agent's long-poll for messages answers empty once its wait has run out", async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const session = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body as {
      id: string;
      caveat_token: string;
    };
    let answered: { status: number; body: { messages: unknown[] } } | undefined;
    void cp
      .request('GET', `/v1/sessions/${session.id}/messages?wait=60`, { token: session.caveat_token })
      .then((res) => (answered = res));
    await eventually(
      'the long-poll parked',
      () => cp.cp.app.get(AgentSessionsService).waiting.sleeping(session.id) === 1,
    );

    advanceClock(cp, MINUTE + 1_000);
    // the agent's own note wakes the poll (it reads only what people write): it looks at its deadline again
    const note = await cp.request('POST', `/v1/sessions/${session.id}/messages`, {
      token: session.caveat_token,
      body: { text: 'still working' },
    });
    expect(note.status, note.text).toBe(201);

    const res = await eventually('the long-poll to answer', () => answered);
    expect([res.status, res.body.messages]).toEqual([200, []]);
  });

  // last: the retention pass it triggers runs once an hour of the Clock, which is a month ahead by then
  it("the periodic retention pass removes an organisation's records once they are older than its window, and the rest still verifies", async () => {
    const org = await anOrganization(cp);
    const set = await cp.request('PUT', '/v1/organization/audit-retention', { token: org.token, body: { days: 30 } });
    expect(set.status, set.text).toBe(200);
    await aToken(cp, org.token, { role: 'member' });
    const events = async () =>
      (await cp.request('GET', '/v1/audit?limit=500', { token: org.token })).body.events as {
        id: string;
        type: string;
      }[];
    const old = await events();
    expect(old.map((e) => e.type)).toEqual(expect.arrayContaining(['audit.retention_changed', 'token.created']));

    advanceClock(cp, 31 * DAY);
    await aToken(cp, org.token, { role: 'member' });

    const kept = await eventually('the records older than 30 days to go', async () => {
      const now = await events();
      return now.some((e) => old.some((o) => o.id === e.id)) ? undefined : now;
    });
    expect(kept.map((e) => e.type)).toEqual(['token.created']);
    expect((await cp.request('GET', '/v1/audit/verify', { token: org.token })).body).toMatchObject({ ok: true });
  });
});
