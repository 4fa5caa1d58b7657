import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Browser, BrowserContext, chromium, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalIdp } from '../auth/local-idp';
import { aGateway, anOrganization, aToken, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';

const SHOTS = join(process.cwd(), 'test-results', 'console');
const AXE = readFileSync(createRequire(join(process.cwd(), 'package.json')).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * The web console in Chromium (playwright-core and Debian's chromium, as the
 * review page's test drives it), on the embedded mode: signing in both ways,
 * the pages an admin works in, the exact call waiting for approval decided
 * from the live inbox, and another organisation's things out of reach.
 * Every page is checked with axe-core and photographed under test-results/console/.
 */
describe('the web console in Chromium', () => {
  let cp: TestControlPlane;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  function watch(p: Page): void {
    p.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    // a style or script the Content-Security-Policy refused is a broken page too
    p.on('console', (message) => {
      if (message.type() === 'error' && /Content Security Policy|Refused to/.test(message.text()))
        problems.push(`console: ${message.text()}`);
    });
  }

  /** axe-core on the page as it is: no serious or critical violation; and a screenshot to look at. */
  async function check(p: Page, name: string): Promise<void> {
    await p.waitForLoadState('networkidle');
    // evaluated through the debugging protocol: the page's CSP (rightly) refuses injected scripts
    await p.evaluate(`${AXE}\n;undefined`);
    const violations = (await p.evaluate(
      `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`,
    )) as string[];
    expect(violations, name).toEqual([]);
    await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  /** A Mantine Select: open it, pick the option. */
  async function pick(p: Page, label: string, option: string): Promise<void> {
    await p.getByRole('textbox', { name: label, exact: true }).click();
    await p.getByRole('option', { name: option, exact: true }).click();
  }

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    cp = await startTestControlPlane('pglite');
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--disable-quic',
      ],
    });
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    watch(page);
  });
  afterAll(async () => {
    await browser?.close();
    await cp?.close();
  });
  afterEach(() => expect(problems.splice(0)).toEqual([]));

  it('signs the owner in with the one-time link npm start printed, once', async () => {
    await page.goto(cp.cp.signInLink!);
    await page.waitForURL(`${cp.url}/workspaces`);
    await expect.poll(() => page.getByRole('heading', { name: 'Workspaces' }).isVisible()).toBe(true);
    // the code left the address bar, and the session cookie is out of the page's reach
    expect(await page.evaluate('document.cookie')).not.toContain('ail_ses_');
    await check(page, 'workspaces');

    const other = await context.browser()!.newContext();
    const again = await other.newPage();
    watch(again);
    await again.goto(cp.cp.signInLink!);
    await expect.poll(() => again.getByText('SIGN_IN_LINK_INVALID').first().isVisible()).toBe(true);
    await check(again, 'sign-in-link-used');
    await again.goto(`${cp.url}/sign-in`);
    await check(again, 'sign-in');
    await other.close();
  });

  let ws = '';
  it('creates a workspace', async () => {
    ws = uniqueSlug('ws');
    await page.getByRole('button', { name: 'New workspace' }).click();
    await page.getByRole('textbox', { name: 'Name' }).fill(`Payments ${ws}`);
    await page.getByRole('textbox', { name: 'Slug' }).fill(ws);
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(`${cp.url}/workspaces/${ws}`);
    expect((await cp.request('GET', `/v1/workspaces/${ws}`)).body.name).toBe(`Payments ${ws}`);
    await check(page, 'workspace');
    await page.goto(`${cp.url}/people`);
    await check(page, 'people');
  });

  it('adds a catalog server, a second version side by side, and assigns it to the workspace', async () => {
    const name = uniqueSlug('srv').slice(0, 20);
    await page.goto(`${cp.url}/catalog`);
    await page.getByRole('button', { name: 'Add server' }).click();
    await page.getByRole('textbox', { name: 'Name' }).fill(name);
    await page.getByRole('textbox', { name: 'URL' }).fill('https://mcp.example.test/v1');
    await page.getByRole('button', { name: 'Publish' }).click();
    await page.waitForURL(`${cp.url}/catalog/${name}`);
    const v2 = await cp.request('POST', '/v1/catalog/servers', {
      body: {
        name,
        version: '1.1.0',
        mode: 'remote',
        transport: 'streamable_http',
        url: 'https://mcp.example.test/v2',
      },
    });
    expect(v2.status, v2.text).toBe(201);
    await page.reload();
    await expect
      .poll(() => page.getByLabel('Definition of 1.1.0').textContent())
      .toContain('https://mcp.example.test/v2');
    await pick(page, 'Workspace', `Payments ${ws}`);
    await page.getByRole('button', { name: 'Assign' }).click();
    await eventually(
      'the assignment',
      async () =>
        (await cp.request('GET', `/v1/workspaces/${ws}/servers`)).body.items.find(
          (s: { server: string }) => s.server === name,
        )?.version === '1.1.0',
    );
    await check(page, 'catalog-server');
    await page.goto(`${cp.url}/catalog`);
    await check(page, 'catalog');
  });

  it('writes a policy with an approval rule, shows a problem at its line, and simulates a call', async () => {
    await page.goto(`${cp.url}/workspaces/${ws}/policy`);
    const editor = page.getByRole('textbox', { name: 'Policy document (YAML)' });
    await editor.fill('rules:\n  - id: releases\n    effect: maybe\n');
    await page.getByRole('button', { name: 'Save as a new version' }).click();
    await expect
      .poll(() => page.getByRole('list', { name: 'Problems' }).textContent())
      .toMatch(/^line 3: body\.rules\[0\]\.effect/);
    await editor.fill(
      'rules:\n  - id: releases-need-approval\n    effect: approval\n    servers: [deploy]\n    tools: [release]\n',
    );
    await page.getByRole('button', { name: 'Save as a new version' }).click();
    await eventually(
      'the new policy',
      async () =>
        (await cp.request('GET', `/v1/workspaces/${ws}/policy`)).body.document.rules[0]?.id ===
        'releases-need-approval',
    );
    await page.getByRole('textbox', { name: 'Server' }).fill('deploy');
    await page.getByRole('textbox', { name: 'Tool' }).fill('release');
    await page.getByRole('button', { name: 'Evaluate' }).click();
    await expect.poll(() => page.getByText('Decision: approval').isVisible()).toBe(true);
    await check(page, 'policy');
  });

  it('shows a held call in the live inbox, with its rule, and approves it', async () => {
    await page.goto(`${cp.url}/workspaces/${ws}/approvals`);
    await expect.poll(() => page.getByText('live', { exact: true }).isVisible()).toBe(true);
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const asked = await cp.request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: {
        server: 'deploy',
        tool: 'release',
        arguments: { service: 'payments', version: '2.4.1' },
        principal: 'alice@example.com',
      },
    });
    expect(asked.status, asked.text).toBe(201);
    // no reload: the event stream brings it
    await page.getByRole('button', { name: 'deploy → release' }).click();
    await expect.poll(() => page.getByLabel('Arguments').textContent()).toContain('"version": "2.4.1"');
    expect(await page.getByText('Held by rule').textContent()).toContain('releases-need-approval');
    await check(page, 'approvals');
    await page.getByRole('textbox', { name: 'Reason' }).fill('release window');
    await page.getByRole('button', { name: 'Approve' }).click();
    await eventually(
      'the approval',
      async () => (await cp.request('GET', `/v1/approvals/${asked.body.id}`)).body.status === 'approved',
    );
    expect((await cp.request('GET', `/v1/approvals/${asked.body.id}`)).body.decisions[0]).toMatchObject({
      decision: 'approve',
      reason: 'release window',
    });
  });

  it('revokes a token, which stops working at once', async () => {
    const token = await aToken(cp, cp.ownerToken, { name: 'ci-deploy', role: 'member' });
    expect((await cp.request('GET', '/v1/me', { token: token.token })).status).toBe(200);
    await page.goto(`${cp.url}/tokens`);
    await check(page, 'tokens');
    await page.getByRole('button', { name: 'Revoke ci-deploy' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await eventually(
      'the revocation',
      async () => (await cp.request('GET', '/v1/me', { token: token.token })).status === 401,
    );
  });

  it("shows an admin of one organisation nothing of another's, whatever URL is typed", async () => {
    const other = await anOrganization(cp);
    const theirs = uniqueSlug('secret');
    expect(
      (
        await cp.request('POST', '/v1/workspaces', {
          token: other.token,
          body: { slug: theirs, name: 'Their secret project' },
        })
      ).status,
    ).toBe(201);
    for (const path of [`/workspaces/${theirs}`, `/workspaces/${theirs}/policy`, `/workspaces/${theirs}/approvals`]) {
      await page.goto(cp.url + path);
      await expect.poll(() => page.getByText('WORKSPACE_NOT_FOUND').first().isVisible(), { message: path }).toBe(true);
      expect(await page.content(), path).not.toContain('Their secret project');
    }
    await page.goto(`${cp.url}/workspaces`);
    await page.waitForLoadState('networkidle');
    expect(await page.content()).not.toContain(theirs);
  });

  it("signs a person in through the organisation's identity provider", async () => {
    const idp = new LocalIdp('/idp');
    await idp.start();
    try {
      await idp.trustedBy(cp, { client_id: idp.clientId });
      // the IdP's random port may be one Chromium refuses by default (ERR_UNSAFE_PORT)
      const ports = [new URL(idp.issuer).port, new URL(cp.url).port].join(',');
      const own = await chromium.launch({
        executablePath: '/usr/bin/chromium',
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', `--explicitly-allowed-ports=${ports}`],
      });
      idp.person = { sub: 'rita', email: 'rita@example.com', email_verified: true, name: 'Rita Reviewer' };
      const fresh = await own.newContext();
      const p = await fresh.newPage();
      watch(p);
      await p.goto(`${cp.url}/workspaces`);
      await p.waitForURL(/\/sign-in\?/);
      await p.getByRole('textbox', { name: 'Organisation' }).fill('default');
      await p.getByRole('button', { name: 'Continue with your identity provider' }).click();
      await p.waitForURL(`${cp.url}/workspaces`);
      await expect
        .poll(() => p.getByRole('button', { name: 'Signed in as Rita Reviewer: menu' }).isVisible())
        .toBe(true);
      const cookie = (await fresh.cookies()).find((c) => c.name === 'aileron_session');
      expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
      // sign-out ends the session: the API no longer takes the cookie
      await p.getByRole('button', { name: 'Signed in as Rita Reviewer: menu' }).click();
      await p.getByRole('menuitem', { name: 'Sign out', exact: true }).click();
      await p.waitForURL(`${cp.url}/sign-in`);
      const me = await cp.request('GET', '/v1/me', {
        token: null,
        headers: { cookie: `aileron_session=${cookie!.value}` },
      });
      expect(me.status).toBe(401);
      await own.close();
    } finally {
      await idp.stop();
    }
  });
});
