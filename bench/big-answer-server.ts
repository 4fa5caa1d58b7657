import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

/**
 * A stdio MCP server whose one tool answers the text a sandbox's 1 MiB file
 * holds (1,024 lines of 1,024 bytes), from memory: what carrying those bytes
 * through the pool costs, without any file or sandbox (the `sandbox` bench's
 * floor for its `read`).
 */
export const BIG_TEXT = `${'0'.repeat(1023)}\n`.repeat(1024);

if (require.main === module) {
  const server = new McpServer({ name: 'bench-big-answer', version: '1.0.0' });
  server.registerTool('big', { description: 'answers 1 MiB of text lines' }, async () => ({
    content: [{ type: 'text', text: BIG_TEXT }],
    structuredContent: { lines: 1024, total_lines: 1024 },
  }));
  void server.connect(new StdioServerTransport());
}
