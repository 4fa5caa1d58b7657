import { randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { People } from '../approvals/people';
import { aToken, aWorkspace } from '../support/builders';
import { startOnOwnDatabase, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { PostgresServer, startPostgres } from '../support/services';
import { aRemoteServer, connect, SERVERS, textOf } from '../pool/mcp-client';
import { agentOn } from '../sandboxes/box';

/**
 * An MCP tool call held open for a human's approval when PostgreSQL goes
 * away: the approver cannot decide meanwhile, so the call keeps waiting (its
 * progress says why) instead of failing, and runs once the approval is given
 * after the database is back. A call made while the database is away is
 * refused in words of ours, never the driver's. A sandbox command a shell
 * rule puts to a person waits the same way.
 */
describe('a call held for approval across a PostgreSQL outage (server mode)', { timeout: 240_000 }, () => {
  let postgres: PostgresServer;
  let cp: TestControlPlane;
  const people = new People();
  const clients: Client[] = [];

  beforeAll(async () => {
    postgres = await startPostgres();
    // loopback allowed: the identity provider of the approver is a local server
    cp = await startOnOwnDatabase({
      DATABASE_URL: postgres.url,
      AILERON_POOL_APPROVAL_WAIT_SECONDS: '120',
      UPSTREAM_ALLOW_CIDRS: '127.0.0.0/8',
      AILERON_QUEUE_PREFIX: `hold-${randomBytes(4).toString('hex')}`,
    });
    await people.start();
    await people.trustedBy(cp);
  }, 180_000);

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
    await people.stop();
    postgres?.stop();
  });

  it('keeps waiting while the database is away, and runs once approved after it is back', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const server = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything);
    const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: { default: 'allow', rules: [{ id: 'echo-needs-a-human', effect: 'approval', tools: ['echo'] }] },
    });
    expect(policy.status, policy.text).toBe(200);
    const approver = await people.aPerson(cp, ws.slug, 'approver');
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const { client } = await connect(cp, member.token, `/mcp/${ws.slug}/${server}`);
    const other = await connect(cp, member.token, `/mcp/${ws.slug}/${server}`);
    const progress: string[] = [];
    const call = client.callTool({ name: 'echo', arguments: { message: 'held across the outage' } }, undefined, {
      onprogress: (p) => progress.push(String(p.message)),
      timeout: 180_000,
      resetTimeoutOnProgress: true,
    });
    const pending = await eventually('the pending approval', async () => {
      const inbox = await cp.request('GET', `/v1/workspaces/${ws.slug}/approvals?status=pending`);
      const approvals = inbox.body.approvals as { id: string }[];
      return approvals.length > 0 && approvals[0]!;
    });

    await postgres.halt('fast');
    try {
      // the held call saw the outage and said so, and is still waiting
      await eventually('a progress note about the database', async () =>
        progress.some((m) => m.includes('database cannot be reached')),
      );
      // a new call needs the database to decide: refused at once, in our words
      const refused = await other.client
        .callTool({ name: 'echo', arguments: { message: 'while it is away' } }, undefined, { timeout: 30_000 })
        .then(
          (result) => ({ result, error: null }),
          (error: Error & { code?: number; data?: unknown }) => ({ result: null, error }),
        );
      expect(refused.result, 'no tool ran while the database was away').toBeNull();
      expect(refused.error?.message).toContain('database cannot be reached');
      expect(refused.error?.data).toEqual({ code: 'DATABASE_UNAVAILABLE' });
      expect(refused.error?.message).not.toMatch(/\d+\.\d+\.\d+\.\d+|:\d{4,5}|ECONN/);
    } finally {
      await postgres.resume();
    }

    const approved = await eventually('the approval given once the database is back', async () => {
      const res = await cp.request('POST', `/v1/approvals/${pending.id}/approve`, {
        token: approver.token,
        body: { reason: 'checked after the outage' },
      });
      // 503 while the connections come back; anything else is the answer
      expect(res.status, res.text).not.toBe(503);
      return res;
    });
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body.status).toBe('approved');
    const result = await call;
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toContain('held across the outage');
    await client.close();
    await other.client.close();
  });

  it('a sandbox command a shell rule puts to a person keeps waiting while the database is away, saying so, and runs once approved', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    expect(
      (await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { body: { default: 'allow', rules: [] } })).status,
    ).toBe(200);
    const rules = await cp.request('PUT', `/v1/workspaces/${ws.slug}/shell-rules`, {
      body: { rules: [{ program: 'touch', args: [], decision: 'prompt' }] },
    });
    expect(rules.status, rules.text).toBe(200);
    const approver = await people.aPerson(cp, ws.slug, 'approver');
    const made = await cp.request('POST', `/v1/workspaces/${ws.slug}/sandboxes`, { body: { name: 'held' } });
    expect(made.status, made.text).toBe(201);
    const box = await agentOn(cp, ws.slug, 'held', clients);

    const progress: string[] = [];
    let ended = false;
    const call = box.client.callTool(
      { name: 'bash', arguments: { sandbox: 'held', command: 'touch approved.txt && echo ran' } },
      undefined,
      {
        onprogress: (p) => progress.push(String(p.message)),
        timeout: 180_000,
        resetTimeoutOnProgress: true,
      },
    );
    void call.then(
      () => (ended = true),
      () => (ended = true),
    );
    const pending = await eventually('the pending approval', async () => {
      const inbox = await cp.request('GET', `/v1/workspaces/${ws.slug}/approvals?status=pending`);
      return (inbox.body.approvals as { id: string; server: string; tool: string }[])[0];
    });
    expect(pending).toMatchObject({ server: 'sandbox', tool: 'bash' });

    await postgres.halt('fast');
    try {
      await eventually(
        'a progress note about the database, or the end of the call',
        () => ended || progress.some((m) => m.includes('database cannot be reached')),
      );
      expect(ended, 'the held command ended while the database was away').toBe(false);
    } finally {
      await postgres.resume();
    }
    // before the outage too, the agent heard it waits for a person, and where the request is reviewed
    expect(progress.some((m) => m.includes(`/review/${pending.id}`))).toBe(true);

    const approved = await eventually('the approval given once the database is back', async () => {
      const res = await cp.request('POST', `/v1/approvals/${pending.id}/approve`, {
        token: approver.token,
        body: { reason: 'checked after the outage' },
      });
      expect(res.status, res.text).not.toBe(503);
      return res;
    });
    expect(approved.status, approved.text).toBe(200);
    const result = await call;
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toEqual({ stdout: 'ran\n', stderr: '', exitCode: 0 });
    expect(textOf(await box.call('ls', {}))).toContain('approved.txt');
  });
});
