import { Command, InvalidArgumentError, Option } from 'commander';
import { ApiClient, ApiOptions } from './api-client';
import { note, out, printJson, printTable, when } from './output';

// What the REST API answers (see GET /v1/openapi.json); only the fields shown here.
interface WorkspaceView {
  id: string;
  slug: string;
  name: string;
  created_at: string;
  role?: string;
}

interface TokenView {
  id: string;
  name: string;
  role: string;
  workspace: string | null;
  prefix: string;
  created_by: string | null;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** --url, --token and --json on every command that talks to the REST API. */
export function withApiOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--url <url>',
        'control plane URL (env AILERON_URL; default http://127.0.0.1:$PORT, PORT defaulting to 8080)',
      ),
    )
    .addOption(
      new Option(
        '--token <token>',
        'API token (env AILERON_TOKEN; default the admin-token file in AILERON_DATA_DIR or ./.aileron)',
      ),
    )
    .option('--json', 'print the raw JSON the API answers');
}

export function seconds(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number of seconds.');
  return Number(value);
}

/** A repeatable option: `--group a --group b` → ['a', 'b']. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function tokenStatus(token: TokenView, now = Date.now()): string {
  if (token.revoked_at) return 'revoked';
  if (token.expires_at && Date.parse(token.expires_at) <= now) return 'expired';
  return 'active';
}

// Made with parent.command() rather than addCommand() so they inherit the
// root's output settings (the one-line error format).
export function addWorkspacesCommand(parent: Command): void {
  const workspaces = parent.command('workspaces').description("list and create workspaces in the token's organisation");

  withApiOptions(workspaces.command('list').description('workspaces the token can see, with its role in each')).action(
    async (options: ApiOptions) => {
      const list = await ApiClient.from(options).all<WorkspaceView>('/v1/workspaces');
      if (options.json) return printJson({ workspaces: list });
      if (list.length === 0) return out('no workspaces');
      printTable(
        ['slug', 'name', 'role', 'created', 'id'],
        list.map((w) => [w.slug, w.name, w.role, when(w.created_at), w.id]),
      );
    },
  );

  withApiOptions(
    workspaces
      .command('create')
      .description('create a workspace')
      .argument('<slug>', 'its permanent identifier: lowercase letters, digits and dashes')
      .option('--name <name>', 'display name (default: the slug)'),
  ).action(async (slug: string, options: ApiOptions & { name?: string }) => {
    const created = await ApiClient.from(options).post<WorkspaceView>('/v1/workspaces', {
      slug,
      name: options.name ?? slug,
    });
    if (options.json) return printJson(created);
    out(`created workspace ${created.slug} ("${created.name}", id ${created.id})`);
  });
}

export function addTokensCommand(parent: Command): void {
  const tokens = parent.command('tokens').description('create, list and revoke API tokens');

  withApiOptions(
    tokens
      .command('create')
      .description('create an API token; prints the token itself, once, on stdout')
      .requiredOption('--name <name>', 'what the token is for, e.g. ci')
      .requiredOption('--role <role>', 'the role it acts with, e.g. member or admin (never above your own)')
      .option('--workspace <slug>', 'restrict it to one workspace (default: every workspace of the organisation)')
      .option('--expires-in <seconds>', 'lifetime in seconds (default: it does not expire)', seconds),
  ).action(async (options: ApiOptions & { name: string; role: string; workspace?: string; expiresIn?: number }) => {
    const created = await ApiClient.from(options).post<TokenView & { token: string }>('/v1/tokens', {
      name: options.name,
      role: options.role,
      ...(options.workspace !== undefined ? { workspace: options.workspace } : {}),
      ...(options.expiresIn !== undefined ? { expires_in_seconds: options.expiresIn } : {}),
    });
    if (options.json) return printJson(created);
    // Only the token on stdout, so TOKEN=$(aileron-cp tokens create …) works.
    out(created.token);
    note(
      `created token "${created.name}" (id ${created.id}, role ${created.role}, ` +
        `${created.workspace ? `workspace ${created.workspace}` : 'every workspace'}, ` +
        `${created.expires_at ? `expires ${when(created.expires_at)}` : 'does not expire'}); it is shown only this once`,
    );
  });

  withApiOptions(
    tokens.command('list').description('API tokens of the organisation (metadata only, never the tokens)'),
  ).action(async (options: ApiOptions) => {
    const list = await ApiClient.from(options).all<TokenView>('/v1/tokens');
    if (options.json) return printJson({ tokens: list });
    if (list.length === 0) return out('no tokens');
    printTable(
      ['id', 'name', 'role', 'workspace', 'prefix', 'status', 'expires', 'last used', 'created'],
      list.map((t) => [
        t.id,
        t.name,
        t.role,
        t.workspace ?? '(all)',
        t.prefix,
        tokenStatus(t),
        when(t.expires_at),
        when(t.last_used_at),
        when(t.created_at),
      ]),
    );
  });

  withApiOptions(
    tokens
      .command('revoke')
      .description('revoke an API token; it stops working at once')
      .argument('<id>', 'the token id (see tokens list)'),
  ).action(async (id: string, options: ApiOptions) => {
    await ApiClient.from(options).delete(`/v1/tokens/${encodeURIComponent(id)}`);
    if (options.json) return printJson({ id, revoked: true });
    out(`revoked token ${id}`);
  });
}
