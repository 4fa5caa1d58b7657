import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'vitest';
import type { TestControlPlane } from '../support/control-plane';
import { uniqueSlug } from '../support/builders';

/** The reference MCP servers from node_modules, as catalog commands (no network: not npx). */
export const SERVERS = {
  everything: {
    command: 'node',
    args: [resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'],
  },
  // the sandbox's code is read-only: the memory file lives in the instance's home
  memory: {
    command: 'node',
    args: [resolve('node_modules/@modelcontextprotocol/server-memory/dist/index.js')],
    env: { MEMORY_FILE_PATH: '/home/mcp/memory.jsonl' },
  },
  filesystem: (dir: string) => ({
    command: 'node',
    args: [resolve('node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'), dir],
  }),
};

/** server-everything's catalog entry (stdio, run by the pool), as an admin posts it to `/v1/catalog/servers` */
export const EVERYTHING_ENTRY = {
  name: 'everything',
  version: '1.0.0',
  mode: 'remote',
  transport: 'stdio',
  ...SERVERS.everything,
};

/** Publishes a remote catalog entry and assigns it to the workspace; returns its name. */
export async function aRemoteServer(
  cp: TestControlPlane,
  token: string,
  workspace: string,
  definition: Record<string, unknown>,
  name = uniqueSlug('srv'),
): Promise<string> {
  const published = await cp.request('POST', '/v1/catalog/servers', {
    token,
    body: { name, version: '1.0.0', mode: 'remote', transport: 'stdio', ...definition },
  });
  expect(published.status, published.text).toBe(201);
  const assigned = await cp.request('PUT', `/v1/workspaces/${workspace}/servers/${name}`, {
    token,
    body: { version: '1.0.0' },
  });
  expect(assigned.status, assigned.text).toBe(200);
  return name;
}

/** An SDK client connected through the control plane's MCP endpoint. */
export async function connect(
  cp: TestControlPlane,
  token: string,
  path: string,
  capabilities: Record<string, unknown> = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${cp.url}${path}`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'pool-test', version: '1.0.0' }, { capabilities });
  await client.connect(transport);
  return { client, transport };
}

export function textOf(result: unknown): string {
  return (((result as { content?: unknown }).content as { type: string; text?: string }[] | undefined) ?? [])
    .map((c) => c.text ?? '')
    .join('\n');
}
