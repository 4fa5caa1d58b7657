import { randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoolInstances } from '../../libs/pool/src';
import { aWorkspace, uniqueSlug } from '../support/builders';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { digestOf, envDigestServer } from '../support/env-digest-server';
import { eventually } from '../support/eventually';
import { aRemoteServer, connect, SERVERS, textOf } from './mcp-client';

/**
 * Rotation reaches running instances: a new version of a secret a remote
 * server uses replaces its instance on every replica, and MCP sessions carry
 * on, at their next request, with the new value — as after a new catalog
 * version. The server reports a digest of its environment variable, never the
 * value.
 */
describe('a rotated secret reaches the running pool instances that use it, on every replica', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;
  let ws: { slug: string; id: string };
  const clients: Client[] = [];

  beforeAll(async () => {
    a = await startTestControlPlane('postgres');
    b = await aReplicaOf(a);
    ws = await aWorkspace(a, a.ownerToken);
    const policy = await a.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: { default: 'allow', rules: [] },
    });
    expect(policy.status, policy.text).toBe(200);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await b?.close();
    await a?.close();
  });

  const instancesOf = (cp: TestControlPlane, server: string) =>
    cp.cp.app
      .get(PoolInstances)
      .list({ workspaceId: ws.id } as never)
      .filter((i) => i.server === server);
  const write = async (path: string, value: string) => {
    const res = await a.request('PUT', `/v1/workspaces/${ws.slug}/secrets/${path}`, { body: { value } });
    expect(res.status, res.text).toBe(200);
  };
  const digest = async (client: Client) => textOf(await client.callTool({ name: 'digest', arguments: {} }));
  async function aSessionOn(cp: TestControlPlane, server: string): Promise<Client> {
    const { client } = await connect(cp, a.ownerToken, `/mcp/${ws.slug}/${server}`);
    clients.push(client);
    return client;
  }
  /** A remote server whose API_TOKEN comes from the vault, with a session on each replica. */
  async function aServerUsing(path: string): Promise<{ server: string; onA: Client; onB: Client }> {
    const server = await aRemoteServer(a, a.ownerToken, ws.slug, {
      ...envDigestServer('API_TOKEN'),
      env: { API_TOKEN: `vault://${path}` },
    });
    return { server, onA: await aSessionOn(a, server), onB: await aSessionOn(b, server) };
  }

  it('replaces the instance on both replicas; each session gets the new value at its next call, without reconnecting', async () => {
    const path = `${uniqueSlug('api')}/token`;
    const [first, second] = [`v1-${randomBytes(12).toString('hex')}`, `v2-${randomBytes(12).toString('hex')}`];
    await write(path, first);
    const { server, onA, onB } = await aServerUsing(path);
    // a server that does not use the secret keeps its instance
    const bystander = await aRemoteServer(a, a.ownerToken, ws.slug, SERVERS.everything);
    const bystanderSession = await aSessionOn(a, bystander);
    expect(textOf(await bystanderSession.callTool({ name: 'echo', arguments: { message: 'hi' } }))).toContain('hi');

    expect(await digest(onA)).toBe(digestOf(first));
    expect(await digest(onB)).toBe(digestOf(first));
    const [onABefore] = instancesOf(a, server);
    const [onBBefore] = instancesOf(b, server);
    const [bystanderBefore] = instancesOf(a, bystander);
    expect(onABefore).toBeDefined();
    expect(onBBefore).toBeDefined();

    await write(path, second);
    // B learns of it through Redis: no request of its own asks
    await eventually(
      'both replicas stopped the instance holding version 1',
      () => instancesOf(a, server).length === 0 && instancesOf(b, server).length === 0,
    );

    expect(await digest(onA)).toBe(digestOf(second));
    expect(await digest(onB)).toBe(digestOf(second));
    expect(instancesOf(a, server)[0]!.id).not.toBe(onABefore!.id);
    expect(instancesOf(b, server)[0]!.id).not.toBe(onBBefore!.id);
    expect(instancesOf(a, bystander)[0]!.id).toBe(bystanderBefore!.id);

    // each replaced instance is an event naming the secret's path and versions, never its value
    const events = await eventually('an event from each replica', async () => {
      const res = await a.request('GET', `/v1/workspaces/${ws.slug}/audit?type=pool.credentials_rotated&limit=500`);
      const mine = (res.body.items as { data: Record<string, unknown> }[]).filter((e) => e.data.server === server);
      return mine.length === 2 ? mine : undefined;
    });
    expect(events.map((e) => e.data.instance).sort()).toEqual([onABefore!.id, onBBefore!.id].sort());
    for (const event of events)
      expect(event.data).toMatchObject({ path, held_version: 1, secret_version: 2, version: '1.0.0' });
    expect(JSON.stringify(events)).not.toContain(first);
    expect(JSON.stringify(events)).not.toContain(second);

    // the new instances read version 2, each read audited
    const reads = await a.request('GET', `/v1/workspaces/${ws.slug}/audit?type=secret.read&limit=500`);
    const versionsRead = (reads.body.items as { data: { path: string; version: number } }[])
      .filter((r) => r.data.path === path)
      .map((r) => r.data.version);
    expect(versionsRead.sort()).toEqual([1, 1, 2, 2]);
  });

  it('stops an instance whose secret is deleted: the next call says the secret is gone, and a new value brings it back', async () => {
    const path = `${uniqueSlug('gone')}/token`;
    const value = `v1-${randomBytes(12).toString('hex')}`;
    await write(path, value);
    const { server, onA, onB } = await aServerUsing(path);
    expect(await digest(onA)).toBe(digestOf(value));
    expect(await digest(onB)).toBe(digestOf(value));

    expect((await a.request('DELETE', `/v1/workspaces/${ws.slug}/secrets/${path}`)).status).toBe(204);
    await eventually(
      'no instance left holding the deleted value',
      () => instancesOf(a, server).length === 0 && instancesOf(b, server).length === 0,
    );
    await expect(digest(onA)).rejects.toThrow(/names no secret/);

    const again = `v2-${randomBytes(12).toString('hex')}`;
    await write(path, again);
    // the failed start counts as a crash: the next one waits out a short backoff
    expect(await eventually('the server starts again', () => digest(onA).catch(() => undefined))).toBe(digestOf(again));
    expect(await digest(onB)).toBe(digestOf(again));
  });
});
