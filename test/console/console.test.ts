import { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalIdp } from '../auth/local-idp';
import { anOrganization, aToken, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { ConsoleBrowser } from './console-browser';

/**
 * The web console in Chromium (playwright-core and Debian's chromium, as the
 * review page's test drives it), on the embedded mode: signing in both ways,
 * the pages an admin works in, the exact call waiting for approval decided
 * from the live inbox, and another organisation's things out of reach.
 * Every page is checked with axe-core and photographed under test-results/console/.
 */
describe('the web console in Chromium', () => {
  let cp: TestControlPlane;
  let chromium: ConsoleBrowser;
  let context: BrowserContext;
  let page: Page;
  const check = (p: Page, name: string) => chromium.check(p, name);
  const pick = (p: Page, label: string, option: string) => chromium.pick(p, label, option);
  const watch = (p: Page) => chromium.watch(p);

  beforeAll(async () => {
    // a call held for approval waits this long for the decision the test makes in the browser
    cp = await startTestControlPlane('pglite', { AILERON_POOL_APPROVAL_WAIT_SECONDS: '120' });
    chromium = await ConsoleBrowser.start(cp);
    ({ context, page } = chromium);
  });
  afterAll(async () => {
    await chromium?.close();
    await cp?.close();
  });
  afterEach(() => expect(chromium.takeProblems()).toEqual([]));

  it('signs the owner in with the one-time link npm start printed, once', async () => {
    await page.goto(cp.cp.signInLink!);
    // the overview is the landing page (console-overview.test.ts); this file goes on from the workspaces
    await page.waitForURL(`${cp.url}/overview`);
    await page.goto(`${cp.url}/workspaces`);
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
    // the dialog fades out after the page changed: axe on a half-transparent dialog sees its contrast fail
    await page.getByRole('dialog').waitFor({ state: 'detached' });
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

  /** The pool's MCP server (the reference "everything" server from npm) that the policy holds calls of. */
  const tools = uniqueSlug('ops').slice(0, 20);

  it('writes a policy with an approval rule, shows problems at their line as it is typed, compares versions and simulates a call', async () => {
    await page.goto(`${cp.url}/workspaces/${ws}/policy`);
    const editor = page.getByRole('textbox', { name: 'Policy document (YAML)' });
    // the server's own validation, without saving
    await editor.fill('rules:\n  - id: releases\n    effect: maybe\n');
    await expect
      .poll(() => page.getByRole('list', { name: 'Problems' }).textContent())
      .toMatch(/^line 3: body\.rules\[0\]\.effect/);
    // with the keyboard: the problem's line number takes the cursor to that line
    await page.getByRole('button', { name: 'line 3' }).focus();
    await page.keyboard.press('Enter');
    const selected =
      'document.activeElement.value.slice(document.activeElement.selectionStart, document.activeElement.selectionEnd)';
    expect(await page.evaluate(selected)).toBe('    effect: maybe');
    await editor.fill('rules:\n  - id: releases\n    effect: [deny\n');
    await expect
      .poll(() => page.getByRole('list', { name: 'Problems' }).textContent())
      .toMatch(/^line 4, column \d+: \S/);
    await check(page, 'policy-problems');
    const approvalRule = `rules:\n  - id: echoes-need-approval\n    effect: approval\n    servers: [${tools}]\n    tools: [echo]\n`;
    await editor.fill(approvalRule);
    await expect.poll(() => page.getByText('Valid: 1 rule').isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Save as a new version' }).click();
    await eventually(
      'the new policy',
      async () => (await cp.request('GET', `/v1/workspaces/${ws}/policy`)).body.version === 1,
    );
    expect((await cp.request('GET', `/v1/workspaces/${ws}/policy`)).body.document.rules[0].id).toBe(
      'echoes-need-approval',
    );
    await expect.poll(() => page.getByText('Valid: 1 rule, the same as the version in force').isVisible()).toBe(true);
    await editor.fill(`${approvalRule}  - id: no-sums\n    effect: deny\n    tools: [get-sum]\n`);
    await expect.poll(() => page.getByText('Valid: 2 rules').isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Save as a new version' }).click();
    await page.getByRole('button', { name: 'Compare v1 with v2' }).click();
    const added = page.getByRole('figure', { name: 'Version 2' }).locator('.console-diff-add');
    await expect.poll(() => added.textContent()).toContain('no-sums');
    expect(await page.getByRole('figure', { name: 'Version 1' }).textContent()).not.toContain('no-sums');
    await check(page, 'policy-diff');
    await page.keyboard.press('Escape');

    await page.getByRole('textbox', { name: 'Server' }).fill(tools);
    await page.getByRole('textbox', { name: 'Tool' }).fill('echo');
    await page.getByRole('button', { name: 'Evaluate' }).click();
    await expect.poll(() => page.getByText('Decision: approval').isVisible()).toBe(true);
    await check(page, 'policy');
  });

  it('holds a call made through the pool, shows it live in the inbox with its rule, and the call completes once approved there', async () => {
    await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.everything, tools);
    await page.goto(`${cp.url}/workspaces/${ws}/approvals`);
    await expect.poll(() => page.getByText('live', { exact: true }).isVisible()).toBe(true);
    const agent = await aToken(cp, cp.ownerToken, { name: 'release-agent', role: 'member', workspace: ws });
    const { client } = await connect(cp, agent.token, `/mcp/${ws}/${tools}`);
    try {
      // the pool holds the call open until someone decides
      const call = client.callTool({ name: 'echo', arguments: { message: 'release payments 2.4.1' } }, undefined, {
        timeout: 120_000,
      });
      // no reload: the event stream brings it
      await page.getByRole('button', { name: `${tools} → echo` }).click();
      await expect
        .poll(() => page.getByLabel('Arguments').textContent())
        .toContain('"message": "release payments 2.4.1"');
      expect(await page.getByText('Held by rule').textContent()).toContain('echoes-need-approval');
      await check(page, 'approvals');
      await page.getByRole('textbox', { name: 'Reason' }).fill('release window');
      await page.getByRole('button', { name: 'Approve' }).click();
      const result = await call;
      expect(result.isError, textOf(result)).toBeFalsy();
      expect(textOf(result)).toContain('release payments 2.4.1');
    } finally {
      await client.close();
    }
    await page.locator('label', { hasText: /^Approved$/ }).click();
    await page.getByRole('button', { name: `${tools} → echo` }).click();
    await expect.poll(() => page.getByText('release window').isVisible()).toBe(true);
    await check(page, 'approvals-approved');
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
      idp.person = { sub: 'rita', email: 'rita@example.com', email_verified: true, name: 'Rita Reviewer' };
      const fresh = await chromium.browser.newContext();
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
      await fresh.close();
    } finally {
      await idp.stop();
    }
  });
});
