import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, aToken, aUser, aWorkspace, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { aLinkChannel, LinkChannel } from '../support/link-channel';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { ConsoleBrowser } from './console-browser';

/**
 * Where a review link lands, and an agent session's messages as they are
 * written, in Chromium: the link a person is sent opens the console's own view
 * of the request (the one the Approvals inbox shows), and a decision made
 * there releases the call the pool holds; a message sent while a session's
 * page is open appears without a reload.
 */
describe('the console: review links and live session messages', () => {
  let cp: TestControlPlane;
  let chromium: ConsoleBrowser;
  let page: Page;
  let ws: string;
  let agent: { id: string; token: string };
  let approver: { id: string; email: string };
  let links: LinkChannel;
  const tools = uniqueSlug('ops').slice(0, 20);
  const clients: Client[] = [];

  beforeAll(async () => {
    // a call held for approval waits this long for the decision the test makes in the browser
    cp = await startTestControlPlane('pglite', { AILERON_POOL_APPROVAL_WAIT_SECONDS: '120' });
    chromium = await ConsoleBrowser.start(cp);
    page = chromium.page;
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    const policy = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: {
        default: 'allow',
        rules: [{ id: 'echoes-need-approval', effect: 'approval', servers: [tools], tools: ['echo'] }],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.everything, tools);
    agent = await aToken(cp, cp.ownerToken, { name: 'release-agent', role: 'member', workspace: ws });
    // a link names its approver: a person with the approver role in the workspace, never signed in here
    approver = await aUser(cp, cp.ownerToken, 'member');
    const member = await cp.request('PUT', `/v1/workspaces/${ws}/members/${approver.id}`, {
      body: { role: 'approver' },
    });
    expect(member.status, member.text).toBe(200);
    links = await aLinkChannel(cp);
    await chromium.signInAsOwner(cp);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await links?.close();
    await chromium?.close();
    await cp?.close();
  });
  afterEach(() => expect(chromium.takeProblems()).toEqual([]));

  /** review_url is built from the public URL; the test's control plane listens on a port chosen at start. */
  const local = (url: string): string => {
    const parsed = new URL(url);
    return cp.url + parsed.pathname + parsed.search;
  };

  /** A developer's local call held for approval, asked for by their gateway: the request that holds it. */
  async function aLocalCallHeld(message: string): Promise<{ id: string; review_url: string }> {
    const gateway = await aGateway(cp, cp.ownerToken, ws);
    const asked = await cp.request('POST', '/v1/gateway/approvals', {
      token: gateway.token,
      body: { server: tools, tool: 'echo', arguments: { message }, principal: 'dev@example.com' },
    });
    expect(asked.status, asked.text).toBe(201);
    return asked.body;
  }

  /** An MCP client's call that the policy holds: the pending call, and the request that holds it. */
  async function aHeldCall(message: string): Promise<{ call: Promise<unknown>; id: string; reviewUrl: string }> {
    const { client } = await connect(cp, agent.token, `/mcp/${ws}/${tools}`);
    clients.push(client);
    // the pool holds the call open until someone decides
    const call = client.callTool({ name: 'echo', arguments: { message } }, undefined, { timeout: 120_000 });
    let held: { id: string; review_url: string } | undefined;
    await eventually('the request that holds the call', async () => {
      const pending = await cp.request('GET', `/v1/workspaces/${ws}/approvals?status=pending`);
      held = pending.body.items.find((a: { arguments: { message?: string } }) => a.arguments.message === message);
      return held !== undefined;
    });
    return { call, id: held!.id, reviewUrl: held!.review_url };
  }

  it("opens the review link a person was sent on the console's view of the request; approved there with the keyboard, the call completes", async () => {
    const held = await aHeldCall('release payments 2.4.1');
    const sent = await cp.request('POST', `/v1/approvals/${held.id}/links`, { body: { user: approver.id } });
    expect(sent.status, sent.text).toBe(202);
    const link = local(await links.linkFor(held.id, approver.id));
    expect(link).toContain(`/review/${held.id}?link=`);

    // the approver's own browser: no session, no account here, only the link
    const theirs = await chromium.newContext();
    const p = await theirs.newPage();
    chromium.watch(p);
    const requests: string[] = [];
    p.on('request', (r) => requests.push(r.url()));
    await p.goto(link);
    // the link moved to the fragment: no later request carries it but the ones that must
    await p.waitForURL(new RegExp(`/approvals/${held.id}#link=`));
    await expect.poll(() => p.getByLabel('Arguments').textContent()).toContain('"message": "release payments 2.4.1"');
    expect(await p.getByText('Held by rule').textContent()).toContain('echoes-need-approval');
    expect(await p.getByLabel('Status: pending').isVisible()).toBe(true);
    expect(await p.getByText('With your one-time link').isVisible()).toBe(true);
    const carried = requests.filter((url) => url.includes('link='));
    expect(carried.map((url) => new URL(url).pathname)).toEqual([`/review/${held.id}`, `/review/${held.id}/request`]);
    await chromium.check(p, 'review-link');

    // with the keyboard alone: the reason, then Approve
    await chromium.tabTo(p, p.getByRole('textbox', { name: 'Reason' }));
    await p.keyboard.type('release window');
    await chromium.tabTo(p, p.getByRole('button', { name: 'Approve' }));
    await p.keyboard.press('Enter');
    const result = await held.call;
    expect((result as { isError?: boolean }).isError, textOf(result)).toBeFalsy();
    expect(textOf(result)).toContain('release payments 2.4.1');
    await expect.poll(() => p.getByLabel(/^Status: approved/).isVisible()).toBe(true);
    expect(await p.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    expect(await p.getByLabel('Decisions').textContent()).toContain(`user:${approver.id}: approve (“release window”)`);
    expect((await cp.request('GET', `/v1/approvals/${held.id}`)).body.decisions).toEqual([
      expect.objectContaining({ approver: `user:${approver.id}`, via: 'link', reason: 'release window' }),
    ]);
    await chromium.check(p, 'review-link-approved');

    // the link decided once: opened again it shows the outcome, and offers nothing to decide
    await p.goto(link);
    await expect.poll(() => p.getByLabel(/^Status: approved/).isVisible()).toBe(true);
    expect(await p.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    await theirs.close();
  });

  it('opens review_url for a person signed in to the console inside the console itself; denied there, the call is refused', async () => {
    const held = await aHeldCall('drop the staging database');
    await page.goto(local(held.reviewUrl));
    await page.waitForURL(`${cp.url}/approvals/${held.id}`);
    // the console's own frame: its navigation, and the same view as the inbox
    await expect.poll(() => page.getByRole('navigation', { name: 'Console' }).isVisible()).toBe(true);
    await expect
      .poll(() => page.getByLabel('Arguments').textContent())
      .toContain('"message": "drop the staging database"');
    await page.getByRole('textbox', { name: 'Reason' }).fill('not during the release');
    await chromium.check(page, 'review-signed-in');
    await page.getByRole('button', { name: 'Deny' }).click();
    const result = await held.call;
    expect((result as { isError?: boolean }).isError).toBe(true);
    await expect.poll(() => page.getByLabel(/^Status: denied/).isVisible()).toBe(true);
    expect((await cp.request('GET', `/v1/approvals/${held.id}`)).body.decisions).toEqual([
      expect.objectContaining({ decision: 'deny', via: 'page', reason: 'not during the release' }),
    ]);
  });

  it('offers a person not signed in the ways in; with a pasted token, typed and sent from the keyboard, the request shows', async () => {
    const asked = await aLocalCallHeld('rotate the signing key');
    const id = asked.id;
    const fresh = await chromium.newContext();
    const p = await fresh.newPage();
    chromium.watch(p);
    await p.goto(local(asked.review_url));
    await p.waitForURL(`${cp.url}/approvals/${id}`);
    await p.getByRole('heading', { name: 'Sign in to review it' }).waitFor();
    expect(await p.getByLabel('Arguments').count()).toBe(0);
    expect(await p.getByRole('link', { name: 'Sign in to Aileron' }).getAttribute('href')).toBe(
      `/sign-in?return_to=%2Fapprovals%2F${id}`,
    );
    await chromium.check(p, 'review-sign-in');
    await chromium.tabTo(p, p.getByLabel('Or paste a token'));
    await p.keyboard.type((await aToken(cp, cp.ownerToken, { role: 'approver', workspace: ws })).token);
    await p.keyboard.press('Enter');
    await expect.poll(() => p.getByLabel('Arguments').textContent()).toContain('"message": "rotate the signing key"');
    await chromium.tabTo(p, p.getByRole('button', { name: 'Approve' }));
    await p.keyboard.press('Space');
    await expect.poll(() => p.getByLabel(/^Status: approved/).isVisible()).toBe(true);
    expect((await cp.request('GET', `/v1/approvals/${id}`)).body.status).toBe('approved');
    await fresh.close();
  });

  it('takes a person who signs in with the one-time link, opened in another tab, to the review they were asked to sign in for', async () => {
    const review = `${cp.url}/approvals/${(await aLocalCallHeld('drop the staging table')).id}`;
    const fresh = await chromium.newContext();
    const waiting = await fresh.newPage();
    chromium.watch(waiting);
    await waiting.goto(review);
    await waiting.getByRole('link', { name: 'Sign in to Aileron' }).click();
    await waiting.getByText('Open the one-time sign-in link').waitFor();

    // the owner asks for a new link (the one npm start printed was used by this file's first page)
    const minted = await cp.request('POST', '/v1/auth/sign-in-links');
    expect(minted.status, minted.text).toBe(201);
    const link = new URL(minted.body.url as string);
    const opened = await fresh.newPage();
    chromium.watch(opened);
    await opened.goto(cp.url + link.pathname + link.hash);
    await opened.waitForURL(review);
    await expect.poll(() => opened.getByLabel('Arguments').textContent()).toContain('drop the staging table');
    // and the tab that asked goes on by itself
    await waiting.waitForURL(review);
    await expect.poll(() => waiting.getByLabel('Arguments').textContent()).toContain('drop the staging table');

    // the next link, with nowhere asked for, lands on the overview
    const next = new URL((await cp.request('POST', '/v1/auth/sign-in-links')).body.url as string);
    const later = await (await chromium.newContext()).newPage();
    await later.goto(cp.url + next.pathname + next.hash);
    await later.waitForURL(`${cp.url}/overview`);
    await later.context().close();
    await fresh.close();
  });

  it("shows an agent session's message the moment it is written, without a reload", async () => {
    const started = await cp.request('POST', `/v1/workspaces/${ws}/sessions`, {
      body: { name: 'migration-agent', agent: 'claude' },
    });
    expect(started.status, started.text).toBe(201);
    const messages = `/v1/workspaces/${ws}/sessions/${started.body.id}/messages`;
    await page.goto(`${cp.url}/workspaces/${ws}/sessions/${started.body.id}`);
    await expect.poll(() => page.getByText('live updates', { exact: true }).isVisible()).toBe(true);
    let loads = 0;
    page.on('load', () => loads++);

    const asked = await cp.request('POST', messages, {
      token: started.body.caveat_token,
      body: { text: 'May I bump the schema to v3?', level: 'question' },
    });
    expect(asked.status, asked.text).toBe(201);
    const conversation = page.getByRole('list', { name: 'Conversation' });
    await expect.poll(() => conversation.textContent()).toContain('May I bump the schema to v3?');

    // answered with the keyboard alone; a second question arrives the same way
    await chromium.tabTo(page, page.getByRole('textbox', { name: 'Answer' }));
    await page.keyboard.type('Yes, after the release.');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await expect.poll(() => conversation.textContent()).toContain('Yes, after the release.');
    await cp.request('POST', messages, {
      token: started.body.caveat_token,
      body: { text: 'Done: schema v3 is live.', level: 'info' },
    });
    await expect.poll(() => conversation.textContent()).toContain('Done: schema v3 is live.');
    expect(loads, 'the page was never reloaded').toBe(0);
    await chromium.check(page, 'session-live');
  });
});
