import { describe, expect, it } from 'vitest';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';
import { aGateway, aWorkspace } from '../support/builders';

describe('a gateway withdraws its own request', () => {
  let cp: TestControlPlane;
  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
  });

  it('cancelled is final: the waiter learns it at once, nobody can approve or use it, another gateway cannot touch it', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    expect(
      (
        await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
          body: { rules: [{ id: 'review-merges', effect: 'approval', tools: ['merge_*'] }] },
        })
      ).status,
    ).toBe(200);
    const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
    const other = await aGateway(cp, cp.ownerToken, ws.slug);
    const call = {
      server: 'github',
      tool: 'merge_pr',
      arguments: { n: 7 },
      session: 's-9',
      principal: 'dev@example.com',
    };
    const created = await cp.request('POST', '/v1/gateway/approvals', { token: gateway.token, body: call });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;

    const waiting = cp.request('GET', `/v1/approvals/${id}?wait=60`, { token: gateway.token });
    expect(
      (await cp.request('POST', `/v1/gateway/approvals/${id}/cancel`, { token: other.token, body: {} })).status,
    ).toBe(404);
    const cancelled = await cp.request('POST', `/v1/gateway/approvals/${id}/cancel`, {
      token: gateway.token,
      body: { reason: 'agent stopped' },
    });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', reason: 'agent stopped' });
    const started = Date.now();
    expect((await waiting).body.status).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(30_000); // a hang guard, not a speed claim

    const approve = await cp.request('POST', `/v1/approvals/${id}/approve`, { body: {} });
    expect(approve.status).toBe(409);
    expect(approve.body.code).toBe('APPROVAL_ALREADY_DECIDED');
    const use = await cp.request('POST', `/v1/gateway/approvals/${id}/consume`, { token: gateway.token, body: call });
    expect(use.status).toBe(409);
    expect(use.body.code).toBe('APPROVAL_NOT_USABLE');
    expect(
      (await cp.request('POST', `/v1/gateway/approvals/${id}/cancel`, { token: gateway.token, body: {} })).body.code,
    ).toBe('APPROVAL_ALREADY_DECIDED');
    const audit = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=approval.cancelled`)).body.events;
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      actor: `gateway:${gateway.id}`,
      data: { approval_id: id, reason: 'agent stopped' },
    });
  });
});
