import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/**
 * A real MCP server over Streamable HTTP, run elsewhere (a catalog entry with
 * a `url`): it demands a bearer key, records the headers it was sent, and its
 * tool description can be changed to play a server that rug-pulls.
 */
export class HttpUpstream {
  description = 'Greets someone';
  /** set: every request after initialize is answered with this status and body, as a broken server or a proxy before it would */
  failWith: { status: number; body: string } | undefined;
  readonly seenAuthorization: string[] = [];
  readonly seenHeaders: IncomingMessage['headers'][] = [];
  private server: Server | undefined;
  /** calls of the `wait` tool in progress: each answers when the test calls `release()` */
  private readonly waiting: (() => void)[] = [];
  private readonly transports = new Map<string, StreamableHTTPServerTransport>();
  url = '';

  constructor(private readonly apiKey: string) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/mcp`;
    return this.url;
  }

  get waitingCalls(): number {
    return this.waiting.length;
  }

  release(): void {
    for (const answer of this.waiting.splice(0)) answer();
  }

  async stop(): Promise<void> {
    this.release();
    for (const transport of this.transports.values()) await transport.close().catch(() => undefined);
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async handle(req: IncomingMessage, res: import('node:http').ServerResponse): Promise<void> {
    this.seenHeaders.push(req.headers);
    this.seenAuthorization.push(String(req.headers.authorization ?? ''));
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"bad key"}');
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown) : undefined;
    const sessionId = req.headers['mcp-session-id'];
    if (this.failWith && typeof sessionId === 'string' && req.method === 'POST') {
      res.writeHead(this.failWith.status, { 'content-type': 'text/plain' }).end(this.failWith.body);
      return;
    }
    let transport = typeof sessionId === 'string' ? this.transports.get(sessionId) : undefined;
    if (!transport) {
      if (typeof sessionId === 'string') {
        res.writeHead(404).end();
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void this.transports.set(id, transport!),
      });
      const mcp = new McpServer({ name: 'http-upstream', version: '1.0.0' });
      mcp.registerTool(
        'greet',
        { description: this.description, inputSchema: { name: z.string() } },
        async ({ name }) => ({ content: [{ type: 'text', text: `Hello, ${name}` }] }),
      );
      mcp.registerTool('wait', { description: 'Answers when the test lets it' }, async () => {
        await new Promise<void>((answer) => this.waiting.push(answer));
        return { content: [{ type: 'text', text: 'released' }] };
      });
      await mcp.connect(transport);
    }
    await transport.handleRequest(req, res, body);
  }
}
