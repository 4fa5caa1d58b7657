import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { aRemoteServer, connect, SERVERS, textOf } from './mcp-client';

describe('pool smoke', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane('pglite');
  });
  afterAll(async () => cp?.close());

  it('calls echo through /mcp/{ws}/{server}', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { token: cp.ownerToken, body: { default: 'allow', rules: [] } });
    const name = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything);
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws.slug}/${name}`);
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain('echo');
    const result = await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
    expect(textOf(result)).toContain('hi');
    await client.close();
  });
});
