import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { verifySignedPayload } from '../../libs/platform/net/src';
import { DatabaseService } from '../../libs/platform/database/src';
import { QuietOrganizations, WebhookDeliveryService } from '../../libs/webhooks/src';
import { aGateway, anOrganization, aWorkspace, uniqueSlug } from '../support/builders';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { BACKENDS, Backend } from '../support/databases';
import { advanceClock, resetClock } from '../support/clock';
import { eventually } from '../support/eventually';
import { RedisServer, startRedis } from '../support/services';
import { aReceiver, Held, Receiver } from '../support/webhook-receiver';

const made: { cp: TestControlPlane; id: string }[] = [];

/** Creates an endpoint through the API; returns its id and the secret shown once. Removed after the test. */
async function aWebhook(
  cp: TestControlPlane,
  body: Record<string, unknown>,
  token = cp.ownerToken,
): Promise<{ id: string; secret: string; body: any }> {
  const res = await cp.request('POST', '/v1/webhooks', { token, body: { name: uniqueSlug('hook'), ...body } });
  expect(res.status, res.text).toBe(201);
  made.push({ cp, id: res.body.id });
  return { id: res.body.id, secret: res.body.secret, body: res.body };
}

// an endpoint left behind would keep retrying later tests' events against its closed receiver
afterEach(async () => {
  for (const { cp, id } of made.splice(0)) await cp.request('DELETE', `/v1/webhooks/${id}`);
});

async function aPolicyChange(
  cp: TestControlPlane,
  ws: string,
  rule = uniqueSlug('rule'),
  token = cp.ownerToken,
): Promise<void> {
  const res = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
    token,
    body: { rules: [{ id: rule, effect: 'deny', tools: ['x'] }] },
  });
  expect(res.status, res.text).toBe(200);
}

/** AILERON_WEBHOOK_PAUSE_AFTER_SECONDS's default: an endpoint failing for a day is paused */
const DAY_SECONDS = 86_400;

