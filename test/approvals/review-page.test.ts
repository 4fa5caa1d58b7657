import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Browser, Page } from 'playwright-core';
import { launchChromium } from '../support/chromium';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aGateway, aToken, aUser, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { aLinkChannel, LinkChannel } from '../support/link-channel';

const CALL = {
  server: 'deploy',
  tool: 'release',
  arguments: { service: 'payments', version: '2.4.1-rc.7', canary: { percent: 10 } },
  session: 'sess-browser',
  principal: 'alice@example.com',
};

/**
 * The review link in a real browser (the system Chromium, driven by
 * playwright-core): an approver opens `review_url`, lands on the web console's
 * view of the request (pages/Approval.tsx, the one the Approvals inbox shows),
 * sees the exact call, approves, and the gateway waiting on the long-poll hears it.
 */
describe('the review link in Chromium', () => {
  let cp: TestControlPlane;
  let browser: Browser;
  let shots: string;
  let ws: string;
  let gateway: { id: string; token: string };
  let approver: { id: string; email: string };
  let links: LinkChannel;
  const pageErrors: string[] = [];

  /** What the approver's chat bot receives: the link is sent to them, never answered to the caller. */
  async function sendLink(approvalId: string): Promise<string> {
    const sent = await cp.request('POST', `/v1/approvals/${approvalId}/links`, { body: { user: approver.id } });
    expect(sent.status, sent.text).toBe(202);
    return links.linkFor(approvalId, approver.id);
  }

  beforeAll(async () => {
    shots = mkdtempSync(join(tmpdir(), 'aileron-review-shots-'));
    cp = await startApiControlPlane();
    browser = await launchChromium();
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    const policy = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: { rules: [{ id: 'releases-need-approval', effect: 'approval', servers: ['deploy'], tools: ['release'] }] },
    });
    expect(policy.status, policy.text).toBe(200);
    gateway = await aGateway(cp, cp.ownerToken, ws);
    // a link names its approver: a user with the approver role in the workspace (never signed in)
    approver = await aUser(cp, cp.ownerToken, 'member');
    expect(
      (await cp.request('PUT', `/v1/workspaces/${ws}/members/${approver.id}`, { body: { role: 'approver' } })).status,
    ).toBe(200);
    links = await aLinkChannel(cp);
  });
  afterAll(async () => {
    await links?.close();
    await browser?.close();
    await cp?.close();
    rmSync(shots, { recursive: true, force: true });
  });
  // a script error on the page is a broken page, whatever the assertions saw
  afterEach(() => expect(pageErrors.splice(0)).toEqual([]));

  /** review_url is built from AILERON_PUBLIC_URL; the test's control plane listens on a port chosen at start. */
  const local = (url: string): string => {
    const parsed = new URL(url);
    return cp.url + parsed.pathname + parsed.search;
  };

  async function ask(call: Record<string, unknown> = CALL): Promise<{ id: string; review_url: string }> {
    const res = await cp.request('POST', '/v1/gateway/approvals', { token: gateway.token, body: call });
    expect(res.status, res.text).toBe(201);
    return res.body;
  }

  /** The gateway's long-poll, started before anyone looks at the request. */
  function waitAsGateway(id: string): { answer: Promise<{ status: string; at: number }>; answered: () => boolean } {
    let done = false;
    const answer = cp.request('GET', `/v1/approvals/${id}?wait=60`, { token: gateway.token }).then((res) => {
      done = true;
      expect(res.status, res.text).toBe(200);
      return { status: res.body.status as string, at: Date.now() };
    });
    return { answer, answered: () => done };
  }

  async function open(url: string): Promise<Page> {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(local(url));
    return page;
  }

  const status = (page: Page, name: string) => page.getByLabel(new RegExp(`^Status: ${name}`));

  async function expectTheCall(page: Page): Promise<void> {
    await expect.poll(() => status(page, 'pending').isVisible()).toBe(true);
    expect(await page.getByRole('heading', { name: 'deploy → release' }).isVisible()).toBe(true);
    expect(await page.getByLabel('Arguments').textContent()).toContain('"version": "2.4.1-rc.7"');
    expect(await page.getByText('Held by rule').textContent()).toContain('releases-need-approval');
    expect(await page.getByText('Asked by').textContent()).toContain(`alice@example.com via gateway:${gateway.id}`);
    expect(await page.getByText('Agent session').textContent()).toContain('sess-browser');
  }

  async function approveAndHear(page: Page, waiting: ReturnType<typeof waitAsGateway>): Promise<void> {
    expect(waiting.answered()).toBe(false);
    const clickedAt = Date.now();
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => status(page, 'approved').isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    const heard = await waiting.answer;
    expect(heard.status).toBe('approved');
    // a hang guard, not a speed claim: the long-poll would otherwise run for its full 60 s
    expect(heard.at - clickedAt).toBeLessThan(10_000);
  }

  it('with a one-time link: the approver sees the exact call, approves, and the waiting gateway hears it', async () => {
    const asked = await ask();
    const waiting = waitAsGateway(asked.id);
    const link = await sendLink(asked.id);

    const page = await open(link);
    // the console's view of the request, the link carried in the fragment (no request sends it again)
    await page.waitForURL(new RegExp(`/approvals/${asked.id}#link=`));
    await expectTheCall(page);
    const shot = join(shots, 'review-link.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(5_000);
    await approveAndHear(page, waiting);
    expect(await page.getByLabel('Decisions').textContent()).toContain(`user:${approver.id}: approve`);

    // the link decided once: opened again, it shows the outcome and offers nothing to click
    const again = await open(link);
    await expect.poll(() => status(again, 'approved').isVisible()).toBe(true);
    expect(await again.getByRole('button', { name: 'Approve' }).count()).toBe(0);
  });

  it('signed in with a pasted token: a member is told they may not decide; an approver approves', async () => {
    const asked = await ask({ ...CALL, session: 'sess-signed-in' });
    const waiting = waitAsGateway(asked.id);
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws });
    const lead = await aToken(cp, cp.ownerToken, { role: 'approver', workspace: ws });

    const signIn = async (token: string): Promise<Page> => {
      const page = await open(asked.review_url);
      await page.waitForURL(local(asked.review_url).replace(`/review/${asked.id}`, `/approvals/${asked.id}`));
      // not signed in: the ways in, and nothing of the request
      await page.getByRole('heading', { name: 'Sign in to review it' }).waitFor();
      expect(await page.getByLabel('Arguments').count()).toBe(0);
      await page.getByLabel('Or paste a token').fill(token);
      await page.getByRole('button', { name: 'Review with it' }).click();
      await page.getByLabel('Arguments').waitFor();
      return page;
    };

    const bystander = await signIn(member.token);
    await bystander.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => bystander.getByText('NOT_AN_APPROVER').isVisible()).toBe(true);
    expect(await bystander.getByText(/You are not an approver of route/).isVisible()).toBe(true);
    expect(await status(bystander, 'pending').isVisible()).toBe(true);

    const page = await signIn(lead.token);
    expect(await page.getByRole('heading', { name: 'deploy → release' }).isVisible()).toBe(true);
    expect(await page.getByText('Agent session').textContent()).toContain('sess-signed-in');
    await page.screenshot({ path: join(shots, 'review-signed-in.png'), fullPage: true });
    await approveAndHear(page, waiting);
    expect(await page.getByLabel('Decisions').textContent()).toContain(`token:${lead.id}: approve`);
    expect((await cp.request('GET', `/v1/approvals/${asked.id}`)).body.decisions).toEqual([
      expect.objectContaining({ approver: `token:${lead.id}`, via: 'page' }),
    ]);
    // the token stays in this tab only, until forgotten
    await page.getByRole('button', { name: 'Forget the token' }).click();
    await page.getByRole('heading', { name: 'Sign in to review it' }).waitFor();
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
  });

  it('shows markup from the agent as text: nothing it holds becomes an element or runs', async () => {
    const markup = '<img src=x onerror="window.__ran = 1">';
    const script = '<script>window.__ran = 2</script>';
    const asked = await ask({
      ...CALL,
      session: 'sess-markup',
      principal: '<b>eve</b>@example.com',
      arguments: { title: markup, body: script },
    });
    const page = await open(await sendLink(asked.id));
    await expect.poll(() => status(page, 'pending').isVisible()).toBe(true);

    const shown = await page.getByLabel('Arguments').textContent();
    expect(shown).toContain(JSON.stringify(markup).slice(1, -1));
    expect(shown).toContain(JSON.stringify(script).slice(1, -1));
    expect(await page.getByText('Asked by').textContent()).toContain('<b>eve</b>@example.com');
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('main b').count()).toBe(0);
    // the console's own script files are the only scripts: none inline, none from the call
    expect(await page.locator('script:not([src^="/assets/"])').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __ran?: number }).__ran)).toBeUndefined();
    await page.screenshot({ path: join(shots, 'review-markup.png'), fullPage: true });
  });
});
