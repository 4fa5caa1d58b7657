import { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalIdp } from '../auth/local-idp';
import { anOrganization, aToken, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import {
  ClientSite,
  connectInBrowser,
  initializeWith,
  MemoryOAuthProvider,
  refreshGrant,
} from '../support/mcp-oauth-client';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { ConsoleBrowser } from './console-browser';

/**
 * The web console in Chromium (playwright-core and Debian's chromium, as the
 * review page's test drives it), on the embedded mode: signing in both ways,
 * the pages an admin works in, the exact call waiting for approval decided
 * from the live inbox, the MCP clients people connected with OAuth (a
 * workspace's, and a person's own) disconnected, and another organisation's
 * things out of reach.
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
  /** an MCP client's own web side: where the browser comes back to with an authorization code */
  const site = new ClientSite();

  beforeAll(async () => {
    // a call held for approval waits this long for the decision the test makes in the browser
    cp = await startTestControlPlane('pglite', { AILERON_POOL_APPROVAL_WAIT_SECONDS: '120' });
    chromium = await ConsoleBrowser.start(cp);
    ({ context, page } = chromium);
    await site.start();
  });
  afterAll(async () => {
    await chromium?.close();
    await cp?.close();
    await site.stop();
  });

  /** A fresh browser signed in through the organisation's identity provider, as whoever it signs in. */
  async function signedInThroughIdp(): Promise<{ fresh: BrowserContext; p: Page }> {
    const fresh = await chromium.newContext();
    const p = await fresh.newPage();
    watch(p);
    await p.goto(`${cp.url}/workspaces`);
    await p.waitForURL(/\/sign-in\?/);
    await p.getByRole('textbox', { name: 'Organisation' }).fill('default');
    await p.getByRole('button', { name: 'Continue with your identity provider' }).click();
    await p.waitForURL(`${cp.url}/workspaces`);
    return { fresh, p };
  }

  /** An MCP client registering itself and connected to the default workspace by whoever `p` is signed in as. */
  async function aConnectedClient(p: Page, name: string) {
    const provider = new MemoryOAuthProvider(site, undefined, name);
    const { consent } = await connectInBrowser(cp, p, site, provider);
    expect(consent).toContain(`Allow ${name} to use workspace Default?`);
    const tokens = provider.tokens()!;
    expect((await initializeWith(cp, tokens.access_token)).status).toBe(200);
    return { provider, tokens, clientId: provider.clientInformation()!.client_id };
  }

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
    // typing not yet saved outlives a newer version coming into force (a rollback here; another admin's save alike)
    await editor.fill(`${approvalRule}  - id: not-yet-saved\n    effect: deny\n    tools: [add]\n`);
    await page.getByRole('button', { name: 'Roll back to v1' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Roll back' }).click();
    await expect.poll(() => page.getByText('Version 3 is in force now').isVisible()).toBe(true);
    expect(await editor.inputValue()).toContain('id: not-yet-saved');
    await check(page, 'policy-newer-version');
    await page.getByRole('button', { name: 'Load version 3 instead' }).click();
    await expect.poll(() => editor.inputValue()).not.toContain('not-yet-saved');
    expect(await editor.inputValue()).toContain('id: echoes-need-approval');
    await expect.poll(() => page.getByText('Valid: 1 rule, the same as the version in force').isVisible()).toBe(true);

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

  it('lets an owner allow self-registered MCP clients, on the page beside the identity provider', async () => {
    const closed = await site.register(cp, 'Early bird');
    expect(closed.status, closed.text).toBe(403);
    expect(closed.body.code).toBe('OAUTH_REGISTRATION_DISABLED');

    await page.goto(`${cp.url}/overview`);
    // with the keyboard: the navigation entry, then the setting, then Save
    await chromium.tabTo(page, page.getByRole('link', { name: 'MCP client sign-in' }));
    await page.keyboard.press('Enter');
    await page.waitForURL(`${cp.url}/organization/oauth`);
    const allow = page.getByRole('checkbox', { name: /Also allow clients that registered themselves/ });
    await expect.poll(() => allow.isVisible()).toBe(true);
    expect(await allow.isChecked()).toBe(false);
    expect(await page.getByText('Never changed: off').isVisible()).toBe(true);
    await allow.focus();
    await page.keyboard.press('Space');
    await check(page, 'oauth-settings');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByText('MCP client sign-in saved').isVisible()).toBe(true);
    expect((await cp.request('GET', '/v1/organization/oauth-settings')).body.allow_dynamic_registration).toBe(true);
    expect(await page.getByText(/^Last changed /).isVisible()).toBe(true);
    const open = await site.register(cp, 'Early bird');
    expect(open.status, open.text).toBe(201);

    // a choice not yet saved outlives another owner's change, seen when this one comes back to the tab
    await allow.uncheck();
    for (const value of [false, true]) {
      const other = await cp.request('PUT', '/v1/organization/oauth-settings', {
        body: { allow_dynamic_registration: value },
      });
      expect(other.status, other.text).toBe(200);
    }
    await page.evaluate(`window.dispatchEvent(new Event('visibilitychange'))`);
    await expect.poll(() => page.getByText('Someone changed this setting meanwhile').isVisible()).toBe(true);
    expect(await allow.isChecked()).toBe(false);
    await page.getByRole('button', { name: 'Keep editing' }).click();
    await expect.poll(() => page.getByText('Someone changed this setting meanwhile').isVisible()).toBe(false);
    expect(await allow.isChecked()).toBe(false);
  });

  it("lists the workspace's connected clients, and disconnects one: its tokens are refused at once", async () => {
    const { tokens, clientId } = await aConnectedClient(page, 'Release bot');
    // its use is recorded (to the minute), and shown
    await eventually('the last use', async () => {
      const listed = await cp.request('GET', '/v1/workspaces/default/oauth/clients');
      return listed.body.items.find((c: { client_id: string }) => c.client_id === clientId)?.last_used_at;
    });
    await page.goto(`${cp.url}/workspaces/default/connected-clients`);
    const row = page.getByRole('row', { name: /Release bot/ });
    await expect.poll(() => row.textContent()).toContain(clientId);
    const text = (await row.textContent())!;
    expect(text).toContain('self-registered');
    expect(text).toContain('Owner (this machine)');
    expect(text).toContain(`${cp.url}/mcp/default`);
    expect(text).not.toContain('never');
    expect(await page.content()).not.toContain(tokens.access_token);
    await check(page, 'connected-clients');

    // with the keyboard: Disconnect, then the confirmation
    await chromium.tabTo(page, page.getByRole('button', { name: 'Disconnect Release bot' }));
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Disconnect client' });
    await expect.poll(() => dialog.textContent()).toMatch(/Disconnect “Release bot” of Owner \(this machine\)\?/);
    await check(page, 'connected-clients-disconnect');
    await dialog.getByRole('button', { name: 'Disconnect' }).click();
    await expect.poll(() => row.count()).toBe(0);
    expect((await initializeWith(cp, tokens.access_token)).status).toBe(401);
    expect((await refreshGrant(cp, clientId, tokens.refresh_token!)).body.error).toBe('invalid_grant');
    const audit = await cp.request('GET', '/v1/workspaces/default/audit?type=oauth.client_disconnected');
    expect(audit.body.items[0].data).toMatchObject({ client_id: clientId, reason: 'revoked_by_admin' });
  });

  it("shows a person their own connected clients, and theirs alone, to disconnect; a member sees no workspace's list", async () => {
    const idp = new LocalIdp('/idp-own');
    await idp.start();
    const sam = await cp.request('POST', '/v1/users', { body: { email: 'sam@example.com', role: 'member' } });
    expect(sam.status, sam.text).toBe(201);
    const member = await cp.request('PUT', `/v1/workspaces/default/members/${sam.body.id}`, {
      body: { role: 'member' },
    });
    expect(member.status, member.text).toBe(200);
    try {
      await idp.trustedBy(cp, { client_id: idp.clientId });
      idp.person = { sub: 'sam', email: 'sam@example.com', email_verified: true, name: 'Sam Developer' };
      const { fresh, p } = await signedInThroughIdp();
      const owners = await aConnectedClient(page, 'Owner CLI');
      const sams = await aConnectedClient(p, 'Sam editor');

      // from the person menu, with the keyboard
      await p.goto(`${cp.url}/workspaces`);
      await p.getByRole('button', { name: 'Signed in as Sam Developer: menu' }).focus();
      await p.keyboard.press('Enter');
      await p.getByRole('menuitem', { name: 'Your connected clients' }).focus();
      await p.keyboard.press('Enter');
      await p.waitForURL(`${cp.url}/account/connected-clients`);
      const rows = p.getByRole('table', { name: 'Connected clients' }).locator('tbody tr');
      await expect.poll(() => rows.count()).toBe(1);
      expect(await rows.first().textContent()).toMatch(/Sam editor.*default/);
      expect(await p.content()).not.toContain('Owner CLI');
      await check(p, 'own-connected-clients');

      // a member: neither the workspace's list nor the organisation's setting in the navigation, and refused by URL
      const navigation = p.getByRole('navigation', { name: 'Console' });
      expect(await navigation.getByRole('link', { name: 'Connected clients' }).count()).toBe(0);
      expect(await navigation.getByRole('link', { name: 'MCP client sign-in' }).count()).toBe(0);
      // another person's connection is no connection of theirs
      const { csrf } = await (await p.request.get(`${cp.url}/v1/auth/session`)).json();
      const ownersConnection = (await cp.request('GET', '/v1/workspaces/default/oauth/clients')).body.items.find(
        (c: { client_id: string }) => c.client_id === owners.clientId,
      );
      const theirs = await p.request.delete(`${cp.url}/v1/me/oauth/clients/${ownersConnection.id}`, {
        headers: { 'x-aileron-csrf': csrf },
      });
      expect(theirs.status()).toBe(404);
      expect((await theirs.json()).code).toBe('OAUTH_CLIENT_NOT_FOUND');

      await p.getByRole('button', { name: 'Disconnect Sam editor' }).click();
      await p.getByRole('dialog', { name: 'Disconnect client' }).getByRole('button', { name: 'Disconnect' }).click();
      await expect.poll(() => p.getByText('No connected clients').isVisible()).toBe(true);
      expect((await initializeWith(cp, sams.tokens.access_token)).status).toBe(401);
      // the owner's own client goes on
      expect((await initializeWith(cp, owners.tokens.access_token)).status).toBe(200);
      const audit = await cp.request('GET', '/v1/workspaces/default/audit?type=oauth.client_disconnected');
      expect(audit.body.items[0].data).toMatchObject({ client_id: sams.clientId, reason: 'revoked_by_person' });

      await p.goto(`${cp.url}/workspaces/default/connected-clients`);
      await expect.poll(() => p.getByText('FORBIDDEN').first().isVisible()).toBe(true);
      await fresh.close();

      // and the owner sees theirs on the same page
      await page.goto(`${cp.url}/account/connected-clients`);
      await expect.poll(() => page.getByRole('row', { name: /Owner CLI/ }).count()).toBe(1);
    } finally {
      await idp.stop();
    }
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
    for (const path of [
      `/workspaces/${theirs}`,
      `/workspaces/${theirs}/policy`,
      `/workspaces/${theirs}/approvals`,
      `/workspaces/${theirs}/connected-clients`,
    ]) {
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
      const { fresh, p } = await signedInThroughIdp();
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
