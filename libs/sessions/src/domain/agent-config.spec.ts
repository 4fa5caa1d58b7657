import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { AgentConfigInput, AGENTS, renderAgentConfig } from './agent-config';

const input: AgentConfigInput = {
  url: 'https://aileron.example.com',
  sessionId: '5f0c3c2e-8d6a-4a47-9f0e-2b6f1f3d9a10',
  workspace: 'payments',
  command: 'aileron-mcp',
};
const env = { AILERON_URL: input.url, AILERON_SESSION_ID: input.sessionId, AILERON_WORKSPACE: input.workspace };

/**
 * Reads the subset of TOML the Codex snippet uses (comments, `[table]`
 * headers, `key = value` with string, number and string-array values, which
 * TOML spells as JSON does); anything else in the snippet fails the test.
 */
function parseTomlSubset(text: string): Record<string, Record<string, unknown>> {
  const tables: Record<string, Record<string, unknown>> = { '': {} };
  let table = '';
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const header = /^\[([A-Za-z0-9_.-]+)\]$/.exec(line);
    if (header) {
      table = header[1]!;
      expect(tables[table], `table ${table} twice`).toBeUndefined();
      tables[table] = {};
      continue;
    }
    const pair = /^([A-Za-z0-9_-]+) = (.+)$/.exec(line);
    if (!pair) throw new Error(`not TOML this test reads: ${line}`);
    expect(tables[table]![pair[1]!], `key ${pair[1]} twice`).toBeUndefined();
    tables[table]![pair[1]!] = JSON.parse(pair[2]!);
  }
  return tables;
}

describe('agent-config snippets', () => {
  it('Claude: the mcpServers JSON of --mcp-config, the token expanded from the environment', () => {
    const config = renderAgentConfig('claude', input);
    expect(config).toMatchObject({ agent: 'claude', format: 'json', file: 'aileron.mcp.json' });
    expect(JSON.parse(config.content)).toEqual({
      mcpServers: { aileron: { command: 'aileron-mcp', args: [], env: { ...env, AILERON_TOKEN: '${AILERON_TOKEN}' } } },
    });
  });

  it('Codex: config.toml with the file credential store first and [mcp_servers.aileron] passing the token through', () => {
    const config = renderAgentConfig('codex', input);
    expect(config).toMatchObject({ agent: 'codex', format: 'toml', file: 'config.toml' });
    const toml = parseTomlSubset(config.content);
    // a top-level key after a [table] header would belong to the table: it must come before any
    expect(toml['']).toEqual({ cli_auth_credentials_store: 'file' });
    expect(toml['mcp_servers.aileron']).toEqual({
      command: 'aileron-mcp',
      args: [],
      env_vars: ['AILERON_TOKEN'],
      tool_timeout_sec: 300,
    });
    expect(toml['mcp_servers.aileron.env']).toEqual(env);
  });

  it('OpenCode: opencode.json with a local server and {env:} for the token', () => {
    const config = renderAgentConfig('opencode', input);
    expect(config).toMatchObject({ agent: 'opencode', format: 'json', file: 'opencode.json' });
    expect(JSON.parse(config.content)).toEqual({
      $schema: 'https://opencode.ai/config.json',
      mcp: {
        aileron: {
          type: 'local',
          command: ['aileron-mcp'],
          enabled: true,
          environment: { ...env, AILERON_TOKEN: '{env:AILERON_TOKEN}' },
        },
      },
    });
  });

  it('Goose: a stdio extension whose token comes from env_keys', () => {
    const config = renderAgentConfig('goose', { ...input, command: '/opt/aileron/aileron-mcp' });
    expect(config).toMatchObject({ agent: 'goose', format: 'yaml', file: 'config.yaml' });
    expect(parseYaml(config.content)).toEqual({
      extensions: {
        aileron: {
          name: 'aileron',
          type: 'stdio',
          cmd: '/opt/aileron/aileron-mcp',
          args: [],
          enabled: true,
          timeout: 300,
          envs: env,
          env_keys: ['AILERON_TOKEN'],
          description: expect.any(String),
        },
      },
    });
  });

  it('never writes a token, and reads back what it was given even where a value needs escaping', () => {
    const odd = { ...input, url: 'https://cp.example.com/a"b\\c', command: '/opt/a b/aileron-mcp' };
    for (const agent of AGENTS) {
      const { content } = renderAgentConfig(agent, odd);
      expect(content, agent).not.toMatch(/ail_ct_/);
      const read =
        agent === 'codex'
          ? parseTomlSubset(content)['mcp_servers.aileron.env']!.AILERON_URL
          : agent === 'goose'
            ? parseYaml(content).extensions.aileron.envs.AILERON_URL
            : agent === 'claude'
              ? JSON.parse(content).mcpServers.aileron.env.AILERON_URL
              : JSON.parse(content).mcp.aileron.environment.AILERON_URL;
      expect(read, agent).toBe(odd.url);
    }
  });
});
