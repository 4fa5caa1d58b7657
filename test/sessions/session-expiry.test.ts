import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSessionsService } from '@aileron/sessions';
import { aWorkspace } from '../support/builders';
import { advanceClock, resetClock } from '../support/clock';
import { aReplicaOf, startTestControlPlane, TestControlPlane, withOwnerToken } from '../support/control-plane';
import { eventually } from '../support/eventually';

const SESSIONS = 30;

/**
 * An agent session that reaches its expiry is announced (`session.ended`,
 * reason `expired`) by the sweep every replica runs: once, whichever replica
 * gets to it, however many sweep at the same moment (docs/events.md).
 */
describe('session expiry across two replicas', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;

  beforeAll(async () => {
    a = await startTestControlPlane('postgres');
    b = withOwnerToken(await aReplicaOf(a), a.ownerToken);
  });
  afterAll(async () => {
    if (a) resetClock(a);
    if (b) resetClock(b);
    await b?.close();
    await a?.close();
  });

  it('announces each expired session once, with both replicas sweeping at the same time', async () => {
    const ws = (await aWorkspace(a, a.ownerToken)).slug;
    const ids: string[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const on = i % 2 === 0 ? a : b;
      const started = await on.request('POST', `/v1/workspaces/${ws}/sessions`, {
        body: { name: `agent ${i}`, ttl_seconds: 60 },
      });
      expect(started.status, started.text).toBe(201);
      ids.push(started.body.id as string);
    }
    const endings = async () => {
      const found = await a.request('GET', `/v1/workspaces/${ws}/audit?type=session.ended&limit=200`);
      expect(found.status, found.text).toBe(200);
      return found.body.items as { session: string; actor: string; data: { reason: string; session: string } }[];
    };
    expect(await endings()).toEqual([]);

    // an hour has passed on both replicas: their own sweeps and ten more at once race for the same rows
    advanceClock(a, 61_000);
    advanceClock(b, 61_000);
    const sweeps = [a, b].flatMap((replica) =>
      Array.from({ length: 5 }, () => replica.cp.app.get(AgentSessionsService).announceExpired()),
    );
    const announced = (await Promise.all(sweeps)).reduce((sum, n) => sum + n, 0);
    expect(announced).toBeLessThanOrEqual(SESSIONS);

    const all = await eventually('every expiry in the audit log', async () => {
      const found = await endings();
      return found.length >= SESSIONS ? found : undefined;
    });
    // nothing is left to announce, on either replica
    expect(await a.cp.app.get(AgentSessionsService).announceExpired()).toBe(0);
    expect(await b.cp.app.get(AgentSessionsService).announceExpired()).toBe(0);
    const after = await endings();
    expect(after).toHaveLength(SESSIONS);
    expect(after.map((r) => r.data.session).sort()).toEqual([...ids].sort());
    expect(all.every((r) => r.data.reason === 'expired' && r.actor === 'system')).toBe(true);
  });
});
