import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { expect } from 'vitest';
import { connect, textOf } from '../pool/mcp-client';
import { aWorkspace } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';

/** What the `bash` tool answers. */
export interface Bash {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** A sandbox, and a client on it as an agent session whose caveat names it (unless told otherwise). */
export interface Box {
  name: string;
  client: Client;
  call(tool: string, args?: Record<string, unknown>): Promise<Record<string, unknown>>;
  bash(command: string, args?: Record<string, unknown>): Promise<Bash>;
}

export const AGENT_CAPS = ['actions:list', 'actions:run', 'sandbox:use'];

/** Each writable root of a client's policy that the sandbox did not take is said on the command's stderr, with why. */
export function expectIgnoredRoots(stderr: string, ignored: [root: string, why: string][]): void {
  for (const [root, why] of ignored)
    expect(stderr).toContain(`[aileron] the writable root ${root} was ignored: ${why}\n`);
}

/** A command whose write the sandbox's bounds (or a client's policy) refused: it failed, saying the file system is read-only. */
export function refusedReadOnly(ran: Bash, command: string): Bash {
  expect(ran.exitCode, command).not.toBe(0);
  expect(ran.stderr, command).toContain('Read-only file system');
  return ran;
}

/**
 * An agent session on the sandbox `name` of `workspace` (its caveat names
 * `caveat`, the sandbox itself unless told otherwise, none when null), and
 * an MCP client on the workspace's sandbox server as that session. The
 * client goes into `clients`, for the suite to close.
 */
export async function agentOn(
  cp: TestControlPlane,
  workspace: string,
  name: string,
  clients: Client[],
  options: { caveat?: string | null; timeoutMs?: number } = {},
): Promise<Box & { sessionId: string }> {
  const caveat = options.caveat === undefined ? name : options.caveat;
  const session = await cp.request('POST', '/v1/sessions', {
    body: {
      workspace,
      name: `agent on ${name}`,
      caps: AGENT_CAPS,
      ...(caveat === null ? {} : { caveats: { sandbox: caveat } }),
    },
  });
  expect(session.status, session.text).toBe(201);
  const { client } = await connect(cp, session.body.caveat_token, `/mcp/${workspace}/sandbox`);
  clients.push(client);
  const call = async (tool: string, args: Record<string, unknown> = {}) =>
    (await client.callTool(
      { name: tool, arguments: { sandbox: name, ...args } },
      undefined,
      options.timeoutMs ? { timeout: options.timeoutMs } : undefined,
    )) as Record<string, unknown>;
  const bash = async (command: string, args: Record<string, unknown> = {}) => {
    const ran = await call('bash', { command, ...args });
    expect(ran.isError, textOf(ran)).toBeFalsy();
    return ran.structuredContent as Bash;
  };
  return { name, sessionId: session.body.id as string, client, call, bash };
}

/**
 * A sandbox `name` (its create request's other fields in `body`) in a new
 * workspace of the owner's whose policy allows every command, and an agent on
 * it (see agentOn).
 */
export async function anAllowedSandbox(
  cp: TestControlPlane,
  name: string,
  clients: Client[],
  body: Record<string, unknown> = {},
): Promise<Box & { workspace: string }> {
  const workspace = (await aWorkspace(cp, cp.ownerToken)).slug;
  await cp.request('PUT', `/v1/workspaces/${workspace}/policy`, { body: { default: 'allow', rules: [] } });
  const made = await cp.request('POST', `/v1/workspaces/${workspace}/sandboxes`, { body: { name, ...body } });
  expect(made.status, made.text).toBe(201);
  return { ...(await agentOn(cp, workspace, name, clients, { timeoutMs: 120_000 })), workspace };
}

/** The id the control plane gave a sandbox (its directory and cgroups on the host are named by it). */
export async function sandboxIdOf(cp: TestControlPlane, box: { name: string; workspace: string }): Promise<string> {
  return (
    await cp.cp.database.client.sandbox.findFirstOrThrow({
      where: { name: box.name, workspace: { slug: box.workspace } },
    })
  ).id;
}
