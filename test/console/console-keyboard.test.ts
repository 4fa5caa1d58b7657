import { join } from 'node:path';
import { Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { ConsoleBrowser } from './console-browser';

/**
 * The whole console with the keyboard alone, as a person who uses no mouse:
 * signed in, they reach every entry of the navigation with Tab and open it
 * with Enter, and on each page operate its main control (a dialog opened and
 * closed with Escape, a form submitted, a tab or a filter changed with the
 * arrow keys). No click anywhere. axe-core checks every page visited.
 */
describe('the console with the keyboard alone', () => {
  let cp: TestControlPlane;
  let chromium: ConsoleBrowser;
  let page: Page;
  let ws: { slug: string; name: string };
  let sinkId: string;

  beforeAll(async () => {
    cp = await startTestControlPlane('pglite');
    chromium = await ConsoleBrowser.start(cp);
    page = chromium.page;
    const { slug } = await aWorkspace(cp, cp.ownerToken);
    ws = { slug, name: `Workspace ${slug}` };
    // something on the pages that list things: a secret, an agent session, an audit sink
    const secret = await cp.request('PUT', `/v1/workspaces/${slug}/secrets/deploy/token`, { body: { value: 'x' } });
    expect(secret.status, secret.text).toBe(200);
    const session = await cp.request('POST', `/v1/workspaces/${slug}/sessions`, { body: { name: 'keyboard-agent' } });
    expect(session.status, session.text).toBe(201);
    const sink = await cp.request('POST', '/v1/audit/sinks', {
      body: { name: 'siem', url: 'http://127.0.0.1:9/nothing-listens' },
    });
    expect(sink.status, sink.text).toBe(201);
    sinkId = sink.body.id;
    await chromium.signInAsOwner(cp);
  });
  afterAll(async () => {
    await chromium?.close();
    await cp?.close();
  });
  afterEach(async ({ task }) => {
    // a page that failed is the one to look at
    if (task.result?.state === 'fail')
      await page.screenshot({ path: join('test-results', 'console', `keyboard-failed-${task.name.slice(0, 30)}.png`) });
    expect(chromium.takeProblems()).toEqual([]);
  });

  const nav = () => page.getByRole('navigation', { name: 'Console' });
  const focused = (target: Locator) => target.evaluate((el) => el === el.ownerDocument.activeElement);
  const tabTo = (target: Locator, backwards = false) => chromium.tabTo(page, target, { presses: 150, backwards });

  /** Reaches a navigation entry with Tab and follows it with Enter. */
  async function follow(entry: string, path: string): Promise<void> {
    await tabTo(nav().getByRole('link', { name: entry, exact: true }));
    await page.keyboard.press('Enter');
    await page.waitForURL(`${cp.url}${path}`);
  }

  /** A button that opens a dialog: Enter opens it, Escape closes it, and the focus is back on the button. */
  async function dialogOf(button: string, title: string): Promise<void> {
    const opener = page.getByRole('button', { name: button, exact: true });
    await tabTo(opener);
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: title });
    await dialog.waitFor();
    // the dialog holds the focus while it is open
    await expect.poll(() => dialog.evaluate((el) => el.contains(el.ownerDocument.activeElement))).toBe(true);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    await expect.poll(() => focused(opener)).toBe(true);
  }

  /** A form filled in from `field` on, each value typed and Tab to the next, and submitted with Enter. */
  async function submit(field: string, ...values: string[]): Promise<void> {
    await tabTo(page.getByRole('textbox', { name: field }));
    for (const [i, value] of values.entries()) {
      if (i > 0) await page.keyboard.press('Tab');
      await page.keyboard.type(value);
    }
    await page.keyboard.press('Enter');
  }

  /** The audit page's Verify chain, pressed with Enter. */
  async function verifyChain(): Promise<void> {
    await tabTo(page.getByRole('button', { name: 'Verify chain' }));
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByText('Chain intact').isVisible()).toBe(true);
  }

  /** A segmented control (radio buttons): Tab reaches the one chosen, an arrow key chooses the next. */
  async function choose(group: string, from: string, to: string): Promise<void> {
    await tabTo(page.getByRole('radiogroup', { name: group }).getByRole('radio', { name: from }));
    await page.keyboard.press('ArrowRight');
    await expect
      .poll(() => page.getByRole('radiogroup', { name: group }).getByRole('radio', { name: to }).isChecked())
      .toBe(true);
  }

  it('skips to the page, and works the header: the person menu opens and closes', async () => {
    await page.goto(`${cp.url}/overview`);
    await nav().waitFor();
    await page.keyboard.press('Tab');
    const skip = page.getByRole('link', { name: 'Skip to the page' });
    expect(await focused(skip)).toBe(true);
    await page.keyboard.press('Enter');
    expect(await page.evaluate('document.activeElement.id')).toBe('main');
    // the next stop is on the page, past the header and the navigation (once the page has drawn a control to stop on)
    await expect
      .poll(() =>
        page.evaluate(
          "document.getElementById('main').querySelector('a[href], button:not([disabled]), input:not([disabled]), [tabindex]:not([tabindex=\"-1\"])') !== null",
        ),
      )
      .toBe(true);
    await page.keyboard.press('Tab');
    expect(await page.evaluate("document.getElementById('main').contains(document.activeElement)")).toBe(true);

    const menu = page.getByRole('button', { name: 'Signed in as Owner (this machine): menu' });
    await tabTo(menu, true);
    await page.keyboard.press('Enter');
    await page.getByRole('menuitem', { name: 'Sign out', exact: true }).waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('menu').waitFor({ state: 'hidden' });
    expect(await focused(menu)).toBe(true);
  });

  it('overview: the workspace is picked and the span changes, with the arrow keys', async () => {
    // the workspace picker (a searchable select): typed, the match highlighted with an arrow, taken with Enter
    await tabTo(page.getByRole('combobox', { name: 'Current workspace' }), true);
    await page.keyboard.type(ws.slug);
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${cp.url}/overview/${ws.slug}`);
    await choose('Time span', 'Last hour', 'Last day');
    await page.waitForURL(/[?&]window=1d/);
    await chromium.check(page, 'keyboard-overview');
  });

  it('workspaces and members: the dialogs open with Enter and close with Escape', async () => {
    await follow('Workspaces', '/workspaces');
    await dialogOf('New workspace', 'New workspace');
    await chromium.check(page, 'keyboard-workspaces');
    await follow('Members', `/workspaces/${ws.slug}`);
    await dialogOf('Add member', 'Add a member');
    await chromium.check(page, 'keyboard-members');
  });

  it('opens a dialog without its transition where the system asks for less motion, and with it where not', async () => {
    /** Opens the dialog with Enter on `p`, asks `expectOf` about the transitions it ran, and closes it. */
    async function whileOpening(p: Page, expectOf: (seen: () => Promise<string[]>) => Promise<void>): Promise<void> {
      await p.goto(`${cp.url}/workspaces`);
      // in the page: the transitions that start on the dialog itself and its overlay, not its fields' focus styles
      await p.evaluate(`(() => {
        window.seen = [];
        document.addEventListener('transitionrun', (event) => {
          if (event.target.matches('[role="dialog"], .mantine-Modal-overlay')) window.seen.push(event.propertyName);
        });
      })()`);
      await chromium.tabTo(p, p.getByRole('button', { name: 'New workspace', exact: true }), { presses: 150 });
      await p.keyboard.press('Enter');
      const dialog = p.getByRole('dialog', { name: 'New workspace' });
      await dialog.waitFor();
      await expect.poll(() => dialog.evaluate((el) => el.contains(el.ownerDocument.activeElement))).toBe(true);
      await expectOf(async () => (await p.evaluate('window.seen')) as string[]);
      await p.keyboard.press('Escape');
      await dialog.waitFor({ state: 'hidden' });
    }
    // this suite's browser asks for less motion (console-browser.ts): open and focused, the dialog ran none
    await whileOpening(page, async (seen) => expect(await seen()).toEqual([]));
    const moving = await chromium.newContext({
      reducedMotion: 'no-preference',
      storageState: await chromium.context.storageState(),
    });
    try {
      await whileOpening(await moving.newPage(), (seen) => expect.poll(seen).toContain('opacity'));
    } finally {
      await moving.close();
    }
  });

  it('policy: the simulator is filled in and submitted from the keyboard', async () => {
    await follow('Policy', `/workspaces/${ws.slug}/policy`);
    await submit('Server', 'github', 'create_issue');
    await expect
      .poll(() =>
        page
          .getByText(/^Decision: /)
          .first()
          .isVisible(),
      )
      .toBe(true);
    await chromium.check(page, 'keyboard-policy');
  });

  it('approvals: the status filter changes with the arrow keys', async () => {
    await follow('Approvals', `/workspaces/${ws.slug}/approvals`);
    await choose('Which requests', 'Waiting', 'Approved');
    await expect.poll(() => page.getByText('No approved requests').isVisible()).toBe(true);
    await chromium.check(page, 'keyboard-approvals');
  });

  it("audit: the workspace's chain is verified", async () => {
    await follow('Audit', `/workspaces/${ws.slug}/audit`);
    await verifyChain();
    await chromium.check(page, 'keyboard-audit');
  });

  it('vault: the new-secret dialog', async () => {
    await follow('Vault', `/workspaces/${ws.slug}/vault`);
    await dialogOf('New secret', 'New secret');
    await chromium.check(page, 'keyboard-vault');
  });

  it('sandboxes: what a command line would do', async () => {
    await follow('Sandboxes', `/workspaces/${ws.slug}/sandboxes`);
    await submit('Command line', 'git status');
    await expect.poll(() => page.getByText(/^Decision: /).isVisible()).toBe(true);
    await chromium.check(page, 'keyboard-sandboxes');
  });

  it('agent sessions: the filter, and a session opened from the list', async () => {
    await follow('Agent sessions', `/workspaces/${ws.slug}/sessions`);
    await choose('Which sessions', 'Live', 'All');
    await tabTo(page.getByRole('link', { name: 'keyboard-agent' }));
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'keyboard-agent' }).waitFor();
    await chromium.check(page, 'keyboard-session');
  });

  it('gateways and the pool: a new enrolment code, and the instances read again', async () => {
    await follow('Gateways', `/workspaces/${ws.slug}/gateways`);
    await dialogOf('New enrolment code', 'New enrolment code');
    await chromium.check(page, 'keyboard-gateways');
    await follow('Pool', `/workspaces/${ws.slug}/pool`);
    const refresh = page.getByRole('button', { name: 'Refresh' });
    await tabTo(refresh);
    const read = page.waitForResponse((r) => r.url().includes(`/v1/workspaces/${ws.slug}/pool/instances`));
    await page.keyboard.press('Enter');
    expect((await read).status()).toBe(200);
    await chromium.check(page, 'keyboard-pool');
  });

  it("connected clients: the workspace's list", async () => {
    await follow('Connected clients', `/workspaces/${ws.slug}/connected-clients`);
    await page.getByText('No connected clients').waitFor();
    await chromium.check(page, 'keyboard-connected-clients');
  });

  it('catalog, people and tokens: their dialogs', async () => {
    await follow('Catalog', '/catalog');
    await dialogOf('Add server', 'Add a server version');
    await chromium.check(page, 'keyboard-catalog');
    await follow('People', '/people');
    await dialogOf('Add person', 'Add a person');
    await chromium.check(page, 'keyboard-people');
    await follow('API tokens', '/tokens');
    await dialogOf('New token', 'New API token');
    await chromium.check(page, 'keyboard-tokens');
  });

  it('identity provider: the settings typed and saved from the keyboard', async () => {
    await follow('Identity provider', '/organization/identity-provider');
    await submit('Issuer', 'https://login.example.com/', 'https://login.example.com/jwks.json', 'aileron');
    await expect.poll(() => page.getByText('Identity provider saved').isVisible()).toBe(true);
    expect((await cp.request('GET', '/v1/organization/identity-provider')).body).toMatchObject({
      issuer: 'https://login.example.com/',
      audience: 'aileron',
    });
    await chromium.check(page, 'keyboard-identity-provider');
  });

  it('MCP client sign-in: the setting ticked and saved from the keyboard', async () => {
    await follow('MCP client sign-in', '/organization/oauth');
    const allow = page.getByRole('checkbox', { name: /Also allow clients that registered themselves/ });
    await tabTo(allow);
    await page.keyboard.press('Space');
    await tabTo(page.getByRole('button', { name: 'Save' }));
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByText('MCP client sign-in saved').isVisible()).toBe(true);
    expect((await cp.request('GET', '/v1/organization/oauth-settings')).body.allow_dynamic_registration).toBe(true);
    await chromium.check(page, 'keyboard-oauth-settings');
  });

  it("the person's own connected clients, from the person menu", async () => {
    await tabTo(page.getByRole('button', { name: 'Signed in as Owner (this machine): menu' }), true);
    await page.keyboard.press('Enter');
    const item = page.getByRole('menuitem', { name: 'Your connected clients' });
    await item.waitFor();
    // the arrow keys move through the menu's items
    for (let i = 0; i < 3 && !(await focused(item)); i++) await page.keyboard.press('ArrowDown');
    expect(await focused(item)).toBe(true);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${cp.url}/account/connected-clients`);
    await page.getByText('No connected clients').waitFor();
    await page.getByRole('menu').waitFor({ state: 'detached' });
    await chromium.check(page, 'keyboard-own-connected-clients');
  });

  it("organisation audit: the organisation's chain is verified", async () => {
    await follow('Organisation audit', '/audit');
    await verifyChain();
    await chromium.check(page, 'keyboard-organisation-audit');
  });

  it('webhooks and sinks: the tab changes with the arrow keys, and a sink is paused and resumed', async () => {
    await follow('Webhooks and sinks', '/webhooks');
    await tabTo(page.getByRole('tab', { name: 'Webhooks' }));
    await page.keyboard.press('ArrowRight');
    await page.waitForURL(/[?&]tab=sinks/);
    // the URL changes first and the tab list renders after it: wait for the selection, never read it once
    await expect.poll(() => page.getByRole('tab', { name: 'Audit sinks' }).getAttribute('aria-selected')).toBe('true');

    await tabTo(page.getByRole('button', { name: 'Pause siem' }));
    await page.keyboard.press('Enter');
    const sinks = page.getByRole('table', { name: 'Audit sinks' });
    await expect.poll(() => sinks.getByText('paused', { exact: true }).isVisible()).toBe(true);
    const enabled = async () =>
      (await cp.request('GET', '/v1/audit/sinks')).body.items.find((s: { id: string }) => s.id === sinkId).enabled;
    expect(await enabled()).toBe(false);
    await chromium.check(page, 'keyboard-sinks');

    await tabTo(page.getByRole('button', { name: 'Resume siem' }), true);
    await page.keyboard.press('Space');
    await eventually('the sink resumed', async () => (await enabled()) === true);
    await expect.poll(() => sinks.getByText('active', { exact: true }).isVisible()).toBe(true);
  });
});
