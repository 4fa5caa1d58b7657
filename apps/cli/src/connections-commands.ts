import { Command } from 'commander';
import { ApiClient, ApiOptions } from './api-client';
import { withApiOptions } from './api-commands';
import { note, out, printJson, printTable, when } from './output';

interface ConnectionView {
  id: string;
  server: string;
  connections: 'per_person' | 'per_workspace';
  user: { id: string; email: string | null; name: string | null } | null;
  state: string;
  problem: string | null;
  authorization_server: string;
  registration: string;
  scope: string | null;
  refreshable: boolean;
  access_expires_at: string | null;
  connected_at: string;
  last_used_at: string | null;
  reconnect_url: string;
}

interface ConnectAnswer {
  server: string;
  connections: 'per_person' | 'per_workspace';
  authorization_url: string;
  authorization_server: string;
  registration: string;
}

function path(workspace: string, rest = ''): string {
  return `/v1/workspaces/${encodeURIComponent(workspace)}/connections${rest}`;
}

/**
 * The pool's OAuth connections to upstream MCP servers (docs/oauth.md): the
 * CLI prints where to connect (a browser does the rest), lists them with their
 * state, and ends them. No command ever sees a token.
 */
export function addConnectionsCommand(parent: Command): void {
  const connections = parent
    .command('connections')
    .description("the pool's OAuth connections to upstream MCP servers that sign in with OAuth (auth: oauth)");

  withApiOptions(
    connections
      .command('connect')
      .description('print the URL to open in a browser to connect a server (yours, or the workspace’s for admins)')
      .argument('<server>', 'a server of the workspace whose catalog entry says auth: oauth')
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (server: string, options: ApiOptions & { workspace: string }) => {
    const answer = await ApiClient.from(options).post<ConnectAnswer>(path(options.workspace), { server });
    if (options.json) return printJson(answer);
    // the URL alone on stdout, so `xdg-open "$(aileron-cp connections connect …)"` works
    out(answer.authorization_url);
    note(
      `open it in a browser signed in to the console: ${
        answer.connections === 'per_workspace'
          ? `it connects ${answer.server} for everyone in ${options.workspace} (owners and admins)`
          : `it connects ${answer.server} as whoever signs in there`
      }; then ${answer.authorization_server} asks you to allow Aileron (registered: ${answer.registration})`,
    );
  });

  withApiOptions(
    connections
      .command('list')
      .description("a workspace's connections and their state (no tokens)")
      .requiredOption('--workspace <slug>', 'the workspace')
      .option('--server <name>', 'only the connections to this server'),
  ).action(async (options: ApiOptions & { workspace: string; server?: string }) => {
    const list = await ApiClient.from(options).all<ConnectionView>(
      path(options.workspace, options.server ? `?server=${encodeURIComponent(options.server)}` : ''),
    );
    if (options.json) return printJson({ connections: list });
    if (list.length === 0) return out('no connections');
    printTable(
      ['id', 'server', 'for', 'state', 'authorization server', 'expires', 'last used'],
      list.map((c) => [
        c.id,
        c.server,
        c.user ? (c.user.email ?? c.user.id) : 'workspace',
        c.problem ? `${c.state} (${c.problem})` : c.state,
        c.authorization_server,
        when(c.access_expires_at),
        when(c.last_used_at),
      ]),
    );
  });

  withApiOptions(
    connections
      .command('delete')
      .description('end a connection: revoked at the upstream where it can be, then deleted with its tokens')
      .argument('<id>', 'the connection id (see connections list)')
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (id: string, options: ApiOptions & { workspace: string }) => {
    const ended = await ApiClient.from(options).delete<ConnectionView & { upstream_revoked: boolean }>(
      path(options.workspace, `/${encodeURIComponent(id)}`),
    );
    if (options.json) return printJson(ended);
    out(
      `deleted connection ${ended.id} to ${ended.server}${ended.upstream_revoked ? '; the upstream revoked its tokens' : '; the upstream could not be told (it has no revocation endpoint, or did not answer)'}`,
    );
  });
}
