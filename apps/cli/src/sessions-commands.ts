import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import {
  attenuateCaveatToken,
  Caveat,
  CaveatTokenError,
  isCapability,
  SESSION_CAPABILITIES,
} from '@aileron/sessions/caveat-token';
import { ApiClient, ApiOptions } from './api-client';
import { collect, seconds, withApiOptions } from './api-commands';
import { CliError, codedError } from './cli-error';
import { note, out, printJson, printTable, when } from './output';

interface SessionView {
  id: string;
  workspace: string;
  name: string | null;
  agent: string | null;
  caps: string[];
  caveats: string[];
  created_by: string;
  created_at: string;
  expires_at: string;
  ended_at: string | null;
  state: string;
}

interface StartedView {
  id: string;
  caveat_token: string;
  expires_at: string;
  caps: string[];
}

function caps(value: string): string[] {
  const list = value.split(',').map((c) => c.trim());
  const wrong = list.find((c) => !isCapability(c));
  if (wrong !== undefined)
    throw new InvalidArgumentError(`"${wrong}" is not a capability; choose from ${SESSION_CAPABILITIES.join(', ')}.`);
  return list;
}

/** The narrowing options `start` and `attenuate` share. */
interface Narrowing {
  server?: string[];
  tool?: string[];
  sandbox?: string;
  caps?: string[];
}

function withNarrowing(command: Command): Command {
  return command
    .option('--server <name>', 'only this server of the workspace (repeatable: any of them)', collect)
    .option('--tool <glob>', 'only tools (server__tool) matching this glob (repeatable: any of them)', collect)
    .option('--sandbox <name>', 'only inside this sandbox')
    .option('--caps <list>', `only these capabilities, comma-separated (of ${SESSION_CAPABILITIES.join(', ')})`, caps);
}

