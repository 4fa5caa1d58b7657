import { randomUUID } from 'node:crypto';
import { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalIdp } from '../auth/local-idp';
import { aGateway, anOrganization, aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { ConsoleBrowser } from './console-browser';

const POLICY = {
  rules: [
    { id: 'allow-the-rest', effect: 'allow' },
    { id: 'no-sums', effect: 'deny', tools: ['get-sum'] },
    { id: 'images-need-approval', effect: 'approval', tools: ['get-tiny-image'] },
  ],
};

/** The figure cards of the overview, by their label. */
const figure = (page: Page, label: string) => page.getByRole('group', { name: label, exact: true });

/**
 * The console's overview (the landing page), the policy replay from the
 * policy page and the identity provider's settings, in Chromium over calls
 * really made through the pool and reported by a gateway. Each page is
 * checked with axe-core, photographed under test-results/console/ and used
 * with the keyboard alone at least once.
 */
describe('the console overview, policy replay and identity provider settings in Chromium', () => {
  let cp: TestControlPlane;
  let chromium: ConsoleBrowser;
  let page: Page;
  let ws = '';
  let server = '';
  let gateway: { id: string; name: string; token: string };

  beforeAll(async () => {
    // a call that needs approval answers at once with its pending request
    cp = await startTestControlPlane('pglite', { AILERON_POOL_APPROVAL_WAIT_SECONDS: '0' });
    chromium = await ConsoleBrowser.start(cp);
    ({ page } = chromium);

    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    expect((await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: POLICY })).status).toBe(200);
    server = await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.everything);
    gateway = await aGateway(cp, cp.ownerToken, ws, { name: 'ada-laptop' });
    const shipped = await cp.request('POST', '/v1/gateway/audit', {
      token: gateway.token,
      body: {
        events: [
          {
            id: randomUUID(),
            type: 'execution.succeeded',
            time: new Date(Date.now() - 5 * 60_000).toISOString(),
            server: 'laptop-git',
            tool: 'status',
            decision: 'allow',
          },
        ],
      },
    });
    expect(shipped.body.accepted, shipped.text).toBe(1);
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws}/${server}`);
    try {
      for (const n of [1, 2, 3]) {
        const ok = await client.callTool({ name: 'echo', arguments: { message: `hello ${n}` } });
        expect(ok.isError, textOf(ok)).toBeFalsy();
      }
      expect(textOf(await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } }))).toContain('POLICY_DENIED');
      expect(textOf(await client.callTool({ name: 'get-tiny-image', arguments: {} }))).toContain('APPROVAL_PENDING');
    } finally {
      await client.close();
    }
    await eventually(
      'the pool calls in the audit log',
      async () => (await cp.request('GET', `/v1/workspaces/${ws}/overview`)).body.totals.calls === 6,
    );
  });
  afterAll(async () => {
    await chromium?.close();
    await cp?.close();
  });
  afterEach(() => expect(chromium.takeProblems()).toEqual([]));

  it('lands on the overview after signing in, and shows the calls as charts with their numbers', async () => {
    await chromium.signInAsOwner(cp);
    await expect.poll(() => page.getByRole('heading', { name: /^Overview of / }).isVisible()).toBe(true);

    await page.goto(`${cp.url}/overview/${ws}`);
    await expect.poll(() => figure(page, 'Calls').textContent()).toBe('Calls6');
    expect(await figure(page, 'Denied').textContent()).toBe('Denied1');
    expect(await figure(page, 'Sent to approval').textContent()).toBe('Sent to approval1');
    expect(await figure(page, 'Approvals waiting').textContent()).toContain('Approvals waiting1');
    expect(await figure(page, 'Pool instances running').textContent()).toBe('Pool instances running1 of 1');
    expect(await figure(page, 'Gateways seen').textContent()).toBe('Gateways seen1 of 1');
    // the charts are drawn: a bar for each kind of call in the minutes that had some
    const calls = page.getByRole('figure', { name: 'Calls per minute' });
    await expect.poll(() => calls.locator('.recharts-bar-rectangle path').count()).toBeGreaterThan(0);
    expect(
      await page.getByRole('figure', { name: 'Denials and approvals per minute' }).locator('svg').count(),
    ).toBeGreaterThan(0);
    const pool = page.getByRole('region', { name: 'Pool instances' });
    expect(await pool.getByRole('row', { name: new RegExp(server) }).textContent()).toContain('running');
    const gateways = page.getByRole('region', { name: 'Gateways last seen' });
    expect(await gateways.getByRole('row', { name: /ada-laptop/ }).textContent()).toContain('just now');
    await chromium.check(page, 'overview');

    // with the keyboard: the numbers behind the chart, then the last day by hour
    await page.getByRole('button', { name: 'Show the numbers' }).focus();
    await page.keyboard.press('Enter');
    const table = page.getByRole('table', { name: 'Calls per minute' });
    const rows = await table.locator('tbody tr').allTextContents();
    expect(rows.length).toBeGreaterThan(0);
    const sums = await table
      .locator('tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) => [...tr.querySelectorAll('td')].slice(1).map((td) => Number(td.textContent))),
      );
    // calls, allowed, denied, sent to approval: the minutes add up to the figures above
    expect(sums.reduce((total, row) => total.map((n, i) => n + row[i]!), [0, 0, 0, 0])).toEqual([6, 4, 1, 1]);
    await chromium.check(page, 'overview-numbers');
    await page.getByRole('radio', { name: 'Last hour' }).focus();
    await page.keyboard.press('ArrowRight');
    await page.waitForURL(`${cp.url}/overview/${ws}?window=1d`);
    await expect.poll(() => page.getByRole('heading', { name: 'Calls per hour' }).isVisible()).toBe(true);
    expect(await figure(page, 'Calls').textContent()).toBe('Calls6');
    await chromium.check(page, 'overview-day');

    // another organisation's workspace, typed in the address: the API's 404, nothing of theirs
    const other = await anOrganization(cp);
    const theirs = (await aWorkspace(cp, other.token)).slug;
    await page.goto(`${cp.url}/overview/${theirs}`);
    await expect.poll(() => page.getByText('WORKSPACE_NOT_FOUND').first().isVisible()).toBe(true);
    expect(await page.getByRole('group', { name: 'Calls' }).count()).toBe(0);
  });

  it('replays a draft from the policy page and lists the calls it would decide differently', async () => {
    await page.goto(`${cp.url}/workspaces/${ws}/policy`);
    const editor = page.getByRole('textbox', { name: 'Policy document (YAML)' });
    await expect.poll(() => editor.inputValue()).toContain('allow-the-rest');
    await editor.fill(`${await editor.inputValue()}  - id: no-echo\n    effect: deny\n    tools: [echo]\n`);
    await expect.poll(() => page.getByText('Valid: 4 rules').isVisible()).toBe(true);
    // with the keyboard: the span, then the replay
    await page.getByRole('combobox', { name: 'Calls recorded in' }).focus();
    await page.keyboard.press('ArrowDown');
    await page.getByRole('option', { name: 'the last day' }).waitFor();
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('Enter');
    expect(await page.getByRole('combobox', { name: 'Calls recorded in' }).inputValue()).toBe('the last day');
    await page.getByRole('button', { name: 'Replay the draft' }).focus();
    await page.keyboard.press('Enter');
    const changed = page.getByRole('table', { name: 'Calls decided differently' });
    await expect.poll(() => changed.locator('tbody tr').count()).toBe(3);
    for (const row of await changed.locator('tbody tr').allTextContents()) {
      expect(row).toContain(`${server} → echo`);
      expect(row).toContain('allow → deny');
      expect(row).toContain('no-echo');
    }
    expect(
      (await changed.locator('tbody tr').allTextContents()).map((row) => /hello \d/.exec(row)?.[0]).sort(),
    ).toEqual(['hello 1', 'hello 2', 'hello 3']);
    // the three echoes, the sum, the image and the gateway's local call were decided again
    expect(await page.getByRole('status').filter({ hasText: 'decided differently' }).textContent()).toContain(
      '3 calls decided differently among 6 recorded',
    );
    // nothing was saved
    expect((await cp.request('GET', `/v1/workspaces/${ws}/policy`)).body.version).toBe(1);
    await chromium.check(page, 'policy-replay');
  });

  it('saves a change to the identity provider settings, never shows the client secret, and tests the sign-in', async () => {
    const SECRET = 'client-secret-that-never-comes-back';
    const idp = new LocalIdp('/idp');
    await idp.start();
    const answers: string[] = [];
    const listen = (response: import('playwright-core').Response) => {
      if (new URL(response.url()).pathname.startsWith('/v1/'))
        void response.text().then(
          (text) => answers.push(text),
          () => undefined,
        );
    };
    page.on('response', listen);
    try {
      await idp.trustedBy(cp, { client_id: idp.clientId, client_secret: SECRET });
      await page.goto(`${cp.url}/overview`);
      // with the keyboard: the navigation's link to the page
      await page.getByRole('link', { name: 'Identity provider' }).focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${cp.url}/organization/identity-provider`);
      const issuer = page.getByRole('textbox', { name: 'Issuer' });
      await expect.poll(() => issuer.inputValue()).toBe(idp.issuer);
      const secret = page.getByLabel('Client secret');
      expect(await secret.inputValue()).toBe('');
      expect(await page.getByText('A secret is stored and is never shown').isVisible()).toBe(true);
      await chromium.check(page, 'identity-provider');

      // with the keyboard: a new audience, saved with Enter
      await page.getByRole('textbox', { name: 'Audience' }).focus();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.type('aileron-console');
      await page.keyboard.press('Enter');
      await expect.poll(() => page.getByText('Identity provider saved').isVisible()).toBe(true);
      const saved = (await cp.request('GET', '/v1/organization/identity-provider')).body;
      expect(saved).toMatchObject({ audience: 'aileron-console', client_id: idp.clientId, client_secret_set: true });
      expect(await secret.inputValue()).toBe('');
      await page.reload();
      await expect.poll(() => page.getByRole('textbox', { name: 'Audience' }).inputValue()).toBe('aileron-console');
      expect(await page.getByLabel('Client secret').inputValue()).toBe('');
      expect(await page.content()).not.toContain(SECRET);

      // typing not yet saved outlives another admin's save, seen when this one comes back to the tab
      const audience = page.getByRole('textbox', { name: 'Audience' });
      await audience.fill('typed-not-saved');
      const { client_secret_set: _, ...stored } = saved;
      const other = await cp.request('PUT', '/v1/organization/identity-provider', {
        body: { ...stored, default_role: 'auditor' },
      });
      expect(other.status, other.text).toBe(200);
      await page.evaluate(`window.dispatchEvent(new Event('visibilitychange'))`);
      await expect
        .poll(() => page.getByText('Someone saved other identity provider settings meanwhile').isVisible())
        .toBe(true);
      expect(await audience.inputValue()).toBe('typed-not-saved');
      await chromium.check(page, 'identity-provider-newer');
      await page.getByRole('button', { name: 'Load the saved settings instead' }).click();
      await expect.poll(() => audience.inputValue()).toBe('aileron-console');
      expect(await page.getByRole('combobox', { name: 'Default role', exact: true }).inputValue()).toBe('auditor');
      expect(answers.length).toBeGreaterThan(0);
      expect(answers.join('\n')).not.toContain(SECRET);

      // the test: a sign-in through the provider comes back here, signed in as the provider's person
      const owner = await cp.request('POST', '/v1/users', {
        body: { email: 'olga@example.com', name: 'Olga Owner', role: 'owner' },
      });
      expect(owner.status, owner.text).toBe(201);
      idp.person = { sub: 'olga', email: 'olga@example.com', email_verified: true, name: 'Olga Owner' };
      await page.getByRole('button', { name: 'Test sign-in' }).click();
      await page.getByRole('dialog').getByRole('link', { name: 'Sign in through the provider' }).click();
      await page.waitForURL(`${cp.url}/organization/identity-provider?tested=1`);
      await expect.poll(() => page.getByText('The test sign-in worked').isVisible()).toBe(true);
      expect(await page.getByRole('alert').filter({ hasText: 'test sign-in' }).textContent()).toContain('Olga Owner');
      expect(await page.content()).not.toContain(SECRET);
      await chromium.check(page, 'identity-provider-tested');
    } finally {
      page.off('response', listen);
      await idp.stop();
    }
  });
});
