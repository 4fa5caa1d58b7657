import { stringify as yaml } from 'yaml';

/**
 * The snippet each coding agent reads to start `aileron-mcp` as a stdio MCP
 * server. The URL, session and workspace are written in; the caveat token is
 * not: the control plane never keeps it, so each snippet has the agent pass
 * AILERON_TOKEN on from its own environment, where the launcher that started
 * the session put it. Each agent spells that pass-through its own way.
 */
export const AGENTS = ['claude', 'codex', 'opencode', 'goose'] as const;
export type Agent = (typeof AGENTS)[number];

/** The MCP server's name in every agent's config, and so the prefix agents give its tools. */
export const SERVER_NAME = 'aileron';
export const TOKEN_VARIABLE = 'AILERON_TOKEN';
/** Long enough for a call that waits for approval and an approval_status that waits 120 s. */
export const TOOL_TIMEOUT_SECONDS = 300;

export interface AgentConfigInput {
  /** the control plane's public URL, without a trailing slash */
  url: string;
  sessionId: string;
  workspace: string;
  /** how the agent finds aileron-mcp: a name on PATH or an absolute path */
  command: string;
}

export interface AgentConfig {
  agent: Agent;
  format: 'json' | 'toml' | 'yaml';
  /** where the agent reads it */
  file: string;
  content: string;
  /** how to use it, in one line */
  usage: string;
}

/** What aileron-mcp is told, the token aside. */
export function fixedEnv(input: AgentConfigInput): Record<string, string> {
  return { AILERON_URL: input.url, AILERON_SESSION_ID: input.sessionId, AILERON_WORKSPACE: input.workspace };
}

/** A TOML basic string: JSON's escapes are TOML's for everything JSON.stringify emits. */
function tomlString(value: string): string {
  return JSON.stringify(value);
}

function claude(input: AgentConfigInput): AgentConfig {
  // Claude Code expands ${VAR} in the command, args and env of an MCP config file
  const config = {
    mcpServers: {
      [SERVER_NAME]: {
        command: input.command,
        args: [],
        env: { ...fixedEnv(input), [TOKEN_VARIABLE]: `\${${TOKEN_VARIABLE}}` },
      },
    },
  };
  return {
    agent: 'claude',
    format: 'json',
    file: 'aileron.mcp.json',
    content: `${JSON.stringify(config, null, 2)}\n`,
    usage: `claude --mcp-config aileron.mcp.json (Pi the same), with ${TOKEN_VARIABLE} in the agent's environment`,
  };
}

function codex(input: AgentConfigInput): AgentConfig {
  const lines = [
    '# Aileron: aileron-mcp for this agent session',
    // the CLI's own credentials in a file, not the OS keyring a container does not have
    'cli_auth_credentials_store = "file"',
    '',
    `[mcp_servers.${SERVER_NAME}]`,
    `command = ${tomlString(input.command)}`,
    'args = []',
    // env_vars passes these on from Codex's own environment: the token stays out of the file
    `env_vars = [${tomlString(TOKEN_VARIABLE)}]`,
    `tool_timeout_sec = ${TOOL_TIMEOUT_SECONDS}`,
    '',
    `[mcp_servers.${SERVER_NAME}.env]`,
    ...Object.entries(fixedEnv(input)).map(([name, value]) => `${name} = ${tomlString(value)}`),
  ];
  return {
    agent: 'codex',
    format: 'toml',
    file: 'config.toml',
    content: `${lines.join('\n')}\n`,
    usage: `$CODEX_HOME/config.toml (default ~/.codex/config.toml), with ${TOKEN_VARIABLE} in the agent's environment`,
  };
}

function opencode(input: AgentConfigInput): AgentConfig {
  // OpenCode substitutes {env:VAR} in its config strings
  const config = {
    $schema: 'https://opencode.ai/config.json',
    mcp: {
      [SERVER_NAME]: {
        type: 'local',
        command: [input.command],
        enabled: true,
        environment: { ...fixedEnv(input), [TOKEN_VARIABLE]: `{env:${TOKEN_VARIABLE}}` },
      },
    },
  };
  return {
    agent: 'opencode',
    format: 'json',
    file: 'opencode.json',
    content: `${JSON.stringify(config, null, 2)}\n`,
    usage: `opencode.json in the project, or ~/.config/opencode/opencode.json, with ${TOKEN_VARIABLE} in the agent's environment`,
  };
}

function goose(input: AgentConfigInput): AgentConfig {
  // env_keys are looked up in Goose's environment (then its secret store), so the token is not written down
  const config = {
    extensions: {
      [SERVER_NAME]: {
        name: SERVER_NAME,
        type: 'stdio',
        cmd: input.command,
        args: [],
        enabled: true,
        timeout: TOOL_TIMEOUT_SECONDS,
        envs: fixedEnv(input),
        env_keys: [TOKEN_VARIABLE],
        description: "The workspace's tools through Aileron, approvals and messages to the session's people",
      },
    },
  };
  return {
    agent: 'goose',
    format: 'yaml',
    file: 'config.yaml',
    content: yaml(config),
    usage: `the extensions section of ~/.config/goose/config.yaml, with ${TOKEN_VARIABLE} in the agent's environment`,
  };
}

const RENDERERS: Record<Agent, (input: AgentConfigInput) => AgentConfig> = { claude, codex, opencode, goose };

export function renderAgentConfig(agent: Agent, input: AgentConfigInput): AgentConfig {
  return RENDERERS[agent](input);
}
