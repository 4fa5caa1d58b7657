import { Controller, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { BearerCredentials, Caller, Principal, TenantScope, WorkspaceScope } from '@aileron/auth';
import { Route } from '@aileron/http';
import { FORWARDED, McpAdmission } from './mcp-admission';
import {
  MCP_CAPABILITY,
  MCP_ONE_SERVER,
  MCP_PERMISSION,
  MCP_WHOLE_WORKSPACE,
  oneServer,
  wholeWorkspace,
} from './mcp-routes';
import type { McpEndpoint } from './mcp-sessions.service';

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'example', version: '1.0.0' } },
};
const SINGLE = {
  tag: 'mcp',
  permission: MCP_PERMISSION,
  capability: MCP_CAPABILITY,
  tenancy: 'workspace' as const,
  // a local gateway reaches its workspace's remote servers (docs/pool.md)
  gateways: true as const,
  // and so does an MCP client with an OAuth access token for the workspace's endpoint (docs/oauth.md)
  oauth: true as const,
  params: oneServer,
  example: { params: { ws: 'default', server: '{server}' }, body: INITIALIZE as unknown },
  bodyValidation: 'handler' as const,
  produces: 'text/event-stream',
  description:
    'MCP Streamable HTTP (protocol 2025-11-25 and earlier). Tools, resources, prompts, completions, logging, progress, cancellation and server-to-client requests pass through; `tools/call` is decided by the workspace policy (deny → tool error naming the rule; approval → waits, then runs the approved call once, or answers with the approval id and review URL). A session answers only the exact bearer credential that opened it (any other, a narrower caveat token of the same agent session included, gets 404 MCP_SESSION_NOT_FOUND).',
};
const AGGREGATE = { ...SINGLE, params: wholeWorkspace, example: { params: { ws: 'default' }, body: INITIALIZE } };
// GET (the client's stream) and DELETE carry no body: the body check would refuse them with 400
const SINGLE_BODYLESS = { ...SINGLE, bodyValidation: undefined, example: { params: SINGLE.example.params } };
const AGGREGATE_BODYLESS = { ...AGGREGATE, bodyValidation: undefined, example: { params: AGGREGATE.example.params } };

@Controller()
export class McpController {
  constructor(
    private readonly admission: McpAdmission,
    private readonly bearer: BearerCredentials,
  ) {}

  @Route({
    ...SINGLE,
    method: 'POST',
    path: MCP_ONE_SERVER,
    summary: 'MCP to one remote server of the workspace (messages)',
  })
  postOne(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.serve(scope, caller, { server: (req.params as { server: string }).server }, req, reply);
  }

  @Route({
    ...SINGLE_BODYLESS,
    method: 'GET',
    path: MCP_ONE_SERVER,
    summary: 'MCP to one remote server: the stream of server messages',
  })
  getOne(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.serve(scope, caller, { server: (req.params as { server: string }).server }, req, reply);
  }

  @Route({
    ...SINGLE_BODYLESS,
    method: 'DELETE',
    path: MCP_ONE_SERVER,
    summary: 'MCP to one remote server: end the session',
  })
  deleteOne(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.serve(scope, caller, { server: (req.params as { server: string }).server }, req, reply);
  }

  @Route({
    ...AGGREGATE,
    method: 'POST',
    path: MCP_WHOLE_WORKSPACE,
    summary: 'MCP to every remote server of the workspace, names `server__tool`',
  })
  postAll(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.serve(scope, caller, { aggregate: true }, req, reply);
  }

  @Route({
    ...AGGREGATE_BODYLESS,
    method: 'GET',
    path: MCP_WHOLE_WORKSPACE,
    summary: 'MCP to every remote server: the stream of server messages',
  })
  getAll(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.serve(scope, caller, { aggregate: true }, req, reply);
  }

  @Route({
    ...AGGREGATE_BODYLESS,
    method: 'DELETE',
    path: MCP_WHOLE_WORKSPACE,
    summary: 'MCP to every remote server: end the session',
  })
  deleteAll(
    @TenantScope() scope: WorkspaceScope,
    @Caller() caller: Principal,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.serve(scope, caller, { aggregate: true }, req, reply);
  }

  /**
   * A refusal is a problem document, so admission comes before the transport
   * takes the response over (after hijack Nest's error handling no longer
   * applies). Requests on an open session usually never get here: the fast
   * path (mcp-fast-path.ts) serves them in front of the framework.
   */
  private async serve(
    scope: WorkspaceScope,
    caller: Principal,
    endpoint: McpEndpoint,
    req: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> {
    const sessionId = req.headers['mcp-session-id'];
    // a refusal (Retry-After included) is rendered by the problem filter
    const admitted = await this.admission.admit(scope, caller, endpoint, {
      method: req.method,
      origin: typeof req.headers.origin === 'string' ? req.headers.origin : undefined,
      mcpSessionId: typeof sessionId === 'string' ? sessionId : undefined,
      forwarded: req.headers[FORWARDED] !== undefined,
      credential: this.bearer.tokenOf(req.headers.authorization),
      body: req.body,
    });
    reply.hijack();
    if ('owner' in admitted) this.admission.forward(admitted, req.raw, req.body, reply.raw, req.id);
    else await admitted.mcpSession.handle(req.raw, reply.raw, req.body);
  }
}
