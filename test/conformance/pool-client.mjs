#!/usr/bin/env node
// The pool as the client under test of @modelcontextprotocol/conformance's
// client auth scenarios (docs/oauth.md, Conformance). The suite runs this with
// the scenario's MCP server URL as its argument (MCP_CONFORMANCE_SCENARIO and,
// for some, MCP_CONFORMANCE_CONTEXT in the environment). It does what an
// admin and a person would do with a running control plane (AILERON_URL,
// AILERON_TOKEN: an owner's token of the embedded mode):
//
//   1. publish the URL as a catalog entry with `auth: oauth`, per workspace (the
//      scenario's client credentials, when it gives some, as the entry's
//      hand-registered client, its secret in the vault), and assign it to a
//      workspace of the scenario's own (the suite runs its scenarios at once);
//   2. POST …/connections for the connect URL, then be the browser: the
//      embedded mode's sign-in link, the connect URL, the scenario's
//      authorization server, the callback;
//   3. call the scenario's tool through /mcp/{ws}.
//
// Plain JavaScript: it runs on the machine's Node with no build step.
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Browser } from '../support/form-browser.mjs';

const serverUrl = process.argv[2];
const base = (process.env.AILERON_URL ?? '').replace(/\/+$/, '');
const token = process.env.AILERON_TOKEN ?? '';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
if (!serverUrl || !base || !token) {
  console.error('usage: AILERON_URL=… AILERON_TOKEN=… pool-client.mjs <mcp server url>');
  process.exit(2);
}

/** The control plane's REST API as the owner. */
async function api(method, path, body) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

const name = `conf-${randomBytes(4).toString('hex')}`;
const workspace = name;
await api('POST', '/v1/workspaces', { slug: workspace, name: `Conformance ${process.env.MCP_CONFORMANCE_SCENARIO}` });
await api('PUT', `/v1/workspaces/${workspace}/policy`, { default: 'allow', rules: [] });
const oauth = { connections: 'per_workspace' };
if (context.client_id) {
  oauth.client_id = context.client_id;
  if (context.client_secret) {
    await api('PUT', `/v1/workspaces/${workspace}/secrets/conformance/${name}`, { value: context.client_secret });
    oauth.client_secret = `vault://conformance/${name}`;
  }
}
await api('POST', '/v1/catalog/servers', {
  name,
  version: '1.0.0',
  mode: 'remote',
  url: serverUrl,
  auth: 'oauth',
  oauth,
});
await api('PUT', `/v1/workspaces/${workspace}/servers/${name}`, { version: '1.0.0' });
// the owner signs in to the console with a one-time link, as `npm start` prints one
const browser = new Browser();
await browser.signInWithLink(base, token);

/** Connects the server in the browser, as the person would from the URL the API (or a tool error) gave. */
async function connectServer() {
  const prepared = await api('POST', `/v1/workspaces/${workspace}/connections`, { server: name });
  console.log(
    `connect at ${prepared.authorization_url} (${prepared.registration} at ${prepared.authorization_server})`,
  );
  const page = await browser.browse(prepared.authorization_url);
  if (page.status !== 200 || !page.text.includes('is connected'))
    throw new Error(`the connection was not made: ${page.status} at ${new URL(page.url).pathname}`);
  console.log(`${name} is connected`);
}
await connectServer();

const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp/${workspace}`), {
  requestInit: { headers: { authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'aileron-conformance', version: '1.0.0' });
await client.connect(transport);
const tools = (await client.listTools()).tools.filter((tool) => tool.name.startsWith(`${name}__`));
if (tools.length === 0)
  throw new Error(`no tools of ${name} listed (${client.getInstructions() ?? 'no instructions'})`);
// a call the upstream refuses for want of scope says to connect again (step-up): done, twice at most
for (const tool of tools) {
  for (let attempt = 1; ; attempt++) {
    const result = await client.callTool({ name: tool.name, arguments: {} });
    console.log(`${tool.name}: ${JSON.stringify(result)}`);
    if (!result.isError) break;
    const refusal = result._meta?.['aileron/refusal'];
    if (refusal?.code !== 'CONNECTION_NEEDS_RECONNECT' || attempt === 3) throw new Error(`${tool.name} failed`);
    await connectServer();
  }
}
await client.close();
