import { z } from 'zod';
import { AGENTS } from './domain/agent-config';

export const agentConfigQuery = z
  .object({
    agent: z
      .enum(AGENTS, { message: `must be one of ${AGENTS.join(', ')}` })
      .default('claude')
      .describe(
        'claude: the `mcpServers` JSON of `claude --mcp-config` (Pi and most agents read it too); codex: config.toml; opencode: opencode.json; goose: config.yaml',
      ),
    command: z
      .string()
      .max(256)
      .regex(
        /^(?:\/[A-Za-z0-9._-]+)+$|^[A-Za-z0-9._-]+$/,
        'must be a program name on PATH or an absolute path (letters, digits, ".", "_", "-")',
      )
      .default('aileron-mcp')
      .describe('how the agent starts aileron-mcp: a name on its PATH or the absolute path the bundle is mounted at'),
  })
  .strict();

export const agentConfigView = z.object({
  agent: z.enum(AGENTS),
  format: z.enum(['json', 'toml', 'yaml']),
  file: z.string().describe('the file the agent reads it from'),
  content: z
    .string()
    .describe(
      "the snippet: AILERON_URL, AILERON_SESSION_ID and AILERON_WORKSPACE written in, AILERON_TOKEN passed on from the agent's environment (never written)",
    ),
  usage: z.string(),
});
