import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane, TestResponse } from '../support/control-plane';

/**
 * A 400 names each bad field the same way whichever domain answers and
 * whichever check found it (the route's schema or the service after it):
 * `body.<path>`, `query.<name>`, `params.<name>`, `headers.<name>` (API.md).
 */
describe('validation errors name the field', () => {
  let cp: TestControlPlane;
  let ws: string;
  let approvalId: string;

  beforeAll(async () => {
    cp = await startApiControlPlane();
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: { rules: [{ id: 'review', effect: 'approval', tools: ['merge_*'] }] },
    });
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const approval = await cp.request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: { server: 'github', tool: 'merge_pr', arguments: {}, principal: 'dev@example.com' },
    });
    expect(approval.status, approval.text).toBe(201);
    approvalId = approval.body.id;
  });
  afterAll(async () => cp?.close());

  /** The fields a 400 names, after checking it is one with a stable code. */
  function named(res: TestResponse, code = 'VALIDATION_FAILED'): string[] {
    expect(res.status, res.text).toBe(400);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.code, res.text).toBe(code);
    const paths = (res.body.errors as { path: string }[]).map((e) => e.path);
    // the detail says the same, field by field
    for (const path of paths) expect(res.body.detail).toContain(`${path}`);
    return paths;
  }

  it('tenancy: a bad slug in the body, a bad limit in the query', async () => {
    expect(named(await cp.request('POST', '/v1/workspaces', { body: { slug: 'Not A Slug', name: 'x' } }))).toEqual([
      'body.slug',
    ]);
    expect(named(await cp.request('GET', '/v1/workspaces?limit=0'))).toEqual(['query.limit']);
  });

  it('vault: a value too large for its bytes, a path with a space, a limit above the maximum', async () => {
    // within the schema's length in characters, over the limit in bytes: the service finds it
    expect(
      named(
        await cp.request('PUT', `/v1/workspaces/${ws}/secrets/github/token`, { body: { value: 'é'.repeat(40_000) } }),
      ),
    ).toEqual(['body.value']);
    expect(
      named(await cp.request('PUT', `/v1/workspaces/${ws}/secrets/github/bad%20token`, { body: { value: 'v' } })),
    ).toEqual(['params.path']);
    expect(named(await cp.request('GET', `/v1/workspaces/${ws}/secrets?limit=501`))).toEqual(['query.limit']);
  });

  it('policy: each problem of the document under body, with its rule', async () => {
    const res = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: { rules: [{ id: 'x', effect: 'maybe' }] },
    });
    expect(named(res, 'POLICY_INVALID')).toEqual(['body.rules[0].effect']);
    expect(res.body.errors[0].rule).toBe('x');
    expect(named(await cp.request('GET', `/v1/workspaces/${ws}/policy/versions?limit=many`))).toEqual(['query.limit']);
  });

  it('approvals: a route naming no group, an approver who is no user, a status that does not exist, an id that is no UUID', async () => {
    const routes = await cp.request('PUT', `/v1/workspaces/${ws}/approval-routes`, {
      body: { routes: { security: { approvers: [{ group: 'nobody' }] } } },
    });
    expect(named(routes)).toEqual(['body.routes.security.approvers[0].group']);
    const link = await cp.request('POST', `/v1/approvals/${approvalId}/links`, {
      body: { user: '00000000-0000-4000-8000-000000000000' },
    });
    expect(named(link)).toEqual(['body.user']);
    expect(named(await cp.request('GET', `/v1/workspaces/${ws}/approvals?status=open`))).toEqual(['query.status']);
    expect(named(await cp.request('GET', '/v1/approvals/not-a-uuid'))).toEqual(['params.id']);
  });

  it('audit: a sink URL the control plane will not reach, a decision that does not exist', async () => {
    expect(
      named(
        await cp.request('POST', '/v1/audit/sinks', { body: { name: 'siem', url: 'http://169.254.169.254/latest' } }),
      ),
    ).toEqual(['body.url']);
    expect(named(await cp.request('GET', `/v1/workspaces/${ws}/audit?decision=perhaps`))).toEqual(['query.decision']);
  });

  it('webhooks: a personal event in a shared format, a malformed cursor limit', async () => {
    const res = await cp.request('POST', '/v1/webhooks', {
      body: { name: 'chat', url: 'https://hooks.slack.com/services/T/B/X', format: 'slack', events: ['approval.link'] },
    });
    expect(named(res)).toEqual(['body.format']);
    expect(named(await cp.request('GET', '/v1/webhooks?limit=-1'))).toEqual(['query.limit']);
  });

  it('sandboxes: a name with no letter or digit, a source of another type, a limit too large', async () => {
    expect(named(await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: '!!!' } }))).toEqual([
      'body.name',
    ]);
    const source = await cp.request('PUT', `/v1/workspaces/${ws}/sandboxes/any/source`, {
      body: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    expect(named(source)).toEqual(['headers.content-type']);
    expect(named(await cp.request('GET', `/v1/workspaces/${ws}/sandboxes?limit=1000`))).toEqual(['query.limit']);
  });

  it('sessions: a capability that does not exist, a live filter that is not a boolean', async () => {
    const res = await cp.request('POST', `/v1/workspaces/${ws}/sessions`, { body: { caps: ['actions:list', 'fly'] } });
    expect(named(res)).toEqual(['body.caps[1]']);
    expect(named(await cp.request('GET', `/v1/workspaces/${ws}/sessions?live=maybe`))).toEqual(['query.live']);
  });
});
