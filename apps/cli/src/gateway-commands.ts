import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { ApiClient, ApiOptions } from './api-client';
import { collect, seconds, withApiOptions } from './api-commands';
import { CliError } from './cli-error';
import { note, out, printJson, printTable, when } from './output';

interface GatewayView {
  id: string;
  name: string;
  groups: string[];
  prefix: string;
  enrolled_at: string;
  last_seen_at: string | null;
  revoked_at: string | null;
  token_expires_at: string | null;
  previous_token_valid_until: string | null;
}

interface PolicyView {
  version: number;
  digest: string;
  changed?: boolean;
  document: unknown;
}

interface Decision {
  decision: string;
  reason: string;
  rules: string[];
  approval_route: string | null;
  errors: { rule: string; message: string }[];
  policy_version: number;
}

type WorkspaceOption = ApiOptions & { workspace: string };

function json(value: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(value);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through to the one message below
  }
  throw new InvalidArgumentError('must be a JSON object, e.g. \'{"repo":"payments"}\'.');
}

export function addGatewaysCommand(parent: Command): void {
  const gateways = parent
    .command('gateways')
    .description("enrol, list, rotate and revoke a workspace's local gateways");

  withApiOptions(
    gateways
      .command('enroll-code')
      .description('make a one-time enrolment code; prints the code itself, once, on stdout')
      .requiredOption('--workspace <slug>', 'the workspace the gateway joins')
      .option('--expires-in <seconds>', 'how long the code works (default 3600)', seconds)
      .option('--group <name>', 'a rollout group the gateway joins (repeatable)', collect)
      .option(
        '--token-expires-in <seconds>',
        "the enrolled gateway's token stops working this long after enrolment (60 s to 366 days; default: never)",
        seconds,
      ),
  ).action(async (options: WorkspaceOption & { expiresIn?: number; group?: string[]; tokenExpiresIn?: number }) => {
    const created = await ApiClient.from(options).post<{
      code: string;
      expires_at: string;
      groups: string[];
      token_expires_in_seconds: number | null;
    }>(`/v1/workspaces/${encodeURIComponent(options.workspace)}/enrollment-codes`, {
      ...(options.expiresIn !== undefined ? { expires_in_seconds: options.expiresIn } : {}),
      groups: options.group ?? [],
      ...(options.tokenExpiresIn !== undefined ? { token_expires_in_seconds: options.tokenExpiresIn } : {}),
    });
    if (options.json) return printJson(created);
    out(created.code);
    const lifetime =
      created.token_expires_in_seconds === null
        ? ''
        : `; the gateway's token will stop working ${created.token_expires_in_seconds} s after it enrols`;
    note(
      `enrolment code for workspace ${options.workspace}, good once until ${when(created.expires_at)}; the gateway exchanges it at POST /v1/gateway/enroll${lifetime}`,
    );
  });

  withApiOptions(
    gateways
      .command('list')
      .description('enrolled gateways, with when each was last seen')
      .requiredOption('--workspace <slug>', 'the workspace')
      .option('--enrolled-by <user id>', 'only those enrolled with codes that person, or their API tokens, made'),
  ).action(async (options: WorkspaceOption & { enrolledBy?: string }) => {
    const filter = options.enrolledBy ? `?enrolled_by=${encodeURIComponent(options.enrolledBy)}` : '';
    const list = await ApiClient.from(options).all<GatewayView>(
      `/v1/workspaces/${encodeURIComponent(options.workspace)}/gateways${filter}`,
    );
    if (options.json) return printJson({ gateways: list });
    if (list.length === 0) return out('no gateways');
    printTable(
      ['id', 'name', 'groups', 'status', 'last seen', 'enrolled', 'token expires'],
      list.map((g) => [
        g.id,
        g.name,
        g.groups.join(',') || '-',
        g.revoked_at ? 'revoked' : 'active',
        when(g.last_seen_at),
        when(g.enrolled_at),
        when(g.token_expires_at),
      ]),
    );
  });

  withApiOptions(
    gateways
      .command('rotate')
      .description(
        'give a gateway a new token; prints the token itself, once, on stdout. The old one works for the grace period, then every replica refuses it',
      )
      .argument('<id>', 'the gateway id (see gateways list)')
      .requiredOption('--workspace <slug>', 'the workspace')
      .option(
        '--grace <seconds>',
        'how long the old token keeps working (default 3600; 0: it stops at once; at most 7 days)',
        seconds,
      )
      .option('--expires-in <seconds>', 'when the new token stops working (60 s to 366 days; default: never)', seconds),
  ).action(async (id: string, options: WorkspaceOption & { grace?: number; expiresIn?: number }) => {
    const rotated = await ApiClient.from(options).post<GatewayView & { token: string }>(
      `/v1/workspaces/${encodeURIComponent(options.workspace)}/gateways/${encodeURIComponent(id)}/rotate`,
      {
        ...(options.grace !== undefined ? { grace_seconds: options.grace } : {}),
        ...(options.expiresIn !== undefined ? { expires_in_seconds: options.expiresIn } : {}),
      },
    );
    if (options.json) return printJson(rotated);
    out(rotated.token);
    const old = rotated.previous_token_valid_until
      ? `the old token works until ${when(rotated.previous_token_valid_until)}`
      : 'the old token no longer works';
    const expiry = rotated.token_expires_at
      ? `the new one until ${when(rotated.token_expires_at)}`
      : 'the new one until it is rotated or the gateway revoked';
    note(`new token for gateway ${rotated.name} (${rotated.id}), shown only this once; ${old}, ${expiry}`);
  });

  withApiOptions(
    gateways
      .command('revoke')
      .description(
        'revoke a gateway, or with --enrolled-by every gateway of the workspace a person enrolled; their tokens stop working at once',
      )
      .argument('[id]', 'the gateway id (see gateways list)')
      .requiredOption('--workspace <slug>', 'the workspace')
      .option('--enrolled-by <user id>', 'the person whose gateways to revoke (they and their tokens stay)'),
  ).action(async (id: string | undefined, options: WorkspaceOption & { enrolledBy?: string }) => {
    if ((id === undefined) === (options.enrolledBy === undefined))
      throw new CliError('give either a gateway id or --enrolled-by <user id>');
    const api = ApiClient.from(options);
    const path = `/v1/workspaces/${encodeURIComponent(options.workspace)}/gateways`;
    if (options.enrolledBy !== undefined) {
      const { revoked } = await api.post<{ revoked: GatewayView[] }>(`${path}/revoke`, {
        enrolled_by: options.enrolledBy,
      });
      if (options.json) return printJson({ revoked });
      if (revoked.length === 0) return out(`no gateway of ${options.workspace} left to revoke for that person`);
      for (const gateway of revoked) out(`revoked gateway ${gateway.name} (${gateway.id})`);
      return;
    }
    const revoked = await api.delete<GatewayView>(`${path}/${encodeURIComponent(id!)}`);
    if (options.json) return printJson(revoked);
    out(`revoked gateway ${revoked.name} (${revoked.id})`);
  });
}

