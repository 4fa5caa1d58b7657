import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, anOrganization, aToken, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { everyItem } from '../support/pages';
import { aReceiver, Receiver } from '../support/webhook-receiver';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { ConsoleBrowser } from './console-browser';

interface AuditView {
  id: string;
  seq: number;
  type: string;
  tool: string | null;
}

/** An answer of the API the browser was given, with its whole body. */
interface Received {
  url: string;
  body: string;
}

/**
 * The console's audit, vault, and webhooks and audit sinks pages in Chromium,
 * on the embedded mode: a call made through the pool found in the audit log,
 * its next pages read as the list scrolls, an export of what is filtered, the
 * chain verified and then broken in the database; a secret written and rotated
 * whose value the browser never receives back, and one delivered to gateways
 * and then not, which a gateway's resolve follows; a webhook endpoint whose
 * receiver fails until it is paused, resumed from the page.
 */
describe("the console's audit, vault and webhooks pages in Chromium", () => {
  let cp: TestControlPlane;
  let chromium: ConsoleBrowser;
  let page: Page;
  const check = (p: Page, name: string) => chromium.check(p, name);
  /** every answer of the API the browser got during the file, for the vault's "never sent back" */
  const received: Received[] = [];
  const ws = uniqueSlug('ws');
  const tools = uniqueSlug('ops').slice(0, 20);

  beforeAll(async () => {
    // an endpoint failing for longer than a second is paused: the test sees a pause without waiting a day
    cp = await startTestControlPlane('pglite', { AILERON_WEBHOOK_PAUSE_AFTER_SECONDS: '1' });
    chromium = await ConsoleBrowser.start(cp);
    page = chromium.page;
    const created = await cp.request('POST', '/v1/workspaces', {
      body: { slug: ws, name: `Payments ${ws}`, policy_default: 'allow' },
    });
    expect(created.status, created.text).toBe(201);
    await chromium.signInAsOwner(cp);
    // from here every answer of the API passes through the test, body and all, before the browser gets it:
    // a response event's body can no longer be read once its page has moved on
    await chromium.context.route(/\/v1\//, async (route) => {
      const response = await route.fetch();
      const body = await response.text();
      received.push({ url: route.request().url(), body });
      await route.fulfill({ response, body });
    });
  });
  afterAll(async () => {
    // requests still in flight (the pages' polling) are left to fail quietly: the browser is going
    await chromium?.context.unrouteAll({ behavior: 'ignoreErrors' });
    await chromium?.close();
    await cp?.close();
  });
  afterEach(() => expect(chromium.takeProblems()).toEqual([]));

  const auditRows = () => page.getByRole('table', { name: 'Audit records' }).locator('tbody tr');

  it('finds a call made through the pool in the audit log, narrows it by tool, reads the next page as the list scrolls, and exports what is filtered', async () => {
    await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.everything, tools);
    const agent = await aToken(cp, cp.ownerToken, { name: 'release-agent', role: 'member', workspace: ws });
    const { client } = await connect(cp, agent.token, `/mcp/${ws}/${tools}`);
    try {
      const result = await client.callTool({ name: 'echo', arguments: { message: 'release payments 2.4.1' } });
      expect(textOf(result)).toContain('release payments 2.4.1');
    } finally {
      await client.close();
    }
    // more than a page (50) of records: a gateway's batch of local calls
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const events = Array.from({ length: 60 }, (_, i) => ({
      id: randomUUID(),
      type: 'execution.succeeded',
      time: new Date(Date.now() - 60_000 + i).toISOString(),
      execution_mode: 'local',
      principal: 'user:alice@example.com',
      server: 'github',
      tool: 'get_issue',
      decision: i % 10 === 0 ? 'deny' : 'allow',
      session: `sess-${i % 3}`,
    }));
    const ingested = await cp.request('POST', '/v1/gateway/audit', { token: gateway.token, body: { events } });
    expect(ingested.body, ingested.text).toMatchObject({ accepted: 60 });
    const echoes = await eventually('the pool call in the audit log', async () => {
      const items = await everyItem<AuditView>(cp, `/v1/workspaces/${ws}/audit?tool=echo`);
      return items.some((r) => r.type === 'execution.succeeded') && items;
    });

    await page.goto(`${cp.url}/workspaces/${ws}/audit`);
    await expect.poll(() => auditRows().count()).toBe(50);
    // the oldest record is on a later page; scrolling to the end of the list reads it
    const everything = await everyItem<AuditView>(cp, `/v1/workspaces/${ws}/audit`);
    const oldest = everything[everything.length - 1]!;
    await expect.poll(() => page.getByRole('button', { name: `Record ${oldest.seq}`, exact: true }).count()).toBe(0);
    await page.mouse.move(640, 400);
    await expect
      .poll(async () => {
        await page.mouse.wheel(0, 5000);
        return auditRows().count();
      })
      .toBeGreaterThan(50);
    await expect.poll(() => page.getByText(/records, back to the start of the log$/).isVisible()).toBe(true);
    await expect.poll(() => page.getByRole('button', { name: `Record ${oldest.seq}`, exact: true }).count()).toBe(1);
    await check(page, 'audit');

    // with the keyboard: a record's details open with Enter and close with Escape
    await page.getByRole('button', { name: `Record ${oldest.seq}`, exact: true }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('dialog', { name: `Record #${oldest.seq}` }).isVisible()).toBe(true);
    await check(page, 'audit-record');
    await page.keyboard.press('Escape');
    await expect.poll(() => page.getByRole('dialog').count()).toBe(0);

    await page.getByRole('textbox', { name: 'Tool' }).fill('echo');
    await expect.poll(() => auditRows().count()).toBe(echoes.length);
    for (const row of await auditRows().all()) expect(await row.textContent()).toContain(`${tools} → echo`);
    await expect.poll(() => new URL(page.url()).searchParams.get('tool')).toBe('echo');
    await check(page, 'audit-filtered');

    // the server writes the file with the list's filters; the browser only saves it
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Export JSON Lines' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('audit.jsonl');
    const exported = readFileSync((await download.path())!, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AuditView);
    expect(exported.map((r) => r.id).sort()).toEqual(echoes.map((r) => r.id).sort());
    expect(exported.every((r) => r.tool === 'echo')).toBe(true);
    const [csv] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Export CSV' }).click(),
    ]);
    const lines = readFileSync((await csv.path())!, 'utf8')
      .trim()
      .split('\n');
    expect(lines[0]).toMatch(/^seq,id,type,/);
    expect(lines).toHaveLength(echoes.length + 1);

    // the other filters: a decision, and a time range
    await page.getByRole('button', { name: 'Clear filters' }).click();
    await chromium.pick(page, 'Decision', 'deny');
    await expect.poll(() => auditRows().count()).toBe(6);
    for (const row of await auditRows().all()) expect(await row.textContent()).toMatch(/deny/i);
    await chromium.pick(page, 'Time', 'Between…');
    await page.getByLabel('From', { exact: true }).fill('2099-01-01T00:00');
    await expect.poll(() => page.getByText('Nothing matches these filters.').isVisible()).toBe(true);
    // the address carries the filters: the filtered view is a link
    await expect.poll(() => new Date(new URL(page.url()).searchParams.get('from')!).getFullYear()).toBe(2099);
    await chromium.pick(page, 'Time', 'Last hour');
    await expect.poll(() => auditRows().count()).toBe(6);
  });

  it('verifies the chain intact, then names the record someone changed in the database', async () => {
    await page.goto(`${cp.url}/workspaces/${ws}/audit?tool=echo`);
    await expect.poll(() => auditRows().count()).toBeGreaterThan(0);
    // with the keyboard: Tab from the export links reaches the button, Enter presses it
    await page.getByRole('link', { name: 'Export CSV' }).focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Verify chain');
    await page.keyboard.press('Enter');
    const intact = page.getByRole('status').filter({ hasText: 'Chain intact' });
    await expect.poll(() => intact.textContent()).toMatch(/All \d+ records and \d+ signed checkpoints/);
    await check(page, 'audit-verified');

    // as someone holding the data directory: the append-only trigger off, one stored record changed
    const [target] = await everyItem<AuditView>(cp, `/v1/workspaces/${ws}/audit?tool=echo&type=execution.succeeded`);
    await cp.cp.database.client.$transaction(async (tx) => {
      await tx.$executeRawUnsafe('SET LOCAL session_replication_role = replica');
      await tx.$executeRawUnsafe(`UPDATE audit_events SET decision = 'deny' WHERE id = $1::uuid`, target!.id);
    });
    await page.getByRole('button', { name: 'Verify chain' }).click();
    const broken = page.getByRole('alert').filter({ hasText: 'Chain broken' });
    await expect.poll(() => broken.textContent()).toContain(`Record #${target!.seq} (${target!.id})`);
    expect(await broken.textContent()).toMatch(/edited/);
    // the list is read again: the changed record shows as it is stored now
    const row = auditRows().filter({ has: page.getByRole('button', { name: `Record ${target!.seq}`, exact: true }) });
    await expect.poll(() => row.textContent()).toContain('deny');
    await check(page, 'audit-broken');
  });

  const firstValue = `ghp_${randomBytes(12).toString('hex')}`;
  const secondValue = `ghp_${randomBytes(12).toString('hex')}`;

  /** Every text the page holds: its markup and what its inputs hold (a value property is not in the markup). */
  const pageText = async () =>
    `${await page.content()}\n${(
      (await page.evaluate('[...document.querySelectorAll("input, textarea")].map((i) => i.value)')) as string[]
    ).join('\n')}`;

  it('writes a secret and rotates it; the page shows its versions and never its value', async () => {
    await page.goto(`${cp.url}/workspaces/${ws}/vault`);
    await expect.poll(() => page.getByText('No secrets').isVisible()).toBe(true);
    await check(page, 'vault-empty');
    await page.getByRole('button', { name: 'New secret' }).click();
    await page.getByRole('textbox', { name: 'Path', exact: true }).fill('github/token');
    // with the keyboard: the value typed, Enter writes it
    await page.getByRole('dialog').getByLabel('Value').focus();
    await page.keyboard.type(firstValue);
    await check(page, 'vault-write');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByText('vault://github/token').isVisible()).toBe(true);
    await expect.poll(() => page.getByLabel('Versions of github/token').textContent()).toBe('v1');
    expect(await pageText()).not.toContain(firstValue);

    await page.getByRole('button', { name: 'Rotate github/token' }).click();
    await page.getByRole('dialog').getByLabel('New value').fill(secondValue);
    await page.getByRole('button', { name: 'Write new version' }).click();
    await expect.poll(() => page.getByLabel('Versions of github/token').textContent()).toBe('v2v1');
    await expect.poll(() => page.getByRole('dialog').count()).toBe(0);
    const text = await pageText();
    expect(text).not.toContain(firstValue);
    expect(text).not.toContain(secondValue);
    const stored = await cp.request('GET', `/v1/workspaces/${ws}/secrets/github/token`);
    expect(stored.body).toMatchObject({ version: 2, versions: [1, 2] });
    await check(page, 'vault');

    // the workspace key, behind a confirmation
    await page.getByRole('button', { name: 'Rotate workspace key' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Rotate' }).click();
    await expect
      .poll(() => page.getByText(/Workspace key version 2: 2 data keys sealed under it/).isVisible())
      .toBe(true);
  });

  const npmFirst = `npm_${randomBytes(12).toString('hex')}`;
  const npmSecond = `npm_${randomBytes(12).toString('hex')}`;

  it('delivers a secret to gateways only when its writer says so, and changes that behind a confirmation: a gateway gets the value while it is on', async () => {
    // a local server of the workspace that names the secret, and a gateway of the workspace that would start it
    const server = uniqueSlug('local').slice(0, 20);
    const published = await cp.request('POST', '/v1/catalog/servers', {
      body: {
        name: server,
        version: '1.0.0',
        command: 'node',
        args: ['server.js'],
        env: { NPM_TOKEN: 'vault://local/npm-token' },
      },
    });
    expect(published.status, published.text).toBe(201);
    const assigned = await cp.request('PUT', `/v1/workspaces/${ws}/servers/${server}`, { body: { version: '1.0.0' } });
    expect(assigned.status, assigned.text).toBe(200);
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const resolve = () =>
      cp.request('POST', '/v1/gateway/secrets/resolve', { token: gateway.token, body: { server, version: '1.0.0' } });
    const deliverySwitch = (path: string) => page.getByRole('switch', { name: `Deliver ${path} to gateways` });
    const stored = async (path: string) => (await cp.request('GET', `/v1/workspaces/${ws}/secrets/${path}`)).body;

    await page.goto(`${cp.url}/workspaces/${ws}/vault`);
    await page.getByRole('button', { name: 'New secret' }).click();
    const dialog = page.getByRole('dialog');
    // off unless the writer says so
    expect(await dialog.getByRole('checkbox', { name: 'Deliver to gateways' }).isChecked()).toBe(false);
    await dialog.getByRole('textbox', { name: 'Path', exact: true }).fill('local/npm-token');
    await dialog.getByLabel('Value').fill(npmFirst);
    // with the keyboard: Space ticks it
    await dialog.getByRole('checkbox', { name: 'Deliver to gateways' }).focus();
    await page.keyboard.press('Space');
    expect(await dialog.getByRole('checkbox', { name: 'Deliver to gateways' }).isChecked()).toBe(true);
    expect(await dialog.textContent()).toContain("The workspace's gateways may receive it to start local servers");
    await check(page, 'vault-write-deliver');
    await dialog.getByRole('button', { name: 'Write' }).click();
    await expect.poll(() => deliverySwitch('local/npm-token').isChecked()).toBe(true);
    expect(await deliverySwitch('github/token').isChecked()).toBe(false);
    expect(await stored('local/npm-token')).toMatchObject({ version: 1, deliver_to_gateways: true });
    const delivered = await resolve();
    expect(delivered.status, delivered.text).toBe(200);
    expect(delivered.body.secrets).toMatchObject([{ path: 'local/npm-token', version: 1, value: npmFirst }]);
    await check(page, 'vault-delivery');

    // turning it off asks first; Cancel changes nothing
    await deliverySwitch('local/npm-token').focus();
    await page.keyboard.press('Space');
    await expect
      .poll(() => dialog.getByRole('heading', { name: 'Stop delivering to gateways' }).isVisible())
      .toBe(true);
    await check(page, 'vault-delivery-confirm');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect.poll(() => page.getByRole('dialog').count()).toBe(0);
    expect(await deliverySwitch('local/npm-token').isChecked()).toBe(true);
    expect((await stored('local/npm-token')).deliver_to_gateways).toBe(true);

    await deliverySwitch('local/npm-token').focus();
    await page.keyboard.press('Space');
    await dialog.getByRole('button', { name: 'Stop delivering' }).click();
    await expect.poll(() => deliverySwitch('local/npm-token').isChecked()).toBe(false);
    expect((await stored('local/npm-token')).deliver_to_gateways).toBe(false);
    const refused = await resolve();
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body.code).toBe('SECRET_NOT_DELIVERABLE');
    expect(refused.text).not.toContain(npmFirst);
    // the change is on the record, by the person who made it
    const changes = await cp.request('GET', `/v1/workspaces/${ws}/audit?type=secret.delivery_changed`);
    expect(changes.body.items.map((r: { data: unknown }) => r.data)).toEqual([
      { path: 'local/npm-token', deliver_to_gateways: false, previous: true },
      { path: 'local/npm-token', deliver_to_gateways: true, previous: false },
    ]);
    expect(changes.body.items[0].actor).toMatch(/^user:/);

    // a rotation shows the setting as it is, and may change it with the new value
    await page.getByRole('button', { name: 'Rotate local/npm-token' }).click();
    const rotate = dialog.getByRole('checkbox', { name: 'Deliver to gateways' });
    expect(await rotate.isChecked()).toBe(false);
    await dialog.getByLabel('New value').fill(npmSecond);
    await rotate.check();
    await dialog.getByRole('button', { name: 'Write new version' }).click();
    await expect.poll(() => deliverySwitch('local/npm-token').isChecked()).toBe(true);
    expect(await stored('local/npm-token')).toMatchObject({ version: 2, deliver_to_gateways: true });
    expect((await resolve()).body.secrets).toMatchObject([{ version: 2, value: npmSecond }]);
    const text = await pageText();
    expect(text).not.toContain(npmFirst);
    expect(text).not.toContain(npmSecond);
  });

  const receivers: Receiver[] = [];
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
  });

  const aPolicyChange = async () => {
    const res = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: { rules: [{ id: uniqueSlug('rule'), effect: 'deny', tools: ['x'] }] },
    });
    expect(res.status, res.text).toBe(200);
  };
  /** A delivery in the log, by its event, the receiver's answer and its state, as the row reads. */
  const delivery = (answer: string, status: string) =>
    page.getByRole('button', { name: new RegExp(`^policy\\.updated\\s*${answer}\\s*${status}\\b`, 'i') });

  it("shows a webhook's deliveries with the receiver's answer, the pause when it keeps failing, and delivers again once resumed from the page", async () => {
    const receiver = await aReceiver([], 204);
    receivers.push(receiver);
    await page.goto(`${cp.url}/webhooks`);
    await expect.poll(() => page.getByText('No endpoints').isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByRole('textbox', { name: 'Name' }).fill('policy-to-ops');
    await page.getByRole('textbox', { name: 'URL' }).fill(receiver.url);
    await page.getByRole('combobox', { name: 'Events' }).fill('policy.updated');
    await page.keyboard.press('Enter');
    await check(page, 'webhook-new');
    await page.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => page.getByLabel('New signing secret', { exact: true }).textContent()).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'Done' }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'policy-to-ops' }).isVisible()).toBe(true);

    await aPolicyChange();
    await expect.poll(() => delivery('HTTP 204', 'delivered').isVisible()).toBe(true);
    expect(receiver.accepted()).toHaveLength(1);
    await check(page, 'webhooks');

    // the receiver fails from now on: retried, then the endpoint is paused
    receiver.answer(500);
    await aPolicyChange();
    await expect.poll(() => page.getByRole('alert', { name: 'Paused' }).isVisible()).toBe(true);
    expect(await page.getByLabel('State: paused').isVisible()).toBe(true);
    await expect.poll(() => delivery('HTTP 500', 'failed').isVisible()).toBe(true);
    // with the keyboard: the delivery opens on Enter and shows every attempt and its answer
    await delivery('HTTP 500', 'failed').focus();
    await page.keyboard.press('Enter');
    const attempts = page.getByRole('table', { name: /^Attempts of / });
    await expect.poll(() => attempts.locator('tbody tr').count()).toBeGreaterThan(1);
    expect(await attempts.textContent()).toContain('HTTP 500');
    await check(page, 'webhooks-paused');

    receiver.answer(204);
    const failures = receiver.requests.length;
    await page.getByRole('button', { name: 'Resume' }).focus();
    await page.keyboard.press('Space');
    await expect.poll(() => page.getByLabel('State: active').isVisible()).toBe(true);
    await aPolicyChange();
    await expect.poll(() => delivery('HTTP 204', 'delivered').count()).toBe(2);
    expect(receiver.accepted()).toHaveLength(2);
    expect(receiver.requests).toHaveLength(failures + 1);
  });

  /** a secret that one answer does carry (shown once): the search below finds what is there */
  let sinkSecret = '';
  it('adds an audit sink, shows its secret once and how its delivery goes', async () => {
    const siem = await aReceiver([], 200);
    receivers.push(siem);
    await page.goto(`${cp.url}/webhooks`);
    // with the keyboard: the tabs move with the arrow keys
    await page.getByRole('tab', { name: 'Webhooks' }).focus();
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByText('No sinks').isVisible()).toBe(true);
    expect(new URL(page.url()).searchParams.get('tab')).toBe('sinks');
    await page.getByRole('button', { name: 'Add sink' }).click();
    await page.getByRole('textbox', { name: 'Name' }).fill('splunk');
    await page.getByRole('textbox', { name: 'URL' }).fill(siem.url);
    await page.getByRole('button', { name: 'Create' }).click();
    sinkSecret = await eventually(
      'the secret shown once',
      async () =>
        /\S{16,}/.exec((await page.getByLabel('New signing secret', { exact: true }).textContent()) ?? '')?.[0],
    );
    await page.getByRole('button', { name: 'Done' }).click();
    // the organisation's records reach the sink, and the page says when the last batch went
    await expect.poll(() => siem.accepted().length).toBeGreaterThan(0);
    await expect.poll(() => page.getByText('none yet').count()).toBe(0);
    expect(await page.content()).not.toContain(sinkSecret);
    await check(page, 'audit-sinks');
  });

  it("shows the organisation's own audit log", async () => {
    await page.goto(`${cp.url}/audit`);
    // the webhook's pause is the organisation's record, by the system
    await page.getByRole('textbox', { name: 'Actor' }).fill('system');
    await expect
      .poll(() => page.getByRole('table', { name: 'Audit records' }).textContent())
      .toContain('webhook.paused');
    await check(page, 'audit-organization');
  });

  it("shows an admin of one organisation nothing of another's audit log or vault, whatever URL is typed", async () => {
    const other = await anOrganization(cp);
    const theirs = uniqueSlug('secret');
    const made = await cp.request('POST', '/v1/workspaces', {
      token: other.token,
      body: { slug: theirs, name: 'Their secret project' },
    });
    expect(made.status, made.text).toBe(201);
    for (const path of [`/workspaces/${theirs}/audit`, `/workspaces/${theirs}/vault`]) {
      await page.goto(cp.url + path);
      await expect.poll(() => page.getByText('WORKSPACE_NOT_FOUND').first().isVisible(), { message: path }).toBe(true);
      expect(await page.content(), path).not.toContain('Their secret project');
    }
  });

  it('never received a secret value from the server, in any answer of the whole file', async () => {
    // the pages above asked for the vault's list, the written secret's metadata and the audit log after each write
    expect(received.some((a) => a.url.includes(`/v1/workspaces/${ws}/secrets`))).toBe(true);
    expect(received.length).toBeGreaterThan(50);
    const leaks = received
      .filter((a) => [firstValue, secondValue, npmFirst, npmSecond].some((value) => a.body.includes(value)))
      .map((a) => a.url);
    expect(leaks).toEqual([]);
    // the search is not blind: the sink's secret, which its creation answered once, is found, in that answer alone
    expect(received.filter((a) => a.body.includes(sinkSecret)).map((a) => new URL(a.url).pathname)).toEqual([
      '/v1/audit/sinks',
    ]);
  });
});
