import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SandboxesService } from '@aileron/sandboxes';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { holdInstanceStarts } from '../pool/held-starts';
import { agentOn } from '../sandboxes/box';
import { aGateway, anOrganization, aWorkspace, uniqueSlug } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { anOauthServer } from '../connections/fixture';
import { ProtectedMcpServer, UpstreamAuthorizationServer } from '../connections/upstream';
import { ConsoleBrowser } from './console-browser';

/**
 * The console's sandbox pages and its gateways, pool and agent sessions
 * pages in Chromium, over sandboxes under real bubblewrap: a snapshot an
 * agent's MCP client made, reviewed side by side with the call behind it;
 * the bundle; what the shell rules would do with a line; an enrolment
 * code; a gateway's token rotated; a pool instance restarted; an agent session ended from the page.
 * Every page is checked with axe-core and photographed under
 * test-results/console/, and each is driven with the keyboard at least once.
 */
describe('the console: sandboxes, gateways, pool and agent sessions', () => {
  let cp: TestControlPlane;
  let chromium: ConsoleBrowser;
  let page: Page;
  let ws: string;
  let dir: string;
  const clients: Client[] = [];
  const check = (name: string) => chromium.check(page, name);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-console-sandboxes-'));
    cp = await startTestControlPlane('pglite', { AILERON_POOL_APPROVAL_WAIT_SECONDS: '0' });
    chromium = await ConsoleBrowser.start(cp);
    page = chromium.page;
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
    await chromium.signInAsOwner(cp);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await chromium?.close();
    await cp?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async ({ task }) => {
    // a page that failed is the one to look at
    if (task.result?.state === 'fail')
      await page.screenshot({ path: join('test-results', 'console', `failed-${task.name.slice(0, 40)}.png`) });
    expect(chromium.takeProblems()).toEqual([]);
  });

  /** Presses Tab until `target` has the focus, as a person without a mouse reaches a control. */
  async function tabTo(target: Locator, presses = 60): Promise<void> {
    for (let i = 0; i < presses; i++) {
      await page.keyboard.press('Tab');
      if (await target.evaluate((el) => el === el.ownerDocument.activeElement)) return;
    }
    throw new Error(`Tab never reached ${String(target)}`);
  }

  let agentSession = '';
  it("shows a snapshot an agent's MCP client made: the change side by side, the tool call and its session, the file, and the bundle", async () => {
    const made = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'fix-the-docs' } });
    expect(made.status, made.text).toBe(201);
    const agent = await agentOn(cp, ws, 'fix-the-docs', clients);
    agentSession = agent.sessionId;
    expect((await agent.call('write', { path: 'notes.txt', content: 'line one\nline two\n' })).isError).toBeFalsy();
    const patched = await agent.call('patch', {
      path: 'notes.txt',
      diff: '--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n line one\n-line two\n+line 2\n',
    });
    expect(patched.isError, textOf(patched)).toBeFalsy();
    await cp.cp.app.get(SandboxesService).settledAll();

    await page.goto(`${cp.url}/workspaces/${ws}/sandboxes`);
    const link = page.getByRole('link', { name: 'fix-the-docs' });
    await link.waitFor();
    // with the keyboard: from the page's top to the sandbox
    await tabTo(link);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${cp.url}/workspaces/${ws}/sandboxes/fix-the-docs`);

    // the newest snapshot first: the patch, its line changed on both sides
    const change = page.getByRole('figure', { name: 'Changes to notes.txt' });
    await expect.poll(() => change.locator('td.console-diff-del').allTextContents()).toEqual(['line two']);
    expect(await change.locator('td.console-diff-add').allTextContents()).toEqual(['line 2']);
    // the unchanged line on both sides, unmarked
    expect(await change.getByRole('cell', { name: 'line one', exact: true }).count()).toBe(2);
    const madeBy = page.getByLabel('Made by');
    expect(await madeBy.textContent()).toMatch(
      /^Made by the tool call patch of agent on fix-the-docs in agent session/,
    );
    expect(await page.getByRole('heading', { name: 'patch: notes.txt' }).isVisible()).toBe(true);
    await check('sandbox-history');

    // the earlier snapshot, picked with the keyboard: the file as the write made it
    await tabTo(page.getByRole('button', { name: 'write: notes.txt' }));
    await page.keyboard.press('Enter');
    await expect
      .poll(() =>
        page.getByRole('figure', { name: 'Changes to notes.txt' }).locator('td.console-diff-add').allTextContents(),
      )
      .toEqual(['line one', 'line two']);

    // the files as the newest snapshot holds them
    await page.getByRole('tab', { name: 'Files' }).click();
    await page.getByRole('button', { name: 'notes.txt', exact: true }).click();
    await expect
      .poll(() => page.getByRole('figure', { name: 'File notes.txt' }).textContent())
      .toContain('line one\nline 2\n');
    await check('sandbox-files');
    // and as the first one did
    await page.getByRole('tab', { name: 'History' }).click();
    await page.getByRole('button', { name: 'write: notes.txt' }).click();
    await page.getByRole('button', { name: 'Browse files at this snapshot' }).click();
    await page.getByRole('button', { name: 'notes.txt', exact: true }).click();
    await expect
      .poll(() => page.getByRole('figure', { name: 'File notes.txt' }).textContent())
      .toContain('line one\nline two\n');

    // the bundle: a git bundle of the whole history, which a clone fetches
    const downloading = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Download bundle' }).click();
    const file = join(dir, 'fix-the-docs.bundle');
    await (await downloading).saveAs(file);
    const clone = join(dir, 'clone');
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', clone, ...args], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1' },
      });
    execFileSync('git', ['init', '-q', clone]);
    expect(git('bundle', 'verify', file)).toContain('refs/heads/aileron/snapshots');
    git('fetch', '-q', file, 'aileron/snapshots:work');
    expect(git('log', '--format=%s', 'work').trim().split('\n')).toEqual(['patch: notes.txt', 'write: notes.txt']);

    // the agent session behind the snapshot
    await page.getByRole('tab', { name: 'History' }).click();
    await page.getByRole('link', { name: agentSession.slice(0, 8) }).click();
    await page.waitForURL(`${cp.url}/workspaces/${ws}/sessions/${agentSession}`);
    await expect.poll(() => page.getByRole('heading', { name: 'agent on fix-the-docs' }).isVisible()).toBe(true);
  });

  it('lists the shell rules with their source and says what a line would do: the decision, the rule, the reason', async () => {
    const put = await cp.request('PUT', `/v1/workspaces/${ws}/shell-rules`, {
      body: {
        rules: [{ program: 'rm', args: [], decision: 'forbidden', justification: 'Deleting is for people.' }],
        codex_rules: 'prefix_rule(pattern = ["git", "push", ["--force", "-f"]], decision = "prompt")\n',
      },
    });
    expect(put.status, put.text).toBe(200);
    await page.goto(`${cp.url}/workspaces/${ws}/sandboxes`);
    const rules = page.getByRole('region', { name: 'Shell rules' });
    await expect.poll(() => rules.getByRole('row').count()).toBe(3);
    expect(await rules.getByRole('row').nth(1).textContent()).toMatch(
      /^rm\s*forbiddenDeleting is for people\.rules\[0\]$/,
    );
    expect(await rules.getByRole('row').nth(2).textContent()).toContain('git push [--force|-f]');
    expect(await rules.getByRole('row').nth(2).textContent()).toContain('codex_rules line 1');

    const line = page.getByRole('textbox', { name: 'Command line' });
    const answer = page.getByRole('alert', { name: /^Decision:/ });
    // with the keyboard: type the line, Enter asks
    await tabTo(line);
    await page.keyboard.type('git status --short');
    await page.keyboard.press('Enter');
    await expect.poll(() => answer.textContent()).toMatch(/^Decision: allowNo rule decided it/);
    await line.fill('cd /src && sudo env rm -rf build');
    await page.keyboard.press('Enter');
    await expect.poll(() => answer.textContent()).toMatch(/^Decision: forbiddenRule rm \(rules\[0\]\)/);
    expect(await answer.textContent()).toContain('Deleting is for people.');
    await line.fill('git push -f origin main');
    await page.getByRole('button', { name: 'Check' }).click();
    await expect
      .poll(() => answer.textContent())
      .toMatch(/^Decision: promptRule git push \[--force\|-f\] \(codex_rules line 1\)/);
    await check('sandboxes');
  });

  it('makes an enrolment code shown once, which enrols a gateway that then shows with its last contact', async () => {
    await page.goto(`${cp.url}/workspaces/${ws}/gateways`);
    await expect.poll(() => page.getByText('No gateway enrolled').isVisible()).toBe(true);
    await tabTo(page.getByRole('button', { name: 'New enrolment code' }));
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'New enrolment code' });
    await dialog.getByLabel('Rollout groups').fill('canary');
    await page.keyboard.press('Enter');
    // the enrolled gateway's token gets a lifetime of its own
    await chromium.pick(page, "Gateway's token expires", '90 days');
    await dialog.getByRole('button', { name: 'Make code' }).click();
    const code = (await dialog.getByLabel('New code').textContent())!.trim();
    expect(code).toMatch(/^ail_enr_/);
    expect(await dialog.textContent()).toContain("The gateway's token stops working 90 days after it enrols.");
    await check('gateways-code');
    await dialog.getByRole('button', { name: 'Done' }).click();
    await dialog.waitFor({ state: 'hidden' });
    // shown once: the page has it no more, and the dialog opens on a new code's form
    expect(await page.content()).not.toContain(code);
    await page.getByRole('button', { name: 'New enrolment code' }).click();
    await dialog.getByRole('button', { name: 'Make code' }).waitFor();
    expect(await page.content()).not.toContain(code);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });

    const enrolled = await cp.request('POST', '/v1/gateway/enroll', {
      token: null,
      body: { enrollment_code: code, name: 'alice-laptop' },
    });
    expect(enrolled.status, enrolled.text).toBe(201);
    expect(enrolled.body.groups).toEqual(['canary']);
    expect(Date.parse(enrolled.body.token_expires_at)).toBeGreaterThan(Date.now() + 89 * 24 * 3600_000);
    const again = await cp.request('POST', '/v1/gateway/enroll', {
      token: null,
      body: { enrollment_code: code, name: 'mallory-laptop' },
    });
    expect(again.body.code).toBe('ENROLLMENT_CODE_USED');
    await page.reload();
    const row = page.getByRole('row', { name: /alice-laptop/ });
    await expect.poll(() => row.textContent()).toMatch(/alice-laptop\s*canary.*expires .*never/);
    // its first contact
    expect((await cp.request('GET', '/v1/gateway/catalog', { token: enrolled.body.token })).status).toBe(200);
    await eventually('the last contact', async () => {
      await page.reload();
      return !(await row.textContent())!.includes('never');
    });
    await check('gateways');
  });

  it("rotates a gateway's token: the new one shown once with a copy button, the old one working through its grace, and the list showing both lifetimes", async () => {
    const gateway = await aGateway(cp, cp.ownerToken, ws, { name: 'bob-laptop' });
    const catalogWith = (token: string) => cp.request('GET', '/v1/gateway/catalog', { token });
    const listed = async () =>
      (await cp.request('GET', `/v1/workspaces/${ws}/gateways`)).body.items.find(
        (g: { id: string }) => g.id === gateway.id,
      );
    expect((await listed()).enrolled_by).toMatch(/^token:/);
    await chromium.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: cp.url });
    await page.goto(`${cp.url}/workspaces/${ws}/gateways`);
    const row = page.getByRole('row', { name: /bob-laptop/ });
    // who enrolled it, and a token without expiry
    await expect.poll(() => row.textContent()).toContain((await listed()).enrolled_by);
    expect(await row.textContent()).toContain('no expiry');

    // with the keyboard: the row's button opens the dialog, the grace keeps its default of an hour
    await tabTo(page.getByRole('button', { name: 'Rotate token of bob-laptop' }));
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Rotate the token of bob-laptop' });
    expect(await dialog.getByRole('combobox', { name: 'Old token keeps working for' }).inputValue()).toBe('1 hour');
    await chromium.pick(page, 'New token expires', '90 days');
    await check('gateways-rotate');
    await dialog.getByRole('button', { name: 'Rotate' }).click();
    const shown = dialog.getByLabel('New token');
    await expect.poll(() => shown.textContent()).toMatch(/\S{20,}/);
    const token = (await shown.textContent())!.trim();
    expect(await dialog.textContent()).toMatch(/you will not see it again.*The old token works until/);
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => dialog.getByRole('button', { name: 'Copied' }).isVisible()).toBe(true);
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(token);
    await check('gateways-rotated');
    await dialog.getByRole('button', { name: 'Done' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await page.content()).not.toContain(token);

    // both work while the old one is in its grace; the list says until when, and when the new one expires
    expect((await catalogWith(token)).status).toBe(200);
    expect((await catalogWith(gateway.token)).status).toBe(200);
    const rotated = await listed();
    expect(new Date(rotated.token_expires_at).getTime()).toBeGreaterThan(Date.now() + 89 * 24 * 3600_000);
    expect(new Date(rotated.previous_token_valid_until).getTime()).toBeGreaterThan(Date.now() + 50 * 60_000);
    await expect.poll(() => row.textContent()).toContain('the old token works until');
    expect(await row.textContent()).toContain('expires ');
    await check('gateways-rotated-list');

    // again, with no grace: the earlier tokens are refused at once, the newest works
    await page.getByRole('button', { name: 'Rotate token of bob-laptop' }).click();
    await chromium.pick(page, 'Old token keeps working for', 'Not at all: refused at once');
    await dialog.getByRole('button', { name: 'Rotate' }).click();
    await expect.poll(() => shown.textContent()).toMatch(/\S{20,}/);
    const newest = (await shown.textContent())!.trim();
    expect(await dialog.textContent()).toContain('The old token is refused from now on');
    await dialog.getByRole('button', { name: 'Done' }).click();
    for (const old of [gateway.token, token]) expect((await catalogWith(old)).status).toBe(401);
    expect((await catalogWith(newest)).status).toBe(200);
    await expect.poll(() => row.textContent()).not.toContain('the old token');
    expect(await row.textContent()).toContain('no expiry');
    const audit = await cp.request('GET', `/v1/workspaces/${ws}/audit?type=gateway.token_rotated`);
    expect(audit.body.items.map((r: { data: { grace_seconds: number } }) => r.data.grace_seconds)).toEqual([0, 3600]);
    expect(JSON.stringify(audit.body)).not.toContain(token);

    // a revoked gateway has no token to rotate
    await page.getByRole('button', { name: 'Revoke bob-laptop' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => row.getByText('revoked').isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: 'Rotate token of bob-laptop' }).count()).toBe(0);
  });

  it('restarts a pool instance: its successor shows starting, then running, and the MCP session carries on', async () => {
    const server = await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.everything, uniqueSlug('ops').slice(0, 20));
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws}/${server}`);
    clients.push(client);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'before' } }))).toContain('before');
    const [before] = (await cp.request('GET', `/v1/workspaces/${ws}/pool/instances`)).body.items;
    await page.goto(`${cp.url}/workspaces/${ws}/pool`);
    const old = page.getByRole('row', { name: `Instance ${before.id}` });
    await expect.poll(() => old.getByText('running').isVisible()).toBe(true);
    await check('pool');

    // the successor's start waits for the test, so the page can be seen showing it starting
    const starts = holdInstanceStarts(cp);
    try {
      await tabTo(page.getByRole('button', { name: `Restart ${server} (${before.id})` }));
      await page.keyboard.press('Enter');
      await page.getByRole('dialog').getByRole('button', { name: 'Restart' }).click();
      // axe reads a dialog fading out as text without contrast
      await page.getByRole('dialog').waitFor({ state: 'hidden' });
      await expect.poll(() => page.getByText('starting', { exact: true }).isVisible()).toBe(true);
      expect(await old.count()).toBe(0);
      await check('pool-restarting');
    } finally {
      starts.release();
    }
    const [after] = await eventually('the successor running', async () => {
      const items = (await cp.request('GET', `/v1/workspaces/${ws}/pool/instances`)).body.items;
      return items[0]?.state === 'running' && items;
    });
    expect(after.id).not.toBe(before.id);
    await expect
      .poll(() =>
        page
          .getByRole('row', { name: `Instance ${after.id}` })
          .getByText('running')
          .isVisible(),
      )
      .toBe(true);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'after' } }))).toContain('after');
  });

  it("shows an agent session's messages, takes an answer, and ends it: its token is refused from then on", async () => {
    const started = await cp.request('POST', `/v1/workspaces/${ws}/sessions`, {
      body: { name: 'release-agent', agent: 'claude' },
    });
    expect(started.status, started.text).toBe(201);
    const token = started.body.caveat_token as string;
    const messages = `/v1/workspaces/${ws}/sessions/${started.body.id}/messages`;
    const asked = await cp.request('POST', messages, {
      token,
      body: { text: 'May I bump the schema to v3?', level: 'question' },
    });
    expect(asked.status, asked.text).toBe(201);

    await page.goto(`${cp.url}/workspaces/${ws}/sessions`);
    await check('sessions');
    await tabTo(page.getByRole('link', { name: 'release-agent' }));
    await page.keyboard.press('Enter');
    const conversation = page.getByRole('list', { name: 'Conversation' });
    await expect.poll(() => conversation.textContent()).toContain('May I bump the schema to v3?');
    await page.getByRole('textbox', { name: 'Answer' }).fill('Yes, after the release.');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => conversation.textContent()).toContain('Yes, after the release.');
    // the agent reads its people's answers
    const read = await cp.request('GET', messages, { token });
    expect(read.body.items.map((m: { text: string }) => m.text)).toEqual(['Yes, after the release.']);
    await check('session');

    await tabTo(page.getByRole('button', { name: 'End session' }));
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').getByRole('button', { name: 'End session' }).click();
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    await expect.poll(() => page.getByLabel('State: ended').isVisible()).toBe(true);
    const refused = await cp.request('GET', messages, { token });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('SESSION_ENDED');
    await check('session-ended');
  });

  it("connects a server that signs in with OAuth from the Connections page: calls go out on the workspace's connection until it is disconnected, then say where to connect", async () => {
    const as = new UpstreamAuthorizationServer();
    const upstream = new ProtectedMcpServer(as);
    try {
      await upstream.start();
      await as.start(() => upstream.resource);
      as.account = 'team-upstream';
      const server = await anOauthServer(cp, upstream.url, { connections: 'per_workspace' }, ws);
      await page.goto(`${cp.url}/workspaces/${ws}/connections`);
      const servers = page.getByRole('table', { name: 'Servers that sign in with OAuth' });
      await expect
        .poll(() => servers.getByRole('row', { name: new RegExp(server) }).innerText())
        .toMatch(/the workspace's\s+not connected/);
      await check('connections');

      // Connect, from the keyboard: on to the upstream's sign-in, and back to the control plane's callback
      await tabTo(page.getByRole('button', { name: `Connect ${server}` }));
      await page.keyboard.press('Enter');
      await page.waitForURL(/\/oauth\/connections\/callback/);
      await expect.poll(() => page.getByText(`${server} is connected`).isVisible()).toBe(true);
      await page.goto(`${cp.url}/workspaces/${ws}/connections`);
      const state = servers.getByRole('row', { name: new RegExp(server) }).getByText('connected', { exact: true });
      await expect.poll(() => state.isVisible()).toBe(true);
      const listed = page.getByRole('table', { name: 'Connections' }).getByRole('row', { name: new RegExp(server) });
      expect(await listed.innerText()).toMatch(/the workspace\s+connected/i);
      await check('connections-connected');
      // no token reaches the browser
      for (const secret of as.secrets) expect(await page.content()).not.toContain(secret);

      const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws}`);
      clients.push(client);
      const whoami = () => client.callTool({ name: `${server}__whoami`, arguments: {} });
      expect(textOf(await whoami())).toBe('upstream account team-upstream');

      await page.getByRole('button', { name: `Disconnect ${server} (the workspace)` }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Disconnect' }).click();
      await expect.poll(() => page.getByText('Nobody has connected a server yet.').isVisible()).toBe(true);
      const refused = await whoami();
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(/^CONNECTION_REQUIRED: /);
    } finally {
      await upstream.stop();
      await as.stop();
    }
  });

  it("shows an admin nothing of another organisation's sandboxes, gateways, pool or sessions, whatever URL is typed", async () => {
    const other = await anOrganization(cp);
    const theirs = uniqueSlug('secret');
    expect(
      (await cp.request('POST', '/v1/workspaces', { token: other.token, body: { slug: theirs, name: 'Theirs' } }))
        .status,
    ).toBe(201);
    const session = await cp.request('POST', `/v1/workspaces/${theirs}/sessions`, {
      token: other.token,
      body: { name: 'their-agent' },
    });
    expect(session.status, session.text).toBe(201);
    for (const path of [
      'sandboxes',
      'sandboxes/their-box',
      'gateways',
      'pool',
      'connections',
      'sessions',
      `sessions/${session.body.id}`,
    ]) {
      await page.goto(`${cp.url}/workspaces/${theirs}/${path}`);
      await expect.poll(() => page.getByText('WORKSPACE_NOT_FOUND').first().isVisible(), { message: path }).toBe(true);
      expect(await page.content(), path).not.toContain('their-agent');
    }
    // and their session under our own workspace is no session of ours
    await page.goto(`${cp.url}/workspaces/${ws}/sessions/${session.body.id}`);
    await expect.poll(() => page.getByText('SESSION_NOT_FOUND').first().isVisible()).toBe(true);
  });
});