export function addPolicyCommand(parent: Command): void {
  const policy = parent.command('policy').description("read, replace and try out a workspace's policy");

  withApiOptions(
    policy
      .command('get')
      .description('print the policy document in force (JSON)')
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (options: WorkspaceOption) => {
    const current = await ApiClient.from(options).get<PolicyView>(
      `/v1/workspaces/${encodeURIComponent(options.workspace)}/policy`,
    );
    if (options.json) return printJson(current);
    printJson(current.document);
    note(`version ${current.version}`);
  });

  withApiOptions(
    policy
      .command('put')
      .description('replace the policy with a JSON or YAML file (- for stdin)')
      .argument('<file>', 'the document; .yaml/.yml files are sent as YAML')
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (file: string, options: WorkspaceOption) => {
    let text: string;
    try {
      text = readFileSync(file === '-' ? 0 : file, 'utf8');
    } catch (error) {
      throw new CliError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`);
    }
    const yaml = /\.ya?ml$/i.test(file) || (file === '-' && !/^\s*[{[]/.test(text));
    const written = await ApiClient.from(options).putText<PolicyView>(
      `/v1/workspaces/${encodeURIComponent(options.workspace)}/policy`,
      text,
      yaml ? 'application/yaml' : 'application/json',
    );
    if (options.json) return printJson(written);
    out(
      written.changed
        ? `policy version ${written.version} is in force`
        : `unchanged: version ${written.version} is already this document`,
    );
  });

  withApiOptions(
    policy
      .command('evaluate')
      .description('what the policy decides for a call, and which rules decided; changes nothing')
      .requiredOption('--workspace <slug>', 'the workspace')
      .requiredOption('--server <name>', 'the server')
      .requiredOption('--tool <name>', 'the tool')
      .option('--args <json>', 'the call arguments as a JSON object', json)
      .option('--mode <mode>', 'execution mode: local or remote')
      .option('--role <role>', "the caller's role (repeatable)", collect),
  ).action(
    async (
      options: WorkspaceOption & {
        server: string;
        tool: string;
        args?: Record<string, unknown>;
        mode?: string;
        role?: string[];
      },
    ) => {
      const decision = await ApiClient.from(options).post<Decision>(
        `/v1/workspaces/${encodeURIComponent(options.workspace)}/policy/evaluate`,
        {
          server: options.server,
          tool: options.tool,
          ...(options.args ? { arguments: options.args } : {}),
          ...(options.mode ? { execution_mode: options.mode } : {}),
          ...(options.role ? { principal: { roles: options.role } } : {}),
        },
      );
      if (options.json) return printJson(decision);
      const by =
        decision.reason === 'default'
          ? 'the default'
          : `rule${decision.rules.length > 1 ? 's' : ''} ${decision.rules.join(', ')}`;
      out(
        `${decision.decision} (by ${by}${decision.reason === 'evaluation_error' ? ', which could not be evaluated' : ''}; policy version ${decision.policy_version})`,
      );
      if (decision.approval_route) out(`approval route: ${decision.approval_route}`);
      for (const error of decision.errors) note(`rule ${error.rule}: ${error.message}`);
    },
  );
}
