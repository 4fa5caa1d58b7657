import type { IncomingMessage, ServerResponse } from 'node:http';
import { request as httpRequest } from 'node:http';
import { pipeline } from 'node:stream';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { describePrincipal, Principal, WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError, ForbiddenError, NotFoundError, UnauthenticatedError } from '@aileron/errors';
import { writeProblem } from '@aileron/http';
import { BuiltinServers } from './builtin-servers';
import { ExecutionJournal } from './execution-journal';
import { PoolInstances } from './pool-instances.service';
import { PoolRateLimits } from './pool-rate-limits.service';
import { McpEndpoint, McpSessions } from './mcp-sessions.service';
import type { McpSession } from './proxy/mcp-session';

/** What an MCP request carries that decides where it goes. */
export interface McpRequestLine {
  method: string;
  origin: string | undefined;
  mcpSessionId: string | undefined;
  /** passed here by another replica: never passed on again */
  forwarded: boolean;
  /**
   * the bearer credential it came with: an MCP session it opens is bound to it
   * (only it reaches the MCP session) and lasts only while it may use the workspace
   */
  credential: string | undefined;
  body: unknown;
}

/** The MCP session that takes the request, or the replica that serves it. */
export type Admitted = { mcpSession: McpSession } | Elsewhere;

/** An MCP session another replica serves, at its address. */
export interface Elsewhere {
  owner: string;
  mcpSessionId: string;
}

/** How long a replica passing a request on waits to reach the MCP session's owner. */
const OWNER_CONNECT_TIMEOUT_MS = 2_000;

/**
 * Everything that can refuse an MCP request, for the routes and the fast
 * path alike: after it the transport owns the response, so a refusal must
 * come first, as a problem document (a DomainError).
 */
