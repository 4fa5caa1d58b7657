import { createHash } from 'node:crypto';
import { resolve } from 'node:path';

/**
 * A stdio MCP server, as the `command` and `args` of a catalog entry, whose one
 * tool `digest` answers the SHA-256 (hex) of one of its environment variables:
 * a test learns which value an instance was started with while the value
 * itself appears in no answer or log. It runs as `node -e`, requiring the SDK
 * by absolute path, because a pool instance's sandbox may read node_modules
 * but not the test tree.
 */
export function envDigestServer(variable: string): { command: string; args: string[] } {
  const sdk = (file: string): string =>
    JSON.stringify(resolve('node_modules/@modelcontextprotocol/sdk/dist/cjs/server', file));
  const source = [
    `const { McpServer } = require(${sdk('mcp.js')});`,
    `const { StdioServerTransport } = require(${sdk('stdio.js')});`,
    `const { createHash } = require('node:crypto');`,
    `const server = new McpServer({ name: 'env-digest', version: '1.0.0' });`,
    `server.registerTool('digest', { description: 'the sha256 of ${variable}' }, async () => ({`,
    `  content: [{ type: 'text', text: createHash('sha256').update(process.env[${JSON.stringify(variable)}] ?? '').digest('hex') }],`,
    `}));`,
    `server.connect(new StdioServerTransport());`,
  ].join('\n');
  return { command: 'node', args: ['-e', source] };
}

/** What `digest` answers for a value. */
export function digestOf(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
