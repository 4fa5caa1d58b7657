import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Principal, WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { BuiltinServers } from '@aileron/pool';
import { type Elicit, restrictionsOf, SandboxTools, type SessionState, type ToolCaller } from './sandbox-tools';
import { SandboxesService } from './sandboxes.service';
import { ShellRulesService } from './shell-rules.service';

/** The name the sandbox tools have on `/mcp/{ws}/sandbox`, and as `sandbox__*` on `/mcp/{ws}`. */
export const SANDBOX_SERVER = 'sandbox';
const VERSION = '1.0.0';
/** an endpoint no session has used for this long is forgotten (its MCP session ends with it) */
const ENDPOINT_IDLE_MS = 24 * 3600_000;

/**
 * The Codex harness tells servers that declare this capability how it wants
 * commands sandboxed; the request is answered once applied, so the next
 * `bash` call is sure to see it (the shell-tool README).
 */
const SandboxStateUpdate = z.object({
  method: z.literal('codex/sandbox-state/update'),
  params: z.object({ sandboxPolicy: z.record(z.string(), z.unknown()).optional() }).passthrough().optional(),
});

interface Endpoint extends ToolCaller {
  lastUsed: number;
  sessions: Map<string, { transport: StreamableHTTPServerTransport; state: SessionState }>;
}

/**
 * The sandbox tools as an MCP server of the control plane's own, on a
 * loopback port only this process knows the secret of. The pool reaches it
 * like any instance (so policy, approvals, caveat tokens and execution
 * records apply), through an endpoint made per MCP session that names the
 * caller: the tools know whose change to commit.
 */
@Injectable()
export class SandboxToolServer implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('SandboxToolServer');
  private readonly secret = randomBytes(32).toString('base64url');
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly tools: SandboxTools;
  private http: HttpServer | undefined;
  private url = '';
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly sandboxes: SandboxesService,
    shellRules: ShellRulesService,
    private readonly builtins: BuiltinServers,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.tools = new SandboxTools(
      sandboxes,
      { defaultMs: config.sandboxes.bashTimeoutMs, maxMs: config.sandboxes.bashMaxTimeoutMs },
      (who, sandbox, command, workdir, signal, elicit) => shellRules.gate(who, sandbox, command, workdir, signal, elicit),
      (who) => restrictionsOf(this.stateOf(who)?.sandboxPolicy ?? null),
    );
  }

  async onModuleInit(): Promise<void> {
    this.http = createServer((req, res) => void this.serve(req, res));
    await new Promise<void>((resolve) => this.http!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.http.address() as AddressInfo).port}`;
    this.sweeper = setInterval(() => this.sweep(), 60_000).unref();
    this.builtins.register({
      name: SANDBOX_SERVER,
      version: VERSION,
      present: (scope) => this.sandboxes.any(scope),
      endpoint: async (scope, caller) => this.endpoint(scope, caller),
    });
  }

  async onModuleDestroy(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    for (const endpoint of this.endpoints.values()) for (const { transport } of endpoint.sessions.values()) await transport.close().catch(() => undefined);
    this.endpoints.clear();
    await new Promise<void>((resolve) => (this.http ? this.http.close(() => resolve()) : resolve()));
  }

  private endpoint(scope: WorkspaceScope, caller: Principal): { url: string; headers: Record<string, string> } {
    const key = randomUUID();
    this.endpoints.set(key, { scope, caller, lastUsed: Date.now(), sessions: new Map() });
    return { url: `${this.url}/mcp/${key}`, headers: { authorization: `Bearer ${this.secret}` } };
  }

  /** The session state of the caller's MCP session (one endpoint serves one upstream session). */
  private stateOf(who: ToolCaller): SessionState | null {
    const endpoint = who as Endpoint;
    return endpoint.sessions?.values().next().value?.state ?? null;
  }

  private sweep(): void {
    const before = Date.now() - ENDPOINT_IDLE_MS;
    for (const [key, endpoint] of this.endpoints) {
      if (endpoint.lastUsed >= before) continue;
      this.endpoints.delete(key);
      for (const { transport } of endpoint.sessions.values()) void transport.close().catch(() => undefined);
    }
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const given = Buffer.from(req.headers.authorization ?? '');
    const expected = Buffer.from(`Bearer ${this.secret}`);
    const key = /^\/mcp\/([0-9a-f-]{36})$/.exec(req.url ?? '')?.[1];
    const endpoint = key ? this.endpoints.get(key) : undefined;
    if (given.length !== expected.length || !timingSafeEqual(given, expected) || !endpoint) {
      res.writeHead(404).end();
      return;
    }
    endpoint.lastUsed = Date.now();
    const sessionId = req.headers['mcp-session-id'];
    const existing = typeof sessionId === 'string' ? endpoint.sessions.get(sessionId) : undefined;
    try {
      if (existing) return await existing.transport.handleRequest(req, res);
      if (req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      await this.open(endpoint).handleRequest(req, res);
    } catch (error) {
      this.logger.error({ msg: 'sandbox tool request failed', err: error instanceof Error ? error.message : String(error) });
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    }
  }

  /** A new MCP session on this endpoint: its own server, so its state is its own. */
  private open(endpoint: Endpoint): StreamableHTTPServerTransport {
    const state: SessionState = { sandboxPolicy: null };
    const server = new Server(
      { name: 'aileron-sandbox', title: 'Aileron sandboxes', version: VERSION },
      {
        capabilities: { tools: {}, experimental: { 'codex/sandbox-state': { version: '1.0.0' } } },
        instructions: 'Tools to read, change and run things in the workspace\'s sandboxes. Every change is kept as a commit on the branch aileron/snapshots; you have no git tool and need none.',
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: this.tools.list() }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      // a question for the person at the client goes on this call's own stream
      const elicit: Elicit | undefined = server.getClientCapabilities()?.elicitation
        ? async (message) => (await server.elicitInput({ message, requestedSchema: { type: 'object', properties: {} } }, { relatedRequestId: extra.requestId, signal: extra.signal })).action
        : undefined;
      return this.tools.call(endpoint, request.params.name, request.params.arguments, extra.signal, elicit);
    });
    server.setRequestHandler(SandboxStateUpdate, async (request) => {
      state.sandboxPolicy = (request.params?.sandboxPolicy as Record<string, unknown> | undefined) ?? null;
      return {};
    });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void endpoint.sessions.set(id, { transport, state }),
      onsessionclosed: (id) => void endpoint.sessions.delete(id),
    });
    transport.onclose = () => {
      if (transport.sessionId) endpoint.sessions.delete(transport.sessionId);
    };
    void server.connect(transport);
    return transport;
  }
}
