import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MESSAGE_BUS, type MessageBus } from '../../libs/platform/bus/src';
import { aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { RedisServer, startRedis } from '../support/services';
import { aRemoteServer, connect, SERVERS } from '../pool/mcp-client';

/**
 * The README promises that installations can share one Redis under their own
 * AILERON_QUEUE_PREFIX. Two control planes (each its own database) on one
 * Redis of this test's own, so every key in it is theirs: each uses every
 * Redis feature, then no key and no channel may lie outside its prefix, and
 * no message of one may reach the other.
 */
describe('two installations on one Redis', () => {
  const PREFIXES = ['alpha', 'beta'] as const;
  let redis: RedisServer;
  const installations: TestControlPlane[] = [];
  const clients: Client[] = [];
  let watcher: IORedis;
  let scanner: IORedis;
  const channels = new Set<string>();

  beforeAll(async () => {
    redis = await startRedis();
    watcher = new IORedis(redis.url);
    scanner = new IORedis(redis.url);
    watcher.on('pmessage', (_pattern: string, channel: string) => void channels.add(channel));
    await watcher.psubscribe('*');
    for (const prefix of PREFIXES)
      installations.push(
        await startTestControlPlane('postgres', { REDIS_URL: redis.url, AILERON_QUEUE_PREFIX: prefix }),
      );
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    for (const cp of installations) await cp.close();
    watcher?.disconnect();
    scanner?.disconnect();
    redis?.stop();
  });

  it('keeps every key and channel of each under its prefix, and their messages apart', async () => {
    for (const cp of installations) {
      // REST writes: outbox jobs on BullMQ, cache invalidations on the bus
      const ws = await aWorkspace(cp, cp.ownerToken);
      const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
        body: { default: 'allow', rules: [] },
      });
      expect(policy.status, policy.text).toBe(200);
      // an MCP session: its entry in the session directory, and its requests counted by the rate limits
      const name = await aRemoteServer(cp, cp.ownerToken, ws.slug, SERVERS.everything);
      const { client } = await connect(cp, cp.ownerToken, `/mcp/${ws.slug}/${name}`);
      clients.push(client);
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    }

    // Redis delivers in the order it executes: a message of one that reached the other would come before the other's own
    const heard = installations.map(() => [] as unknown[]);
    const buses = installations.map((cp) => cp.cp.app.get<MessageBus>(MESSAGE_BUS));
    const stop = buses.map((bus, i) => bus.subscribe('probe', (message) => void heard[i]!.push(message)));
    // the subscriptions are on: each installation hears itself
    await expect
      .poll(async () => {
        for (const [i, bus] of buses.entries()) await bus.publish('probe', { ping: PREFIXES[i] });
        return heard.every((h) => h.length > 0);
      })
      .toBe(true);
    for (const h of heard) h.length = 0;
    for (const [i, bus] of buses.entries()) await bus.publish('probe', { from: PREFIXES[i] });
    await expect.poll(() => heard.every((h) => h.some((m) => (m as { from?: string }).from !== undefined))).toBe(true);
    for (const [i, h] of heard.entries())
      expect(h.filter((m) => (m as { from?: string }).from !== undefined)).toEqual([{ from: PREFIXES[i] }]);
    for (const unsubscribe of stop) unsubscribe();

    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await scanner.scan(cursor, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    expect(keys.filter((key) => !PREFIXES.some((prefix) => key.startsWith(`${prefix}:`)))).toEqual([]);
    for (const prefix of PREFIXES) {
      const mine = keys.filter((key) => key.startsWith(`${prefix}:`));
      // each feature left its keys, so the check above covered it
      for (const kind of ['rl:ws:', 'rl:pr:', 'mcp-session:', 'outbox.deliver:'])
        expect(
          mine.some((key) => key.startsWith(`${prefix}:${kind}`)),
          `${prefix}:${kind}*`,
        ).toBe(true);
    }
    expect([...channels].filter((channel) => !PREFIXES.some((prefix) => channel.startsWith(`${prefix}:`)))).toEqual([]);
    for (const prefix of PREFIXES) expect(channels).toContain(`${prefix}:bus:cache.policy`);
  });
});
