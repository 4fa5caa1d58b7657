import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aToken, aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { alive } from '../support/services';
import { holdInstanceStarts } from './held-starts';
import { aRemoteServer, connect, SERVERS, textOf } from './mcp-client';

interface Listed {
  id: string;
  server: string;
  state: string;
  started_at: string;
  pid?: number;
}

/** An admin restarts a pool instance: it says starting, then runs as a new process, and its MCP sessions carry on. */
describe('restarting a pool instance', () => {
  let cp: TestControlPlane;
  let ws: string;
  let server: string;

  beforeAll(async () => {
    cp = await startApiControlPlane();
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
    server = await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.everything);
  });
  afterAll(async () => cp?.close());

  const instances = async (): Promise<Listed[]> => {
    const listed = await cp.request('GET', `/v1/workspaces/${ws}/pool/instances`);
    expect(listed.status, listed.text).toBe(200);
    return listed.body.items;
  };

  it('stops the instance, lists its successor as starting until it runs, and the session carries on', async () => {
    const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws}/${server}`);
    try {
      expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'before' } }))).toContain('before');
      const [before] = await instances();
      expect(before).toMatchObject({ server, state: 'running' });
      expect(alive(before!.pid!)).toBe(true);

      // the next start waits for the test, so its `starting` state can be seen
      const starts = holdInstanceStarts(cp);
      const restarted = cp.request('POST', `/v1/workspaces/${ws}/pool/instances/${before!.id}/restart`);
      try {
        const starting = await eventually('the successor starting', async () =>
          (await instances()).find((i) => i.state === 'starting'),
        );
        expect(starting.id).not.toBe(before!.id);
        expect(starting.server).toBe(server);
        expect(alive(before!.pid!)).toBe(false);
      } finally {
        starts.release();
      }
      const answer = await restarted;
      expect(answer.status, answer.text).toBe(200);
      expect(answer.body).toMatchObject({ server, state: 'running' });
      expect(answer.body.id).not.toBe(before!.id);
      expect(Date.parse(answer.body.started_at)).toBeGreaterThan(Date.parse(before!.started_at));
      expect(await instances()).toMatchObject([{ id: answer.body.id, state: 'running', pid: answer.body.pid }]);

      expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'after' } }))).toContain('after');
    } finally {
      await client.close();
    }
  });

  it('is for owners and admins, and names an instance it does not run', async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws });
    const [running] = await instances();
    const refused = await cp.request('POST', `/v1/workspaces/${ws}/pool/instances/${running!.id}/restart`, {
      token: member.token,
    });
    expect(refused.status).toBe(403);
    expect((await instances())[0]!.id).toBe(running!.id);

    const unknown = await cp.request('POST', `/v1/workspaces/${ws}/pool/instances/${server}-000000000000/restart`);
    expect(unknown.status, unknown.text).toBe(404);
    expect(unknown.body.code).toBe('POOL_INSTANCE_NOT_FOUND');
  });
});