function serverEnv(backend: Backend, extra: Record<string, string> = {}): Record<string, string> {
  // server mode refuses loopback unless allowed; the receivers listen on 127.0.0.1
  return { ...(backend === 'postgres' ? { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' } : {}), ...extra };
}

describe.each(BACKENDS)('webhooks on %s', (backend) => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane(backend, serverEnv(backend));
  });
  afterAll(async () => cp?.close());
  afterEach(() => resetClock(cp));

  it('an event whose receiver fails twice is retried, delivered once, signed with the secret shown at creation, and logged with three attempts', async () => {
    const receiver = await aReceiver([500, 503]);
    try {
      const hook = await aWebhook(cp, { url: receiver.url, events: ['policy.updated'] });
      expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9_-]{40,}$/);
      expect(hook.body).toMatchObject({
        host: new URL(receiver.url).host,
        events: ['policy.updated'],
        format: 'json',
        enabled: true,
        status: 'active',
        paused: false,
        workspace: null,
      });
      const ws = await aWorkspace(cp, cp.ownerToken);
      await aPolicyChange(cp, ws.slug);

      const success = await eventually('the delivery to succeed', () => receiver.accepted()[0]);
      const log = await eventually('the delivery log to say delivered', async () => {
        const res = await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries`);
        return res.body.deliveries[0]?.status === 'delivered' ? res.body : undefined;
      });

      // signed with the secret returned at creation, over the exact body, with a fresh timestamp
      const timestamp = String(success.headers['x-aileron-timestamp']);
      expect(
        verifySignedPayload(hook.secret, success.raw, {
          timestamp,
          signature: String(success.headers['x-aileron-signature']),
        }),
      ).toEqual({ ok: true });
      expect(Math.abs(success.at / 1000 - Number(timestamp))).toBeLessThan(60);
      expect(
        verifySignedPayload('whsec_someone-elses-secret', success.raw, {
          timestamp,
          signature: String(success.headers['x-aileron-signature']),
        }),
      ).toEqual({ ok: false, reason: 'mismatch' });

      // the envelope
      const event = JSON.parse(success.raw);
      expect(event).toMatchObject({
        type: 'policy.updated',
        workspace: ws.slug,
        workspace_id: ws.id,
        session: null,
        data: { version: 1, rules: 1 },
      });
      expect(event.id).toMatch(/^evt_\d+$/);
      expect(Date.parse(event.time)).not.toBeNaN();
      expect(success.headers['content-type']).toBe('application/json');
      expect(success.headers['x-aileron-event']).toBe('policy.updated');

      // three tries of one delivery, each with the same delivery id and the same event
      expect(receiver.requests.map((r) => r.answered)).toEqual([500, 503, 204]);
      expect(new Set(receiver.requests.map((r) => r.headers['x-aileron-delivery'])).size).toBe(1);
      expect(new Set(receiver.requests.map((r) => JSON.parse(r.raw).id)).size).toBe(1);
      expect(log.deliveries).toHaveLength(1);
      const delivery = log.deliveries[0];
      expect(delivery).toMatchObject({
        id: success.headers['x-aileron-delivery'],
        event_id: event.id,
        event_type: 'policy.updated',
        status: 'delivered',
        attempt_count: 3,
        last_status: 204,
        last_error: null,
      });
      expect(delivery.delivered_at).not.toBeNull();
      expect(delivery.attempts.map((a: { attempt: number; status: number }) => [a.attempt, a.status])).toEqual([
        [1, 500],
        [2, 503],
        [3, 204],
      ]);
      expect(delivery.attempts[0].error).toBe('HTTP 500');
      // the receiver's path may carry a token: the log names neither path nor query
      expect(JSON.stringify(log)).not.toContain('aileron-path-token');
      // healthy again after the success
      expect((await cp.request('GET', `/v1/webhooks/${hook.id}`)).body).toMatchObject({
        status: 'active',
        failing_since: null,
        paused: false,
      });

      // the consumer handed the same message again (a re-dispatch) adds no delivery and sends nothing twice
      const messageId = BigInt(event.id.slice('evt_'.length));
      const row = await cp.cp.database.client.outboxMessage.findUniqueOrThrow({ where: { id: messageId } });
      const message = {
        id: String(row.id),
        topic: row.topic,
        organizationId: row.organizationId!,
        workspaceId: row.workspaceId!,
        payload: row.payload as Record<string, unknown>,
        createdAt: row.createdAt,
      };
      await cp.cp.app
        .get(DatabaseService)
        .transaction((tx) => cp.cp.app.get(WebhookDeliveryService).fanOut([message], tx));
      expect((await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries).toHaveLength(1);
      // what the endpoint gets next is the next event, and the first one never again
      await aPolicyChange(cp, ws.slug);
      const next = await eventually('the next event', () => receiver.accepted()[1]);
      expect(JSON.parse(next.raw)).toMatchObject({ type: 'policy.updated', data: { version: 2 } });
      expect(receiver.accepted().filter((r) => JSON.parse(r.raw).id === event.id)).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });

  it('an endpoint gets only the events its filters name: a domain wildcard, and one workspace', async () => {
    const [approvals, workspaceOnly, control] = await Promise.all([aReceiver([]), aReceiver([]), aReceiver([])]);
    try {
      const ws = await aWorkspace(cp, cp.ownerToken);
      const other = await aWorkspace(cp, cp.ownerToken);
      const approvalsHook = await aWebhook(cp, { url: approvals.url, events: ['approval.*'] });
      const scopedHook = await aWebhook(cp, { url: workspaceOnly.url, workspace: ws.slug });
      expect(scopedHook.body.workspace).toBe(ws.slug);
      await aWebhook(cp, { url: control.url, events: ['policy.updated'] });

      await aPolicyChange(cp, other.slug, 'in-the-other-workspace');
      await aPolicyChange(cp, ws.slug, 'in-the-workspace');
      // the control endpoint got both: both messages went through the fan-out, which serves every endpoint at once
      await eventually('both policy changes at the control endpoint', () => control.accepted().length >= 2);
      await eventually('the workspace change at the workspace endpoint', () => workspaceOnly.accepted().length >= 1);
      // that fan-out made every endpoint's deliveries of both changes at once: the logs hold all there will be
      expect((await cp.request('GET', `/v1/webhooks/${approvalsHook.id}/deliveries`)).body.deliveries).toEqual([]);
      expect(approvals.requests).toHaveLength(0);
      const scopedLog = (await cp.request('GET', `/v1/webhooks/${scopedHook.id}/deliveries`)).body.deliveries as {
        status: string;
      }[];
      const toSend = scopedLog.filter((d) => d.status !== 'skipped').length;
      await eventually('every delivery of the workspace endpoint', () => workspaceOnly.requests.length >= toSend);
      const scoped = workspaceOnly.requests.map((r) => JSON.parse(r.raw));
      expect(
        scoped.every((e) => e.workspace_id === ws.id),
        'an event of another workspace reached a workspace-scoped endpoint',
      ).toBe(true);
      expect(scoped.map((e) => e.type)).toContain('policy.updated');
      expect(JSON.stringify(scoped)).not.toContain('in-the-other-workspace');
    } finally {
      await Promise.all([approvals.close(), workspaceOnly.close(), control.close()]);
    }
  });

  it('refuses private, link-local and metadata targets with 400 naming the host, and bad filters', async () => {
    const refused = [
      'http://10.1.2.3/hook',
      'http://192.168.1.10:8080/hook',
      'http://169.254.169.254/latest/meta-data/iam',
      'http://[fd00::1]/hook',
      'http://100.64.0.1/hook',
    ];
    // loopback is the developer's own machine in embedded mode; in server mode only the allowed 127.0.0.1/32 is reachable
    if (backend === 'postgres') refused.push('http://127.0.0.2:9/hook', 'http://[::1]:9/hook');
    for (const url of refused) {
      const res = await cp.request('POST', '/v1/webhooks', { body: { name: uniqueSlug('bad'), url } });
      expect(res.status, url).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
      expect(res.body.detail, url).toContain(new URL(url).hostname.replace(/^\[|\]$/g, ''));
      expect(res.text, 'the path is not echoed').not.toContain('meta-data');
    }
    for (const body of [
      { url: 'ftp://example.com/x' },
      { url: 'http://93.184.216.34/x', events: ['*'] },
      { url: 'http://93.184.216.34/x', format: 'xml' },
      { url: 'http://93.184.216.34/x', secret: 'short' },
    ]) {
      const res = await cp.request('POST', '/v1/webhooks', { body: { name: uniqueSlug('bad'), ...body } });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect((await cp.request('GET', '/v1/webhooks')).text).not.toContain('10.1.2.3');
  });

  it('the slack format posts a Slack message summarising the event, signed the same way', async () => {
    const receiver = await aReceiver([]);
    try {
      const hook = await aWebhook(cp, { url: receiver.url, events: ['policy.updated'], format: 'slack' });
      const ws = await aWorkspace(cp, cp.ownerToken);
      await aPolicyChange(cp, ws.slug);
      const got = await eventually('the Slack message', () => receiver.accepted()[0]);
      const message = JSON.parse(got.raw);
      expect(message.text).toContain(`Policy updated in ${ws.slug}`);
      expect(message.blocks[0]).toEqual({
        type: 'header',
        text: { type: 'plain_text', text: 'Policy updated', emoji: false },
      });
      expect(message.blocks.find((b: { type: string }) => b.type === 'section').fields).toEqual(
        expect.arrayContaining([
          { type: 'mrkdwn', text: `*Workspace*\n${ws.slug}` },
          { type: 'mrkdwn', text: '*version*\n1' },
        ]),
      );
      expect(message.blocks.at(-1)).toMatchObject({
        type: 'context',
        elements: [{ type: 'mrkdwn', text: expect.stringContaining('`policy.updated`') }],
      });
      expect(got.headers['x-aileron-event']).toBe('policy.updated');
      expect(
        verifySignedPayload(hook.secret, got.raw, {
          timestamp: String(got.headers['x-aileron-timestamp']),
          signature: String(got.headers['x-aileron-signature']),
        }),
      ).toEqual({ ok: true });
    } finally {
      await receiver.close();
    }
  });

  it('another organisation gets 404 on every webhook route and changes nothing; no secret or URL path is ever shown again', async () => {
    const receiver = await aReceiver([]);
    try {
      const hook = await aWebhook(cp, { url: receiver.url, events: ['policy.updated'] });
      const ws = await aWorkspace(cp, cp.ownerToken);
      await aPolicyChange(cp, ws.slug);
      await eventually('a delivery', () => receiver.accepted()[0]);
      const before = (await cp.request('GET', `/v1/webhooks/${hook.id}`)).body;

      const intruder = await anOrganization(cp);
      const attempts: [string, string, unknown?][] = [
        ['GET', `/v1/webhooks/${hook.id}`],
        ['PATCH', `/v1/webhooks/${hook.id}`, { enabled: false }],
        ['DELETE', `/v1/webhooks/${hook.id}`],
        ['GET', `/v1/webhooks/${hook.id}/deliveries`],
        ['POST', `/v1/webhooks/${hook.id}/resume`],
      ];
      for (const [method, path, body] of attempts) {
        const res = await cp.request(method, path, { token: intruder.token, ...(body ? { body } : {}) });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.code).toBe('WEBHOOK_NOT_FOUND');
      }
      // their own workspace filter cannot name ours
      const theirs = await cp.request('POST', '/v1/webhooks', {
        token: intruder.token,
        body: { name: 'x', url: receiver.url, workspace: ws.slug },
      });
      expect(theirs.status).toBe(404);
      expect((await cp.request('GET', '/v1/webhooks', { token: intruder.token })).body).toEqual({
        items: [],
        next_cursor: null,
        webhooks: [],
      });
      expect((await cp.request('GET', `/v1/webhooks/${hook.id}`)).body).toEqual(before);

      const reads = [
        await cp.request('GET', '/v1/webhooks'),
        await cp.request('GET', `/v1/webhooks/${hook.id}`),
        await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries`),
        await cp.request('GET', '/v1/audit?type=webhook.created&limit=500'),
      ];
      for (const res of reads) {
        expect(res.status).toBe(200);
        expect(res.text).not.toContain(hook.secret);
        expect(res.text).not.toContain('aileron-path-token');
      }
      expect(reads[0]!.body.webhooks.find((w: { id: string }) => w.id === hook.id)).toMatchObject({
        host: new URL(receiver.url).host,
      });
      expect(reads[0]!.body.webhooks.every((w: Record<string, unknown>) => !('secret' in w) && !('url' in w))).toBe(
        true,
      );
      // the creation is audited with who did it
      expect(
        reads[3]!.body.events.find((e: { data: { webhook?: string } }) => e.data.webhook === hook.id),
      ).toMatchObject({ type: 'webhook.created', actor: expect.stringMatching(/^token:/) });
    } finally {
      await receiver.close();
    }
  });

  it('a disabled endpoint receives nothing; changes and deletion are recorded', async () => {
    const receiver = await aReceiver([]);
    const control = await aReceiver([]);
    try {
      const hook = await aWebhook(cp, { url: receiver.url, events: ['policy.updated'] });
      await aWebhook(cp, { url: control.url, events: ['policy.updated'] });
      const patched = await cp.request('PATCH', `/v1/webhooks/${hook.id}`, {
        body: { enabled: false, events: ['policy.updated', 'approval.*'] },
      });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body).toMatchObject({
        enabled: false,
        status: 'disabled',
        events: ['policy.updated', 'approval.*'],
      });
      const ws = await aWorkspace(cp, cp.ownerToken);
      await aPolicyChange(cp, ws.slug);
      await eventually('the control delivery', () => control.accepted()[0]);
      // the fan-out that served the control endpoint gave the disabled one no delivery to send
      expect((await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries).toEqual([]);
      expect(receiver.requests).toHaveLength(0);

      expect((await cp.request('DELETE', `/v1/webhooks/${hook.id}`)).status).toBe(204);
      expect((await cp.request('GET', `/v1/webhooks/${hook.id}`)).status).toBe(404);
      const audit = (
        await cp.request('GET', '/v1/audit?type=webhook.updated,webhook.deleted&limit=500')
      ).body.events.filter((e: { data: { webhook?: string } }) => e.data.webhook === hook.id);
      expect(audit.map((e: { type: string }) => e.type).sort()).toEqual(['webhook.deleted', 'webhook.updated']);
      expect(audit.find((e: { type: string }) => e.type === 'webhook.updated').data.changed).toEqual([
        'enabled',
        'events',
      ]);
    } finally {
      await Promise.all([receiver.close(), control.close()]);
    }
  });

  it('an endpoint failing for longer than the setting is paused, flagged, tried no more, and resumes on request', async () => {
    const receiver = await aReceiver([], 500);
    const control = await aReceiver([]);
    try {
      const hook = await aWebhook(cp, { url: receiver.url, events: ['policy.updated'] });
      await aWebhook(cp, { url: control.url, events: ['policy.updated'] });
      const ws = await aWorkspace(cp, cp.ownerToken);
      await aPolicyChange(cp, ws.slug);

      // the first attempt fails and starts the failure streak; then the setting's day passes,
      // and that attempt (if it has not yet judged the streak) or the next one pauses the endpoint
      await eventually(
        'the first failure',
        async () => (await cp.request('GET', `/v1/webhooks/${hook.id}`)).body.failing_since,
      );
      advanceClock(cp, (DAY_SECONDS + 1) * 1000);
      const paused = await eventually('the endpoint to be paused', async () => {
        const res = await cp.request('GET', `/v1/webhooks/${hook.id}`);
        return res.body.paused ? res.body : undefined;
      });
      expect(paused).toMatchObject({
        status: 'paused',
        paused: true,
        paused_reason: expect.stringContaining(`longer than ${DAY_SECONDS} s`),
      });
      expect(paused.paused_at).not.toBeNull();
      expect(paused.failing_since).not.toBeNull();
      expect(
        (await cp.request('GET', '/v1/webhooks')).body.webhooks.find((w: { id: string }) => w.id === hook.id),
      ).toMatchObject({ paused: true, status: 'paused' });

      // the attempt that paused it ended the delivery as failed: no retry follows
      const tried = receiver.requests.length;
      const log = (await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
      expect(log).toHaveLength(1);
      expect(log[0]).toMatchObject({ status: 'failed', attempt_count: tried, last_status: 500 });
      expect(log[0].attempts.every((a: { status: number }) => a.status === 500)).toBe(true);

      // events while paused are not queued for it (the control endpoint shows the event went out)
      await aPolicyChange(cp, ws.slug);
      await eventually('the second event at the control endpoint', () => control.accepted().length >= 2);
      expect((await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries).toHaveLength(1);
      expect(receiver.requests).toHaveLength(tried);

      // the pause is audited, by the system
      const audit = (await cp.request('GET', '/v1/audit?type=webhook.paused&limit=100')).body.events.find(
        (e: { data: { webhook?: string } }) => e.data.webhook === hook.id,
      );
      expect(audit).toMatchObject({
        actor: 'system',
        data: { reason: expect.stringContaining(`longer than ${DAY_SECONDS} s`) },
      });

      receiver.answer(204);
      const resumed = await cp.request('POST', `/v1/webhooks/${hook.id}/resume`);
      expect(resumed.status, resumed.text).toBe(200);
      expect(resumed.body).toMatchObject({
        status: 'active',
        paused: false,
        paused_at: null,
        paused_reason: null,
        failing_since: null,
      });
      await aPolicyChange(cp, ws.slug);
      const delivered = await eventually('a delivery after resuming', () => receiver.accepted()[0]);
      expect(JSON.parse(delivered.raw)).toMatchObject({ type: 'policy.updated', data: { version: 3 } });
      await eventually('the log to show it delivered', async () => {
        const deliveries = (await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries?limit=1`)).body.deliveries;
        return deliveries[0]?.status === 'delivered';
      });
      const page = (await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries?limit=1`)).body;
      expect(page.next_cursor).toEqual(expect.any(String));
      const older = (await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries?limit=1&cursor=${page.next_cursor}`))
        .body;
      expect(older.deliveries[0]).toMatchObject({ status: 'failed' });
      expect((await cp.request('GET', `/v1/webhooks/${hook.id}/deliveries?cursor=not-a-cursor`)).status).toBe(400);
    } finally {
      await Promise.all([receiver.close(), control.close()]);
    }
  });
});

/** Whether the replica takes the organisation to have no endpoint (its events then skip the consumer). */
function saysQuiet(cp: TestControlPlane, organizationId: string): boolean {
  return cp.cp.app.get(QuietOrganizations).quietFor([{ topic: 'policy.updated', organizationId, payload: {} }]);
}

/** Until the replica has learned that the organisation has no endpoint, its events still go through the consumer. */
function knownQuiet(cp: TestControlPlane, organizationId: string): Promise<true> {
  return eventually('the replica to know the organisation has no endpoint', () => saysQuiet(cp, organizationId));
}

describe.each(BACKENDS)('an organisation without endpoints on %s', (backend) => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane(backend, serverEnv(backend));
  });
  afterAll(async () => cp?.close());

  it('hears its events from the moment an endpoint takes them: created, or enabled again', async () => {
    const org = await anOrganization(cp);
    const ws = await aWorkspace(cp, org.token);
    const receiver = await aReceiver([]);
    try {
      await aPolicyChange(cp, ws.slug, undefined, org.token);
      await knownQuiet(cp, org.id);
      // recorded while the replica knows nothing listens
      await aPolicyChange(cp, ws.slug, undefined, org.token);

      const hook = await aWebhook(cp, { url: receiver.url, events: ['policy.updated'] }, org.token);
      // no waiting: the endpoint's commit told the replica before the API answered
      await aPolicyChange(cp, ws.slug, undefined, org.token);
      const first = await eventually('the event after the endpoint was created', () => receiver.accepted()[0]);
      expect(JSON.parse(first.raw)).toMatchObject({ type: 'policy.updated', data: { version: 3 } });

      const disabled = await cp.request('PATCH', `/v1/webhooks/${hook.id}`, {
        token: org.token,
        body: { enabled: false },
      });
      expect(disabled.status, disabled.text).toBe(200);
      await aPolicyChange(cp, ws.slug, undefined, org.token);
      await knownQuiet(cp, org.id);
      const enabled = await cp.request('PATCH', `/v1/webhooks/${hook.id}`, {
        token: org.token,
        body: { enabled: true },
      });
      expect(enabled.status, enabled.text).toBe(200);
      await aPolicyChange(cp, ws.slug, undefined, org.token);
      const second = await eventually('the event after it was enabled again', () => receiver.accepted()[1]);
      expect(JSON.parse(second.raw)).toMatchObject({ type: 'policy.updated', data: { version: 5 } });
      // the versions in between were recorded while nothing took them, and went to no one since
      expect(receiver.accepted().map((r) => JSON.parse(r.raw).data.version)).toEqual([3, 5]);
    } finally {
      await receiver.close();
    }
  });
});

describe('an organisation without endpoints, on two replicas', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  beforeAll(async () => {
    a = await startTestControlPlane('postgres', serverEnv('postgres'));
    b = await aReplicaOf(a, serverEnv('postgres'));
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('hears events recorded on one replica once an endpoint created on the other reached it through Redis', async () => {
    const org = await anOrganization(a);
    const ws = await aWorkspace(a, org.token);
    const receiver = await aReceiver([]);
    try {
      await aPolicyChange(a, ws.slug, undefined, org.token);
      await knownQuiet(a, org.id);
      await aWebhook(b, { url: receiver.url, events: ['policy.updated'] }, org.token);
      // what A knew lasts a minute: a bound of 10 s fails the test if only its expiry brought the change
      await eventually('replica A to hear of the endpoint', () => !saysQuiet(a, org.id), { timeoutMs: 10_000 });
      await aPolicyChange(a, ws.slug, undefined, org.token);
      const delivered = await eventually('the event recorded on A', () => receiver.accepted()[0]);
      expect(JSON.parse(delivered.raw)).toMatchObject({ type: 'policy.updated', data: { version: 2 } });
    } finally {
      await receiver.close();
    }
  });
});

describe('server mode without an allow-list', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane('postgres');
  });
  afterAll(async () => cp?.close());

  it('refuses loopback targets', async () => {
    for (const url of ['http://127.0.0.1:9/hook', 'http://[::1]:9/hook', 'http://127.1.2.3/hook']) {
      const res = await cp.request('POST', '/v1/webhooks', { body: { name: uniqueSlug('loop'), url } });
      expect(res.status, url).toBe(400);
      expect(res.body.detail).toContain('loopback');
    }
  });
});

describe('webhook deliveries when Redis restarts empty', () => {
  let redis: RedisServer;
  let cp: TestControlPlane;
  beforeAll(async () => {
    redis = await startRedis();
    cp = await startTestControlPlane('postgres', serverEnv('postgres', { REDIS_URL: redis.url }));
  });
  afterAll(async () => {
    await cp?.close();
    redis?.stop();
  });
  afterEach(() => resetClock(cp));

  const newestDelivery = async (hook: string) =>
    (await cp.request('GET', `/v1/webhooks/${hook}/deliveries`)).body.deliveries[0];

  /** An endpoint with the first delivery of a policy change held at its receiver: in flight, its job running. */
  async function aDeliveryInFlight(plan: number[]): Promise<{ receiver: Receiver; hook: string; first: Held }> {
    const receiver = await aReceiver(plan);
    const hook = await aWebhook(cp, { url: receiver.url, events: ['policy.updated'] });
    const first = receiver.holdNext();
    await aPolicyChange(cp, (await aWorkspace(cp, cp.ownerToken)).slug);
    await first.arrived;
    return { receiver, hook: hook.id, first };
  }

  it('a delivery whose retry Redis lost is sent again once Redis is back, once, its attempts counted on', async () => {
    const { receiver, hook, first } = await aDeliveryInFlight([500]);
    try {
      // Redis goes while the first attempt is in flight: the job that would retry it is gone with it
      redis.kill();
      first.release();
      await eventually(
        'the failed first attempt in the log',
        async () => (await newestDelivery(hook))?.attempt_count === 1,
      );
      expect(await newestDelivery(hook)).toMatchObject({ status: 'pending', last_status: 500 });
      advanceClock(cp, 2 * 60_000); // past the retry (1 s) and the minute the sweep allows the queue's own

      const back = Date.now();
      await redis.restart();
      const retried = await eventually('the delivery sent again', () => receiver.requests[1]);
      console.info(`webhook delivery sent again ${retried.at - back} ms after Redis came back`);
      const log = await eventually('the log to say delivered', async () => {
        const delivery = await newestDelivery(hook);
        return delivery?.status === 'delivered' ? delivery : undefined;
      });
      expect(log.attempts.map((a: { attempt: number; status: number }) => [a.attempt, a.status])).toEqual([
        [1, 500],
        [2, 204],
      ]);
      expect(receiver.requests.map((r) => r.answered)).toEqual([500, 204]);
      expect(new Set(receiver.requests.map((r) => r.headers['x-aileron-delivery'])).size).toBe(1);
      // nothing is left to send: a sweep now queues nothing, so the receiver has all it will get
      expect(await cp.cp.app.get(WebhookDeliveryService).sweep()).toBe(0);
      expect(receiver.accepted()).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });

  it('a delivery still being sent when Redis restarts is not sent a second time by a job queued for it again', async () => {
    const { receiver, hook, first } = await aDeliveryInFlight([]);
    try {
      redis.kill();
      await redis.restart();
      // its job is gone from Redis, and its next attempt long overdue, but its send is still running
      advanceClock(cp, 10 * 60_000);
      const deliveries = cp.cp.app.get(WebhookDeliveryService);
      expect(await deliveries.sweep()).toBe(0);
      // a job queued for it all the same (a sweep that read the row just before the send began) does not send
      const event = JSON.parse((await first.arrived).raw);
      const delivery = await newestDelivery(hook);
      await expect(
        deliveries.deliver(
          {
            organizationId: event.organization_id,
            endpointId: hook,
            deliveryId: delivery.id,
            event,
            attemptsBefore: 0,
            run: 'a-second-run',
          },
          { jobId: `webhook-${delivery.id}`, attempt: 1 },
        ),
      ).rejects.toThrow('another run of this delivery is sending it');

      first.release();
      await eventually('the log to say delivered', async () => (await newestDelivery(hook))?.status === 'delivered');
      // once answered, that job finds nothing to send, and the sweep nothing to queue
      await deliveries.deliver(
        {
          organizationId: event.organization_id,
          endpointId: hook,
          deliveryId: delivery.id,
          event,
          attemptsBefore: 0,
          run: 'a-second-run',
        },
        { jobId: `webhook-${delivery.id}`, attempt: 2 },
      );
      expect(await deliveries.sweep()).toBe(0);
      expect(receiver.requests).toHaveLength(1);
      expect(
        (await newestDelivery(hook)).attempts.map((a: { attempt: number; status: number }) => [a.attempt, a.status]),
      ).toEqual([[1, 204]]);
    } finally {
      await receiver.close();
    }
  });
});

describe('approval requests in Slack', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane('pglite');
  });
  afterAll(async () => cp?.close());

  it('show server, tool, requester and rule, with a button to the review page', async () => {
    const receiver = await aReceiver([]);
    try {
      await aWebhook(cp, { url: receiver.url, events: ['approval.requested'], format: 'slack' });
      const ws = await aWorkspace(cp, cp.ownerToken);
      const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
        body: {
          rules: [
            { id: 'merges-need-a-human', effect: 'approval', servers: ['github'], tools: ['merge_pull_request'] },
          ],
        },
      });
      expect(policy.status, policy.text).toBe(200);
      const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
      const asked = await cp.request('POST', '/v1/gateway/approvals', {
        token: gateway.token,
        body: {
          server: 'github',
          tool: 'merge_pull_request',
          arguments: { repo: 'payments', number: 42 },
          principal: 'alice@example.com',
        },
      });
      expect(asked.status, asked.text).toBe(201);

      const got = await eventually('the Slack message', () => receiver.accepted()[0]);
      const message = JSON.parse(got.raw);
      expect(got.headers['x-aileron-event']).toBe('approval.requested');
      expect(message.text).toContain('alice@example.com');
      expect(message.blocks[0].text.text).toBe('Approval requested');
      const fields = message.blocks
        .flatMap((b: { fields?: { text: string }[] }) => b.fields ?? [])
        .map((f: { text: string }) => f.text);
      expect(fields).toEqual(
        expect.arrayContaining([
          '*Server*\ngithub',
          '*Tool*\nmerge_pull_request',
          '*Requester*\nalice@example.com',
          '*Rule*\nmerges-need-a-human',
        ]),
      );
      const button = message.blocks.find((b: { type: string }) => b.type === 'actions').elements[0];
      expect(button).toMatchObject({ type: 'button', text: { text: 'Review' } });
      expect(button.url).toMatch(new RegExp(`/review/${asked.body.id}$`));
    } finally {
      await receiver.close();
    }
  });
});
