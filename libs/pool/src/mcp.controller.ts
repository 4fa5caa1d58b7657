import { Controller, Inject, Req, Res } from '@nestjs/common';
import { request as httpRequest, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Caller, describePrincipal, Principal, slug, TenantScope, WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError, ForbiddenError, NotFoundError } from '@aileron/errors';
import { Route } from '@aileron/http';
import { PoolInstances } from './instances.service';
import { PoolRateLimits, RateLimitedError } from './rate-limits.service';
import { McpEndpoint, PoolSessions } from './sessions.service';

const serverName = z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'a server name').describe('a remote server assigned to the workspace');
const oneServer = z.object({ ws: slug, server: serverName });
const wholeWorkspace = z.object({ ws: slug });

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'example', version: '1.0.0' } } };
const SINGLE = {
  tag: 'mcp',
  permission: 'mcp.use',
  tenancy: 'workspace' as const,
  params: oneServer,
  example: { params: { ws: 'default', server: '{server}' }, body: INITIALIZE as unknown },
  bodyValidation: 'handler' as const,
  produces: 'text/event-stream',
  description:
    'MCP Streamable HTTP (protocol 2025-11-25 and earlier). Tools, resources, prompts, completions, logging, progress, cancellation and server-to-client requests pass through; `tools/call` is decided by the workspace policy (deny → tool error naming the rule; approval → waits, then runs the approved call once, or answers with the approval id and review URL). Sessions belong to the caller that opened them.',
};
const AGGREGATE = { ...SINGLE, params: wholeWorkspace, example: { params: { ws: 'default' }, body: INITIALIZE } };
// GET (the client's stream) and DELETE carry no body: the body check would refuse them with 400
const SINGLE_BODYLESS = { ...SINGLE, bodyValidation: undefined, example: { params: SINGLE.example.params } };
const AGGREGATE_BODYLESS = { ...AGGREGATE, bodyValidation: undefined, example: { params: AGGREGATE.example.params } };

@Controller()
export class McpController {
  private readonly allowedOrigins: string[];

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly sessions: PoolSessions,
    private readonly instances: PoolInstances,
    private readonly limits: PoolRateLimits,
  ) {
    // browsers send Origin; anything else on it is another site riding on DNS rebinding
    this.allowedOrigins = [new URL(config.publicUrl).origin, `http://localhost:${config.port}`, `http://127.0.0.1:${config.port}`];
  }

  @Route({ ...SINGLE, method: 'POST', path: '/mcp/:ws/:server', summary: 'MCP to one remote server of the workspace (messages)' })
  postOne(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.serve(scope, caller, { server: (req.params as { server: string }).server }, req, reply);
  }

  @Route({ ...SINGLE_BODYLESS, method: 'GET', path: '/mcp/:ws/:server', summary: 'MCP to one remote server: the stream of server messages' })
  getOne(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.serve(scope, caller, { server: (req.params as { server: string }).server }, req, reply);
  }

  @Route({ ...SINGLE_BODYLESS, method: 'DELETE', path: '/mcp/:ws/:server', summary: 'MCP to one remote server: end the session' })
  deleteOne(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.serve(scope, caller, { server: (req.params as { server: string }).server }, req, reply);
  }

  @Route({ ...AGGREGATE, method: 'POST', path: '/mcp/:ws', summary: "MCP to every remote server of the workspace, names `server__tool`" })
  postAll(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.serve(scope, caller, { aggregate: true }, req, reply);
  }

  @Route({ ...AGGREGATE_BODYLESS, method: 'GET', path: '/mcp/:ws', summary: 'MCP to every remote server: the stream of server messages' })
  getAll(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.serve(scope, caller, { aggregate: true }, req, reply);
  }

  @Route({ ...AGGREGATE_BODYLESS, method: 'DELETE', path: '/mcp/:ws', summary: 'MCP to every remote server: end the session' })
  deleteAll(@TenantScope() scope: WorkspaceScope, @Caller() caller: Principal, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.serve(scope, caller, { aggregate: true }, req, reply);
  }

  /**
   * Everything that can refuse the request with a problem document happens
   * before the transport takes the response over (after hijack Nest's error
   * handling no longer applies).
   */
  private async serve(scope: WorkspaceScope, caller: Principal, endpoint: McpEndpoint, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const origin = req.headers.origin;
    if (typeof origin === 'string' && !this.allowedOrigins.includes(origin)) {
      throw new ForbiddenError(`Origin ${origin} may not use this endpoint`, 'ORIGIN_NOT_ALLOWED');
    }
    try {
      await this.limits.take(scope.workspaceId, describePrincipal(caller), scope.workspaceSlug);
    } catch (error) {
      if (error instanceof RateLimitedError) void reply.header('retry-after', String(error.retryAfterSeconds));
      throw error;
    }
    const sessionId = req.headers['mcp-session-id'];
    let session;
    if (typeof sessionId === 'string') {
      session = this.sessions.find(sessionId, scope, caller, endpoint);
      if (!session) {
        // another replica may serve it (the load balancer sent this request here): hand it over once
        const owner = req.headers[FORWARDED] === undefined ? await this.sessions.ownerOf(sessionId) : undefined;
        if (!owner) throw new NotFoundError('MCP session', sessionId, 'MCP_SESSION_NOT_FOUND');
        reply.hijack();
        forward(owner, req, reply.raw);
        return;
      }
    } else if (req.method === 'POST' && isInitialize(req.body)) {
      // refuse at once, with a problem document, what the session could never reach
      if ('server' in endpoint) await this.instances.assignment(scope, endpoint.server);
      session = this.sessions.create(scope, caller, endpoint, this.allowedOrigins);
    } else {
      throw new McpSessionRequiredError();
    }
    reply.hijack();
    await session.handle(req.raw, reply.raw, req.body);
  }
}

/** Marks a request one replica passed to another, so it is never passed on again. */
const FORWARDED = 'x-aileron-forwarded';

/**
 * Streams the request to the replica that owns the session and its answer
 * (JSON or an SSE stream) back. That replica authenticates it again and checks
 * the session is the caller's; nothing is decided here.
 */
function forward(owner: string, req: FastifyRequest, res: ServerResponse): void {
  const body = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  }
  headers[FORWARDED] = '1';
  if (body) headers['content-length'] = String(body.length);
  const upstream = httpRequest(new URL(req.raw.url ?? '/', owner), { method: req.method, headers }, (answer) => {
    const out: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
    res.writeHead(answer.statusCode ?? 502, out);
    answer.pipe(res);
  });
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/problem+json' });
    res.end(JSON.stringify({ type: 'about:blank', title: 'Bad gateway', status: 502, code: 'MCP_REPLICA_UNREACHABLE', detail: 'The replica serving this MCP session cannot be reached; initialize a new session' }));
  });
  // the client went away (a GET stream closed): stop the other replica's stream too
  res.once('close', () => upstream.destroy());
  upstream.end(body);
}

const HOP_BY_HOP = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade', 'proxy-connection', 'te', 'trailer']);

class McpSessionRequiredError extends DomainError {
  constructor() {
    super('MCP_SESSION_REQUIRED', 400, 'No MCP session', 'Send an initialize request first, then the Mcp-Session-Id header it returned with every request');
  }
}

function isInitialize(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((m) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'initialize');
}
