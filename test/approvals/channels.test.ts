import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, anOrganization, aToken, aWorkspace, uniqueSlug } from '../support/builders';
import { captureOutput, CapturedOutput } from '../support/captured-output';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { BACKENDS } from '../support/databases';
import { eventually } from '../support/eventually';
import { aReceiver } from '../support/webhook-receiver';

/** The part of a receiver's URL that stands for a token a Slack incoming-webhook URL carries in its path. */
const URL_SECRET = 'aileron-path-token';

/** New cloud resources go to the cost approvers, who hear of them in their channel; releases go to the built-in route. */
const POLICY = {
  rules: [
    {
      id: 'new-cloud-resources',
      effect: 'approval',
      approval_route: 'cost-approval',
      servers: ['cloud'],
      tools: ['create_instance'],
    },
    { id: 'releases', effect: 'approval', servers: ['deploy'], tools: ['release'] },
  ],
};

const INSTANCE = {
  server: 'cloud',
  tool: 'create_instance',
  arguments: { type: 'gpu.8xlarge', region: 'eu-west-1', api_key: 'sk_live_never_posted' },
  session: 'sess-1',
  principal: 'alice@example.com',
};
const RELEASE = {
  server: 'deploy',
  tool: 'release',
  arguments: { service: 'payments' },
  principal: 'alice@example.com',
};

interface SlackMessage {
  text: string;
  blocks: { type: string; text?: { text: string }; fields?: { text: string }[]; elements?: { url: string }[] }[];
}

