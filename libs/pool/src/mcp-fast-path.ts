import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable } from '@nestjs/common';
import { AccessService, BearerCredentials, Principal } from '@aileron/auth';
import { AuthChallenges, FastPaths, readJsonBody, RequestLog, requestIdFor, writeProblem } from '@aileron/http';
import { FORWARDED, McpAdmission } from './mcp-admission';
import { MCP_ONE_SERVER, MCP_PATH, MCP_PERMISSION, MCP_WHOLE_WORKSPACE, oneServer, wholeWorkspace } from './mcp-routes';
import type { McpEndpoint } from './mcp-sessions.service';
import { McpSessions } from './mcp-sessions.service';

const JSON_TYPE = /^application\/json\s*(;|$)/i;
/** paths whose names were checked, kept at most (cleared when full: a stranger's made-up paths cannot grow it) */
const CHECKED_PATHS = 10_000;

/**
 * Messages on an open MCP session, in front of the framework. Each tools/call
 * of an agent is one such request; Fastify's routing, hooks and middleware and
 * Nest's guard, interceptors and request logger cost more than the proxying
 * itself (about a third of the control plane's time under load). This serves
 * the same contract with the same services: the bearer credential (API token
 * or a registered kind), workspace access, Origin, rate limits and the
 * session's owner, then the session's transport. The body is read, refusals
 * rendered and requests logged and counted by the same code the routes use
 * (readJsonBody, writeProblem, RequestLog in @aileron/http).
 *
 * It takes a request only when the request line and headers say it can
 * (POST, a JSON body, a session this replica serves, a credential checked
 * without passport); anything else (initialize, the GET stream, DELETE, JWTs,
 * unknown sessions, other media types) goes to the routes unread.
 */
@Injectable()
export class McpFastPath {
  private readonly checkedPaths = new Map<string, { ws: string; endpoint: McpEndpoint } | null>();

  constructor(
    fastPaths: FastPaths,
    private readonly mcpSessions: McpSessions,
    private readonly bearer: BearerCredentials,
    private readonly access: AccessService,
    private readonly admission: McpAdmission,
    private readonly requests: RequestLog,
    private readonly challenges: AuthChallenges,
  ) {
    fastPaths.add((request, response) => this.take(request, response));
  }

  private take(request: IncomingMessage, response: ServerResponse): boolean {
    if (request.method !== 'POST') return false;
    const url = request.url;
    if (url === undefined || !url.startsWith('/mcp/')) return false;
    const path = MCP_PATH.exec(url);
    if (!path) return false;
    const names = this.namesOf(path[1]!, path[2]);
    if (!names) return false;
    const headers = request.headers;
    const sessionId = headers['mcp-session-id'];
    if (typeof sessionId !== 'string' || !this.mcpSessions.serves(sessionId)) return false;
    if (!JSON_TYPE.test(headers['content-type'] ?? '')) return false;
    const token = this.bearer.tokenOf(headers.authorization);
    if (token === undefined) return false;
    const caller = this.bearer.resolve(token);
    if (!caller) return false;
    void this.serve(request, response, { ...names, sessionId, credential: token, caller });
    return true;
  }

  /**
   * The routes' own checks of the names in the path; what they would refuse
   * is left to them. An agent's session asks about the same path on every
   * call, so the answers are kept (a few paths per workspace in use).
   */
  private namesOf(ws: string, server: string | undefined): { ws: string; endpoint: McpEndpoint } | undefined {
    const key = server === undefined ? ws : `${ws}/${server}`;
    let names = this.checkedPaths.get(key);
    if (names === undefined) {
      if (server === undefined) {
        const parsed = wholeWorkspace.safeParse({ ws });
        names = parsed.success ? { ws: parsed.data.ws, endpoint: { aggregate: true } } : null;
      } else {
        const parsed = oneServer.safeParse({ ws, server });
        names = parsed.success ? { ws: parsed.data.ws, endpoint: { server: parsed.data.server } } : null;
      }
      if (this.checkedPaths.size >= CHECKED_PATHS) this.checkedPaths.clear();
      this.checkedPaths.set(key, names);
    }
    return names ?? undefined;
  }

  private async serve(
    request: IncomingMessage,
    response: ServerResponse,
    target: { ws: string; endpoint: McpEndpoint; sessionId: string; credential: string; caller: Promise<Principal> },
  ): Promise<void> {
    const requestId = requestIdFor(request.headers['x-request-id']);
    this.requests.follow(
      request,
      response,
      'server' in target.endpoint ? MCP_ONE_SERVER : MCP_WHOLE_WORKSPACE,
      requestId,
    );
    // heard at once: a credential that fails while the body is read must not reject unhandled
    const caller = target.caller.then(
      (principal) => ({ principal }),
      (error: unknown) => ({ error }),
    );
    try {
      // the routes' order: the body is parsed before the caller is checked
      const body = await readJsonBody(request, request.headers);
      const checked = await caller;
      if ('error' in checked) throw checked.error;
      const scope = await this.access.workspace(checked.principal, target.ws, MCP_PERMISSION);
      const admitted = await this.admission.admit(scope, checked.principal, target.endpoint, {
        method: 'POST',
        origin: typeof request.headers.origin === 'string' ? request.headers.origin : undefined,
        mcpSessionId: target.sessionId,
        forwarded: request.headers[FORWARDED] !== undefined,
        // the session is bound to the credential that opened it, here as on the routes
        credential: target.credential,
        body,
      });
      if ('owner' in admitted) this.admission.forward(admitted, request, body, response, requestId);
      else await admitted.mcpSession.handle(request, response, body);
    } catch (error) {
      writeProblem(response, error, requestId, this.challenges.for(request.url ?? '', true));
    }
  }
}