@Injectable()
export class McpAdmission {
  readonly allowedOrigins: string[];
  private readonly logger = new Logger('McpAdmission');

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly mcpSessions: McpSessions,
    private readonly instances: PoolInstances,
    private readonly limits: PoolRateLimits,
    private readonly journal: ExecutionJournal,
    private readonly builtins: BuiltinServers,
  ) {
    // browsers send Origin; anything else on it is another site riding on DNS rebinding
    this.allowedOrigins = [
      new URL(config.publicUrl).origin,
      `http://localhost:${config.port}`,
      `http://127.0.0.1:${config.port}`,
    ];
  }

  /** Throws RateLimitedError (its `retryAfterSeconds` belongs in Retry-After) and other DomainErrors. */
  async admit(
    scope: WorkspaceScope,
    caller: Principal,
    endpoint: McpEndpoint,
    request: McpRequestLine,
  ): Promise<Admitted> {
    if (request.origin !== undefined && !this.allowedOrigins.includes(request.origin)) {
      throw new ForbiddenError(`Origin ${request.origin} may not use this endpoint`, 'ORIGIN_NOT_ALLOWED');
    }
    // an agent session's caveat token, before anything is opened or forwarded (the fast path skips the guard)
    if (caller.agentSession && !caller.agentSession.caps.has('actions:list')) {
      throw new ForbiddenError('This session token lacks the "actions:list" capability', 'CAPABILITY_REQUIRED');
    }
    if (caller.agentSession && 'server' in endpoint && !caller.agentSession.allowsServer(endpoint.server)) {
      throw new ForbiddenError(
        `This session token does not reach the server "${endpoint.server}"`,
        'CAPABILITY_REQUIRED',
      );
    }
    // MCP sessions are bound to the credential; the guard and the fast path authenticate only bearer credentials, so this is never expected
    if (request.credential === undefined) throw new UnauthenticatedError('Send "Authorization: Bearer <token>"');
    await this.limits.take(scope.workspaceId, describePrincipal(caller), scope.workspaceSlug);
    if (request.mcpSessionId !== undefined) {
      // another credential (a narrower token of the same agent session among them) gets what an unknown MCP session gets
      const mcpSession = this.mcpSessions.find(request.mcpSessionId, scope, caller, endpoint, request.credential);
      if (mcpSession) return { mcpSession };
      if (!this.mcpSessions.serves(request.mcpSessionId)) {
        // another replica may serve it (the load balancer sent this request here): hand it over once
        const owner = await this.mcpSessions.ownerOf(request.mcpSessionId);
        if (owner && !request.forwarded) return { owner, mcpSessionId: request.mcpSessionId };
      }
      throw new NotFoundError('MCP session', request.mcpSessionId, 'MCP_SESSION_NOT_FOUND');
    }
    if (request.method === 'POST' && isInitialize(request.body)) {
      // refuse at once, with a problem document, what the MCP session could never reach
      if ('server' in endpoint && !this.builtins.has(endpoint.server))
        await this.instances.assignment(scope, endpoint.server);
      return { mcpSession: this.mcpSessions.create(scope, caller, endpoint, this.allowedOrigins, request.credential) };
    }
    throw new McpSessionRequiredError();
  }

  /**
   * Streams the request to the replica that owns the MCP session and its answer
   * (JSON or an SSE stream) back. That replica authenticates it again and
   * checks the session is the caller's; nothing is decided here. An owner that
   * cannot be reached is gone, and its sessions with it: the answer is the
   * protocol's 404 for a session the server no longer has (which tells the
   * client to initialize again), the directory entry goes, and the journal of
   * a dead process on this machine is taken over at once, so its calls still
   * running end as `execution.failed`.
   */
  forward(to: Elsewhere, req: IncomingMessage, body: unknown, res: ServerResponse, requestId: string): void {
    const bytes = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    headers[FORWARDED] = '1';
    if (bytes) headers['content-length'] = String(bytes.length);
    // the owner and the path only: an absolute-form request target must never choose where the caller's credentials go
    const target = new URL(to.owner);
    const asked = new URL(req.url ?? '/', 'http://replica.invalid');
    target.pathname = asked.pathname;
    target.search = asked.search;
    let clientGone = false;
    let upstream: ReturnType<typeof httpRequest> | undefined;
    // the client went away (a GET stream closed): stop the other replica's stream too
    res.once('close', () => {
      clientGone = true;
      upstream?.destroy();
    });
    const send = (mayRetry: boolean): void => {
      const sent = httpRequest(target, { method: req.method, headers }, (answer) => {
        const out: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers))
          if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
        res.writeHead(answer.statusCode ?? 502, out);
        // an owner that dies mid-answer cuts the answer off here too, rather than leaving the client waiting
        pipeline(answer, res, () => undefined);
      });
      upstream = sent;
      // only the connecting is timed: a stream may stay quiet for as long as the session lives
      sent.on('socket', (socket) => {
        if (!socket.connecting) return;
        const giveUp = (): void => void sent.destroy(new Error('the replica did not accept the connection in time'));
        socket.setTimeout(OWNER_CONNECT_TIMEOUT_MS);
        socket.once('timeout', giveUp);
        socket.once('connect', () => {
          socket.setTimeout(0);
          socket.off('timeout', giveUp);
        });
      });
      sent.on('error', (error) => {
        if (clientGone) return;
        if (res.headersSent) {
          res.destroy();
          return;
        }
        // a kept-alive connection the owner closed just as it was reused says nothing about the owner: once more, on a new one
        if (mayRetry && sent.reusedSocket) {
          send(false);
          return;
        }
        // answered once the entry is gone: a client that starts again at once must not be sent to the dead replica
        void this.ownerGone(to, error).finally(() =>
          writeProblem(res, new SessionGoneError(to.mcpSessionId), requestId),
        );
      });
      sent.end(bytes);
    };
    send(true);
  }

  private async ownerGone(to: Elsewhere, error: Error): Promise<void> {
    this.logger.warn({
      msg: 'the replica serving an MCP session cannot be reached; the session is gone',
      owner: to.owner,
      err: error.message,
    });
    await this.mcpSessions.forget(to.mcpSessionId, to.owner);
    // the dead replica's unwritten execution records, after the answer: they need not hold it up
    void this.journal.takeOver();
  }
}

/** Marks a request one replica passed to another, so it is never passed on again. */
export const FORWARDED = 'x-aileron-forwarded';

const HOP_BY_HOP = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
]);

/** The same code as any MCP session this replica does not know: to the client, it does not exist any more. */
class SessionGoneError extends DomainError {
  constructor(id: string) {
    super(
      'MCP_SESSION_NOT_FOUND',
      `MCP session "${id}" does not exist any more: the replica that served it cannot be reached. Initialize a new session.`,
    );
  }
}

class McpSessionRequiredError extends DomainError {
  constructor() {
    super(
      'MCP_SESSION_REQUIRED',
      'Send an initialize request first, then the Mcp-Session-Id header it returned with every request',
    );
  }
}

function isInitialize(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some(
    (m) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'initialize',
  );
}