describe.each(BACKENDS)('approval routes with channels on %s', (backend) => {
  let cp: TestControlPlane;
  let output: CapturedOutput;
  const hooks: string[] = [];
  beforeAll(async () => {
    // everything the control plane logs, to show a channel's URL never is
    output = captureOutput();
    cp = await startTestControlPlane(backend, backend === 'postgres' ? { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' } : {});
  });
  afterAll(async () => {
    await cp?.close();
    output?.restore();
  });
  // an endpoint left behind would keep retrying against its closed receiver
  afterEach(async () => {
    for (const id of hooks.splice(0)) await cp.request('DELETE', `/v1/webhooks/${id}`);
  });

  async function aWebhook(body: Record<string, unknown>, token = cp.ownerToken): Promise<{ id: string; name: string }> {
    const name = uniqueSlug('channel');
    const res = await cp.request('POST', '/v1/webhooks', { token, body: { name, ...body } });
    expect(res.status, res.text).toBe(201);
    if (token === cp.ownerToken) hooks.push(res.body.id);
    return { id: res.body.id, name };
  }

  async function aWorkspaceRouting(channel: string): Promise<{ slug: string; gateway: { id: string; token: string } }> {
    const ws = await aWorkspace(cp, cp.ownerToken);
    expect((await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { body: POLICY })).status).toBe(200);
    const routes = await cp.request('PUT', `/v1/workspaces/${ws.slug}/approval-routes`, {
      body: { routes: { 'cost-approval': { approvers: [{ role: 'approver' }], channels: [{ webhook: channel }] } } },
    });
    expect(routes.status, routes.text).toBe(200);
    return { slug: ws.slug, gateway: await aGateway(cp, cp.ownerToken, ws.slug) };
  }

  const ask = async (gateway: { token: string }, call: Record<string, unknown>) => {
    const res = await cp.request('POST', '/v1/gateway/approvals', { token: gateway.token, body: call });
    expect(res.status, res.text).toBe(201);
    return res.body as { id: string; review_url: string };
  };

  it('posts each request of the route to its channel as a Slack message with the review link, through the retries; an approver follows the link and decides', async () => {
    // the channel fails once: the message comes with the webhook's retry
    const channel = await aReceiver([503]);
    // an ordinary subscriber of every approval event: it hears requests, never their posting to a channel
    const subscriber = await aReceiver([]);
    try {
      const hook = await aWebhook({ url: channel.url, format: 'slack', events: ['approval.routed'] });
      const { slug, gateway } = await aWorkspaceRouting(hook.name);
      await aWebhook({ url: subscriber.url, events: ['approval.*'], workspace: slug });

      const asked = await ask(gateway, INSTANCE);
      const release = await ask(gateway, RELEASE);

      const got = await eventually('the message in the channel', () => channel.accepted()[0]);
      expect(got.headers['x-aileron-event']).toBe('approval.routed');
      const message = JSON.parse(got.raw) as SlackMessage;
      expect(message.blocks[0]!.text!.text).toBe('Approval requested');
      expect(message.text).toContain('alice@example.com wants cloud/create_instance');
      const fields = message.blocks.flatMap((b) => b.fields ?? []).map((f) => f.text);
      expect(fields).toEqual(
        expect.arrayContaining([
          '*Server*\ncloud',
          '*Tool*\ncreate_instance',
          '*Rule*\nnew-cloud-resources',
          `*Workspace*\n${slug}`,
          "*Who decides*\nthe workspace's approvers",
        ]),
      );
      // the arguments stay out of a shared channel
      expect(got.raw).not.toContain('sk_live_never_posted');
      expect(got.raw).not.toContain('gpu.8xlarge');
      const button = message.blocks.find((b) => b.type === 'actions')!.elements![0]!;
      expect(button.url).toBe(asked.review_url);
      // one delivery, tried twice, signed like any webhook's
      expect(channel.requests.map((r) => r.answered)).toEqual([503, 204]);
      expect(new Set(channel.requests.map((r) => r.headers['x-aileron-delivery'])).size).toBe(1);
      expect(got.headers['x-aileron-signature']).toMatch(/^v1=[0-9a-f]{64}$/);

      // a request of another route is not posted there; the subscriber hears both requests and no posting
      await eventually('both requests at the subscriber', () => subscriber.accepted().length >= 2);
      const heard = subscriber
        .accepted()
        .map((r) => JSON.parse(r.raw) as { type: string; data: { approval_id: string } });
      expect(heard.map((e) => [e.type, e.data.approval_id]).sort()).toEqual(
        [
          ['approval.requested', asked.id],
          ['approval.requested', release.id],
        ].sort(),
      );
      expect(channel.accepted()).toHaveLength(1);

      // the review link opens the request in the console; only the route's approvers decide there
      const link = new URL(button.url);
      const opened = await fetch(`${cp.url}${link.pathname}`, { redirect: 'manual' });
      expect(opened.status).toBe(302);
      expect(opened.headers.get('location')).toBe(`/approvals/${asked.id}`);
      const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: slug });
      const approver = await aToken(cp, cp.ownerToken, { role: 'approver', workspace: slug });
      const refused = await cp.request('POST', `/v1/approvals/${asked.id}/approve`, { token: member.token, body: {} });
      expect([refused.status, refused.body.code]).toEqual([403, 'NOT_AN_APPROVER']);
      const approved = await cp.request('POST', `/v1/approvals/${asked.id}/approve`, {
        token: approver.token,
        body: { reason: 'budgeted' },
      });
      expect([approved.status, approved.body.status]).toEqual([200, 'approved']);
      const seen = await cp.request('GET', `/v1/approvals/${asked.id}`, { token: gateway.token });
      expect(seen.body.status).toBe('approved');

      // the posting is recorded, naming the channel, never its URL
      const audit = await cp.request('GET', `/v1/workspaces/${slug}/audit?type=approval.routed`);
      expect(audit.body.items).toHaveLength(1);
      expect(audit.body.items[0].data).toMatchObject({ approval_id: asked.id, channels: [hook.name] });
      const shown = [
        audit.text,
        (await cp.request('GET', `/v1/workspaces/${slug}/approval-routes`)).text,
        (await cp.request('GET', `/v1/webhooks/${hook.id}`)).text,
        (await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries`)).text,
        (await cp.request('GET', `/v1/approvals/${asked.id}`)).text,
      ].join('\n');
      expect(shown).toContain(hook.name);
      expect(shown).not.toContain(URL_SECRET);
      expect(output.text()).not.toContain(URL_SECRET);
    } finally {
      await channel.close();
      await subscriber.close();
    }
  });

  it('posts to a generic webhook endpoint as the approval.routed event: the review link, the channel and who decides', async () => {
    const channel = await aReceiver([]);
    try {
      const hook = await aWebhook({ url: channel.url, events: ['approval.routed'] });
      const { slug, gateway } = await aWorkspaceRouting(hook.name);
      const asked = await ask(gateway, INSTANCE);
      const got = await eventually('the event at the endpoint', () => channel.accepted()[0]);
      expect(got.headers['x-aileron-event']).toBe('approval.routed');
      expect(got.headers['x-aileron-signature']).toMatch(/^v1=[0-9a-f]{64}$/);
      const event = JSON.parse(got.raw) as { type: string; workspace: string; data: Record<string, unknown> };
      expect(event).toMatchObject({
        type: 'approval.routed',
        data: {
          approval_id: asked.id,
          review_url: asked.review_url,
          server: 'cloud',
          tool: 'create_instance',
          rules: ['new-cloud-resources'],
          route: 'cost-approval',
          channels: [hook.name],
          approvers: [{ role: 'approver' }],
        },
      });
      expect(JSON.stringify(event)).toContain(slug);
      // a request of another route is not posted there: its posting would be recorded with the request
      await ask(gateway, RELEASE);
      const routed = (await cp.request('GET', `/v1/workspaces/${slug}/audit?type=approval.routed`)).body.items;
      expect(routed.map((r: { data: { approval_id: string } }) => r.data.approval_id)).toEqual([asked.id]);
    } finally {
      await channel.close();
    }
  });

  it('refuses a channel the organisation does not have, one of another workspace or a bare URL, and keeps the routing in force', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const elsewhere = await aWorkspace(cp, cp.ownerToken);
    const receiver = await aReceiver([]);
    try {
      const own = await aWebhook({ url: receiver.url, events: ['approval.routed'], workspace: ws.slug });
      const others = await aWebhook({ url: receiver.url, events: ['approval.routed'], workspace: elsewhere.slug });
      const stranger = await anOrganization(cp);
      const foreign = await aWebhook({ url: receiver.url, events: ['approval.routed'] }, stranger.token);
      const put = (channels: unknown[]) =>
        cp.request('PUT', `/v1/workspaces/${ws.slug}/approval-routes`, {
          body: { routes: { 'cost-approval': { approvers: [{ role: 'approver' }], channels } } },
        });
      const kept = await put([{ webhook: own.name }]);
      expect(kept.status, kept.text).toBe(200);

      for (const [channels, message] of [
        [[{ webhook: 'no-such-endpoint' }], /names no webhook endpoint/],
        [[{ webhook: foreign.name }], /names no webhook endpoint/],
        [[{ webhook: own.name }, { webhook: others.name }], /another workspace/],
      ] as const) {
        const res = await put([...channels]);
        expect(res.status, res.text).toBe(400);
        expect(res.body.code).toBe('VALIDATION_FAILED');
        const at = channels.length - 1;
        expect(res.body.errors).toEqual([
          { path: `body.routes.cost-approval.channels[${at}].webhook`, message: expect.stringMatching(message) },
        ]);
      }
      const bare = await put([{ url: receiver.url }]);
      expect([bare.status, bare.body.code]).toEqual([400, 'VALIDATION_FAILED']);
      expect(bare.text).not.toContain(URL_SECRET);

      const now = await cp.request('GET', `/v1/workspaces/${ws.slug}/approval-routes`);
      expect(now.body).toMatchObject({
        version: kept.body.version,
        document: { routes: { 'cost-approval': { channels: [{ webhook: own.name }] } } },
      });
    } finally {
      await receiver.close();
    }
  });
});