/** The token from the argument, or from stdin with `-` (a token on a command line lands in shell history). */
function tokenArgument(value: string): string {
  if (value !== '-') return value.trim();
  try {
    return readFileSync(0, 'utf8').trim();
  } catch (error) {
    throw new CliError(`cannot read the token from stdin: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
}

export function addSessionsCommand(parent: Command): void {
  const sessions = parent
    .command('sessions')
    .description("agent sessions and their caveat tokens (a sandboxed agent's only credential)");

  withApiOptions(
    withNarrowing(
      sessions
        .command('start')
        .description('start an agent session; prints its caveat token, once, on stdout (the session id on stderr)')
        .requiredOption('--workspace <slug>', 'the workspace the session acts in')
        .option('--name <name>', 'what it is for, for people reading the list')
        .option('--agent <agent>', 'which agent runs in it: claude, codex, opencode, goose, …')
        .option('--ttl <seconds>', 'lifetime in seconds (default 8 hours, at most 7 days)', seconds),
    ),
  ).action(
    async (options: ApiOptions & Narrowing & { workspace: string; name?: string; agent?: string; ttl?: number }) => {
      const caveats = {
        ...(options.server ? { servers: options.server } : {}),
        ...(options.tool ? { tools: options.tool } : {}),
        ...(options.sandbox !== undefined ? { sandbox: options.sandbox } : {}),
      };
      const started = await ApiClient.from(options).post<StartedView>(
        `/v1/workspaces/${encodeURIComponent(options.workspace)}/sessions`,
        {
          ...(options.name !== undefined ? { name: options.name } : {}),
          ...(options.agent !== undefined ? { agent: options.agent } : {}),
          ...(options.ttl !== undefined ? { ttl_seconds: options.ttl } : {}),
          ...(options.caps !== undefined ? { caps: options.caps } : {}),
          ...(Object.keys(caveats).length > 0 ? { caveats } : {}),
        },
      );
      if (options.json) return printJson(started);
      // only the token on stdout, so AILERON_TOKEN=$(aileron-cp sessions start …) works
      out(started.caveat_token);
      note(
        `started session ${started.id} (caps ${started.caps.join(',')}, expires ${when(started.expires_at)}); its token is shown only this once`,
      );
    },
  );

  withApiOptions(
    sessions
      .command('list')
      .description("a workspace's agent sessions, newest first")
      .requiredOption('--workspace <slug>', 'the workspace')
      .option('--all', 'also the ended and expired ones'),
  ).action(async (options: ApiOptions & { workspace: string; all?: boolean }) => {
    const list = await ApiClient.from(options).all<SessionView>(
      `/v1/workspaces/${encodeURIComponent(options.workspace)}/sessions${options.all ? '?live=false' : ''}`,
    );
    if (options.json) return printJson({ sessions: list });
    if (list.length === 0) return out('no sessions');
    printTable(
      ['id', 'name', 'agent', 'state', 'caps', 'created by', 'expires', 'created'],
      list.map((s) => [
        s.id,
        s.name,
        s.agent,
        s.state,
        s.caps.join(','),
        s.created_by,
        when(s.expires_at),
        when(s.created_at),
      ]),
    );
  });

  withApiOptions(
    sessions
      .command('end')
      .description('end a session: its tokens are refused at once, everywhere')
      .argument('<id>', 'the session id (see sessions list)'),
  ).action(async (id: string, options: ApiOptions) => {
    const ended = await ApiClient.from(options).delete<SessionView>(`/v1/sessions/${encodeURIComponent(id)}`);
    if (options.json) return printJson(ended);
    out(`ended session ${ended.id}`);
  });

  withApiOptions(
    sessions
      .command('agent-config')
      .description(
        'print the snippet that registers aileron-mcp in a coding agent for this session (the token is never in it: the agent passes AILERON_TOKEN on from its environment)',
      )
      .argument('<id>', 'the session id')
      .option('--agent <agent>', 'claude (the mcpServers JSON of --mcp-config), codex, opencode or goose', 'claude')
      .option(
        '--command <path>',
        'how the agent starts aileron-mcp: a name on its PATH or an absolute path',
        'aileron-mcp',
      ),
  ).action(async (id: string, options: ApiOptions & { agent: string; command: string }) => {
    const query = `agent=${encodeURIComponent(options.agent)}&command=${encodeURIComponent(options.command)}`;
    const config = await ApiClient.from(options).get<{ file: string; content: string; usage: string }>(
      `/v1/sessions/${encodeURIComponent(id)}/agent-config?${query}`,
    );
    if (options.json) return printJson(config);
    // the snippet alone on stdout, so `… > config.toml` works
    process.stdout.write(config.content);
    note(`for ${config.usage}`);
  });

  withNarrowing(
    sessions
      .command('attenuate')
      .description(
        'offline: print a narrower copy of a caveat token (anyone holding a token can; nobody can widen one)',
      )
      .argument('<token>', 'the caveat token (ail_ct_…), or - to read it from stdin')
      .option(
        '--expires-in <seconds>',
        'the new token dies this many seconds from now (the session may end sooner)',
        seconds,
      ),
  ).action((value: string, options: Narrowing & { expiresIn?: number }) => {
    const caveats: Caveat[] = [
      ...(options.server ? [{ kind: 'servers' as const, names: options.server }] : []),
      ...(options.tool ? [{ kind: 'tools' as const, globs: options.tool }] : []),
      ...(options.sandbox !== undefined ? [{ kind: 'sandbox' as const, name: options.sandbox }] : []),
      ...(options.caps ? [{ kind: 'caps' as const, caps: options.caps.filter(isCapability) }] : []),
      ...(options.expiresIn !== undefined
        ? [{ kind: 'expires' as const, at: Math.floor(Date.now() / 1000) + options.expiresIn }]
        : []),
    ];
    if (caveats.length === 0)
      throw new CliError('nothing to narrow: give --server, --tool, --sandbox, --caps or --expires-in');
    let narrowed: string;
    try {
      narrowed = attenuateCaveatToken(tokenArgument(value), caveats);
    } catch (error) {
      if (error instanceof CaveatTokenError) throw codedError(error.code, error.message);
      throw error;
    }
    out(narrowed);
  });
}
