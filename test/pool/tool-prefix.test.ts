import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { aWorkspace, uniqueSlug } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';
import { aRemoteServer, connect, SERVERS, textOf } from './mcp-client';

/**
 * A catalog entry's `tool_prefix` names its tools on `/mcp/{ws}`
 * (docs/catalog.md, Tool names), and policy rules may name a tool by that
 * name (docs/policy.md): two copies of server-everything, whose tools have
 * the same names, told apart by their prefixes; server-memory without one.
 */
describe('tool_prefix on /mcp/{ws}', () => {
  let cp: TestControlPlane;
  let ws: string;
  let one: string;
  let two: string;
  let memory: string;
  let client: Client;

  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    // catalog names are the organisation's: unique, as other suites publish theirs in it
    one = await aRemoteServer(
      cp,
      cp.ownerToken,
      ws,
      { ...SERVERS.everything, env: { WHICH: 'the first' }, tool_prefix: 'ev1' },
      uniqueSlug('everything'),
    );
    two = await aRemoteServer(
      cp,
      cp.ownerToken,
      ws,
      { ...SERVERS.everything, env: { WHICH: 'the second' }, tool_prefix: 'ev2' },
      uniqueSlug('everything'),
    );
    memory = await aRemoteServer(cp, cp.ownerToken, ws, SERVERS.memory, uniqueSlug('memory'));
    const policy = await cp.request('PUT', `/v1/workspaces/${ws}/policy`, {
      body: {
        default: 'allow',
        rules: [
          // by the name the agent sees
          { id: 'no-first-sums', effect: 'deny', tools: ['ev1__get-sum'] },
          // by the server's own names, as before
          { id: 'no-second-echo', effect: 'deny', servers: [two], tools: ['echo'] },
        ],
      },
    });
    expect(policy.status, policy.text).toBe(200);
    ({ client } = await connect(cp, cp.ownerToken, `/mcp/${ws}`));
  });
  afterAll(async () => {
    await client?.close();
  });

  async function call(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
    return (await client.callTool({ name, arguments: args })) as CallToolResult;
  }

  it('lists tools under their prefix, and a server without one under its name', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['ev1__echo', 'ev1__get-env', 'ev2__get-env', 'ev2__get-sum']));
    expect(names).toEqual(expect.arrayContaining([`${memory}__read_graph`, `${memory}__create_entities`]));
    // never under the name of a server that has a prefix
    expect(names.filter((n) => n.startsWith(`${one}__`) || n.startsWith(`${two}__`))).toEqual([]);
    // the rules hide what they always deny, whichever name they use
    expect(names).not.toContain('ev1__get-sum');
    expect(names).not.toContain('ev2__echo');
  });

  it('calls reach the server whose prefix they name, with the tool under its own name', async () => {
    expect(JSON.parse(textOf(await call('ev1__get-env')))).toMatchObject({ WHICH: 'the first' });
    expect(JSON.parse(textOf(await call('ev2__get-env')))).toMatchObject({ WHICH: 'the second' });
    const echoed = await call('ev1__echo', { message: 'through the prefix' });
    expect(echoed.isError, textOf(echoed)).toBeFalsy();
    expect(textOf(echoed)).toContain('through the prefix');
    const sum = await call('ev2__get-sum', { a: 2, b: 3 });
    expect(sum.isError, textOf(sum)).toBeFalsy();
    expect(textOf(sum)).toContain('5');
    const created = await call(`${memory}__create_entities`, {
      entities: [{ name: 'Ada', entityType: 'person', observations: ['prefixed'] }],
    });
    expect(created.isError, textOf(created)).toBeFalsy();
    expect(textOf(await call(`${memory}__read_graph`))).toContain('Ada');
  });

  it('a prefixed server is not reached by its name, and an unknown prefix is an unknown tool', async () => {
    await expect(call(`${one}__echo`, { message: 'x' })).rejects.toThrow(
      `Unknown tool: ${one}__echo; the tools of ${one} are named ev1__<tool> (its tool_prefix)`,
    );
    await expect(call('ev9__echo', { message: 'x' })).rejects.toThrow('Unknown tool: ev9__echo');
  });

  it('a rule naming the prefixed name denies the call by that name and through the one-server endpoint', async () => {
    const refusal = (result: CallToolResult) =>
      (result._meta as Record<string, { code: string; rules: string[] }> | undefined)?.['aileron/refusal'];
    const byPrefix = await call('ev1__get-sum', { a: 1, b: 2 });
    expect(byPrefix.isError).toBe(true);
    expect(refusal(byPrefix)).toMatchObject({ code: 'POLICY_DENIED', rules: ['no-first-sums'] });
    // the unprefixed rule keeps matching its server's tool under the prefixed name
    expect(refusal(await call('ev2__echo', { message: 'x' }))).toMatchObject({ rules: ['no-second-echo'] });

    const { client: direct } = await connect(cp, cp.ownerToken, `/mcp/${ws}/${one}`);
    try {
      const plain = (await direct.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })) as CallToolResult;
      expect(refusal(plain)).toMatchObject({ code: 'POLICY_DENIED', rules: ['no-first-sums'] });
      expect((await direct.callTool({ name: 'echo', arguments: { message: 'fine' } })).isError).toBeFalsy();
    } finally {
      await direct.close();
    }
  });

  it('POST …/policy/evaluate decides by the prefixed name when given the tool_prefix', async () => {
    const evaluate = (body: Record<string, unknown>) =>
      cp.request('POST', `/v1/workspaces/${ws}/policy/evaluate`, { body });
    const prefixed = await evaluate({ server: one, tool: 'get-sum', tool_prefix: 'ev1' });
    expect(prefixed.status, prefixed.text).toBe(200);
    expect(prefixed.body).toMatchObject({ decision: 'deny', rules: ['no-first-sums'] });
    expect((await evaluate({ server: one, tool: 'get-sum' })).body).toMatchObject({ decision: 'allow' });
  });
});
