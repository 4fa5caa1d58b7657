import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../pool/mcp-client';
import { aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';

/**
 * A failed tool call says why the same way whoever answers it: the pool (a
 * refusal of policy), the sandbox tools (a sandbox that does not exist, bad
 * arguments) and aileron-mcp (its own tools, the control plane's refusals).
 * The text starts with the code; `_meta["aileron/refusal"]` holds the code and
 * the message; nothing goes in structuredContent, which a client checks
 * against the tool's output schema. Needs `npm run build` (the bundle).
 */
const BUNDLE = resolve('dist/aileron-mcp.cjs');

function expectToolError(result: unknown, code: string): string {
  const r = result as {
    isError?: boolean;
    content?: { type: string; text: string }[];
    _meta?: Record<string, { code: string; message: string }>;
    structuredContent?: unknown;
  };
  expect(r.isError, JSON.stringify(r)).toBe(true);
  expect(r.structuredContent).toBeUndefined();
  const text = r.content?.[0]?.text ?? '';
  expect(text.startsWith(`${code}: `), text).toBe(true);
  const refusal = r._meta?.['aileron/refusal'];
  expect(refusal, JSON.stringify(r)).toMatchObject({ code, message: text.slice(code.length + 2) });
  return refusal!.message;
}

describe('tool errors', () => {
  let cp: TestControlPlane;
  let ws: string;
  let dir: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    expect(existsSync(BUNDLE), 'aileron-mcp is not bundled: run `npm run build` first').toBe(true);
    dir = mkdtempSync(join(tmpdir(), 'aileron-tool-errors-'));
    copyFileSync(BUNDLE, join(dir, 'aileron-mcp'));
    cp = await startApiControlPlane();
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    expect((await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'box' } })).status).toBe(201);
    const policy = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: { default: 'allow', rules: [{ id: 'no-shell', effect: 'deny', servers: ['sandbox'], tools: ['bash'] }] },
    });
    expect(policy.status, policy.text).toBe(200);
  });
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the pool and the sandbox tools put the code in the same place', async () => {
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws}/sandbox`);
    clients.push(client);
    const denied = expectToolError(
      await client.callTool({ name: 'bash', arguments: { sandbox: 'box', command: 'true' } }),
      'POLICY_DENIED',
    );
    expect(denied).toContain('no-shell');
    expect(
      expectToolError(
        await client.callTool({ name: 'read', arguments: { sandbox: 'nowhere', path: 'x' } }),
        'SANDBOX_NOT_FOUND',
      ),
    ).toBe('sandbox not found: nowhere');
    expect(
      expectToolError(await client.callTool({ name: 'read', arguments: { sandbox: 'box' } }), 'INVALID_ARGUMENTS'),
    ).toMatch(/^arguments\.path: /);
  });

  it("aileron-mcp answers its own errors so, and passes the pool's on as they came", async () => {
    const started = await cp.request('POST', `/v1/workspaces/${ws}/sessions`, {
      body: { caps: ['actions:list', 'actions:run', 'comms', 'sandbox:use'] },
    });
    expect(started.status, started.text).toBe(201);
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      AILERON_URL: cp.url,
      AILERON_TOKEN: started.body.caveat_token,
      AILERON_SESSION_ID: started.body.id,
      AILERON_WORKSPACE: ws,
    };
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [join(dir, 'aileron-mcp')],
        env,
        cwd: dir,
        stderr: 'pipe',
      }),
    );
    clients.push(client);

    expectToolError(
      await client.callTool({ name: 'sandbox__bash', arguments: { sandbox: 'box', command: 'true' } }),
      'POLICY_DENIED',
    );
    expectToolError(
      await client.callTool({ name: 'sandbox__read', arguments: { sandbox: 'nowhere', path: 'x' } }),
      'SANDBOX_NOT_FOUND',
    );
    expect(
      expectToolError(await client.callTool({ name: 'message_user', arguments: { text: '' } }), 'INVALID_ARGUMENTS'),
    ).toMatch(/^arguments\.text: /);

    expect((await cp.request('DELETE', `/v1/workspaces/${ws}/sessions/${started.body.id}`)).status).toBe(200);
    expect(
      expectToolError(
        await client.callTool({ name: 'message_user', arguments: { text: 'still there?' } }),
        'SESSION_ENDED',
      ),
    ).toContain('refused the session token');
  });
});
