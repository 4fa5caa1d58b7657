import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Injectable, Logger, Optional } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import parseJson from 'secure-json-parse';
import { AccessService, BearerCredentials, Principal } from '@aileron/auth';
import { DomainError, PROBLEM_CONTENT_TYPE } from '@aileron/errors';
import { BODY_LIMIT_BYTES, FastPaths, HttpMetrics, logProblem, requestIdFor, retryAfterOf, toProblem } from '@aileron/http';
import { forward, FORWARDED, McpAdmission } from './mcp-admission';
import { MCP_PERMISSION, oneServer, wholeWorkspace } from './mcp-routes';
import type { McpEndpoint } from './sessions.service';
import { PoolSessions } from './sessions.service';

const PATH = /^\/mcp\/([^/?#]+)(?:\/([^/?#]+))?$/;
const ROUTE_ONE = '/mcp/:ws/:server';
const ROUTE_ALL = '/mcp/:ws';
const JSON_TYPE = /^application\/json\s*(;|$)/i;

/**
 * Messages on an open MCP session, in front of the framework. Each tools/call
 * of an agent is one such request; Fastify's routing, hooks and middleware and
 * Nest's guard, interceptors and request logger cost more than the proxying
 * itself (about a third of the control plane's time under load). This serves
 * the same contract with the same services: the bearer credential (API token
 * or a registered kind), workspace access, Origin, rate limits and the
 * session's owner, then the session's transport; refusals are the routes'
 * problem documents, and requests are counted and logged as the routes'.
 *
 * It takes a request only when the request line and headers say it can
 * (POST, a JSON body, a session this replica serves, a credential checked
 * without passport); anything else (initialize, the GET stream, DELETE, JWTs,
 * unknown sessions, other media types) goes to the routes unread.
 */
@Injectable()
export class McpFastPath {
  private readonly logger = new Logger('McpFastPath');

  constructor(
    fastPaths: FastPaths,
    private readonly sessions: PoolSessions,
    private readonly bearer: BearerCredentials,
    private readonly access: AccessService,
    private readonly admission: McpAdmission,
    private readonly metrics: HttpMetrics,
    // absent where the app runs without the request logger (the CLI's commands): no request lines then
    @Optional() private readonly requestLog?: PinoLogger,
  ) {
    fastPaths.add((request, response) => this.take(request, response));
  }

  private take(request: IncomingMessage, response: ServerResponse): boolean {
    if (request.method !== 'POST') return false;
    const url = request.url;
    if (url === undefined || !url.startsWith('/mcp/')) return false;
    const path = PATH.exec(url);
    if (!path) return false;
    // the routes' own checks of the names; what they would refuse is left to them
    const ws = wholeWorkspace.safeParse({ ws: path[1] });
    const server = path[2] === undefined ? undefined : oneServer.safeParse({ ws: path[1], server: path[2] });
    if (!ws.success || (server && !server.success)) return false;
    const headers = request.headers;
    const sessionId = headers['mcp-session-id'];
    if (typeof sessionId !== 'string' || !this.sessions.serves(sessionId)) return false;
    if (!JSON_TYPE.test(headers['content-type'] ?? '')) return false;
    const token = this.bearer.tokenOf(headers.authorization);
    const caller = token === undefined ? undefined : this.bearer.resolve(token);
    if (!caller) return false;
    const endpoint: McpEndpoint = server?.data ? { server: server.data.server } : { aggregate: true };
    void this.serve(request, response, { ws: ws.data.ws, endpoint, sessionId, caller });
    return true;
  }

  private async serve(
    request: IncomingMessage,
    response: ServerResponse,
    target: { ws: string; endpoint: McpEndpoint; sessionId: string; caller: Promise<Principal> },
  ): Promise<void> {
    const started = performance.now();
    const requestId = requestIdFor(request.headers['x-request-id']);
    response.setHeader('x-request-id', requestId);
    response.once('finish', () => this.answered(request, response, 'server' in target.endpoint ? ROUTE_ONE : ROUTE_ALL, requestId, started));
    // heard at once: a credential that fails while the body is read must not reject unhandled
    const caller = target.caller.then(
      (principal) => ({ principal }),
      (error: unknown) => ({ error }),
    );
    try {
      // the routes' order: the body is parsed before the caller is checked
      const body = await readJson(request);
      const checked = await caller;
      if ('error' in checked) throw checked.error;
      const scope = await this.access.workspace(checked.principal, target.ws, MCP_PERMISSION);
      const admitted = await this.admission.admit(scope, checked.principal, target.endpoint, {
        method: 'POST',
        origin: typeof request.headers.origin === 'string' ? request.headers.origin : undefined,
        sessionId: target.sessionId,
        forwarded: request.headers[FORWARDED] !== undefined,
        body,
      });
      if ('owner' in admitted) forward(admitted.owner, request, body, response);
      else await admitted.session.handle(request, response, body);
    } catch (error) {
      this.refuse(response, error, requestId);
    }
  }

  private refuse(response: ServerResponse, error: unknown, requestId: string): void {
    const answer = toProblem(error, requestId);
    const { problem } = answer;
    logProblem(this.logger, answer, error, requestId);
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const retryAfter = retryAfterOf(problem);
    if (retryAfter !== undefined) response.setHeader('retry-after', retryAfter);
    if (error instanceof BodyError && error.status === 413) response.setHeader('connection', 'close');
    response.writeHead(problem.status, { 'content-type': PROBLEM_CONTENT_TYPE }).end(JSON.stringify(problem));
  }

  /** Counted and logged as the routes' request logger does: quiet below 400, unless debugging. */
  private answered(request: IncomingMessage, response: ServerResponse, route: string, requestId: string, started: number): void {
    const status = response.statusCode;
    this.metrics.observe('POST', route, status, (performance.now() - started) / 1000);
    const level = status >= 500 ? 'error' : status >= 400 ? 'info' : 'debug';
    const log = this.requestLog?.logger;
    if (!log?.isLevelEnabled(level)) return;
    log[level]({ req: { id: requestId, method: 'POST', path: request.url }, res: { status }, responseTime: Math.round(performance.now() - started) }, 'request completed');
  }
}

class BodyError extends DomainError {}

/** The body as the routes' parser gives it: JSON, at most 1 MiB, no prototype keys. */
function readJson(request: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers['content-length'] ?? 0);
    if (declared > BODY_LIMIT_BYTES) {
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > BODY_LIMIT_BYTES) {
        request.off('data', onData);
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    request.on('data', onData);
    request.once('error', reject);
    request.once('end', () => {
      const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') {
        reject(new BodyError('MALFORMED_JSON', 'The request body is empty; send a JSON-RPC message'));
        return;
      }
      try {
        resolve(parseJson(text, null, { protoAction: 'error', constructorAction: 'error' }));
      } catch (error) {
        const forbidden = error instanceof SyntaxError && /forbidden/.test(error.message);
        reject(forbidden ? new BodyError('BAD_REQUEST', error.message) : new BodyError('MALFORMED_JSON', 'The request body is not valid JSON'));
      }
    });
  });
}

function tooLarge(): BodyError {
  return new BodyError('PAYLOAD_TOO_LARGE', `The request body exceeds ${BODY_LIMIT_BYTES} bytes`);
}
