import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { Injectable } from '@nestjs/common';
import { DomainError } from '@aileron/errors';
import { writeProblem } from './problem.filter';

/**
 * Takes the request and returns true, or returns false to let the app handle
 * it. It sees the raw Node request and decides at once, from the request line
 * and headers, without reading the body; once it has said true it owns the
 * response and must answer (at once from memory, or later) with the app's
 * contract, its refusals included.
 */
export type FastPath = (request: IncomingMessage, response: ServerResponse) => boolean;

/**
 * Requests so frequent and so cheap to answer that any framework around them
 * would cost more than the answer: a gateway polling catalog and policy gets
 * 304 almost every time. Domains register handlers here; the entry point puts
 * them in front of Fastify (see `fastPathServer`).
 */
@Injectable()
export class FastPaths {
  readonly handlers: FastPath[] = [];

  add(handler: FastPath): void {
    this.handlers.push(handler);
  }
}

/**
 * A Fastify `serverFactory` whose HTTP server offers every request to the fast
 * paths first. It is made before the app exists (Fastify needs the server at
 * construction), and bound to the app's FastPaths once the app is created.
 */
export function fastPathServer(options: { keepAliveTimeoutMs: number }): {
  serverFactory: (handler: (req: IncomingMessage, res: ServerResponse) => void) => Server;
  bind(paths: FastPaths): void;
} {
  let handlers: readonly FastPath[] = [];
  return {
    serverFactory: (handler) => {
      const server = createServer((req, res) => {
        if (!isOriginForm(req.url)) return writeProblem(res, new RequestTargetError());
        for (const fast of handlers) if (fast(req, res)) return;
        handler(req, res);
      });
      server.keepAliveTimeout = options.keepAliveTimeoutMs;
      return server;
    },
    bind: (paths) => void (handlers = paths.handlers),
  };
}

/**
 * Only origin-form request targets (`/path?query`). Node accepts the
 * absolute form (`POST http://169.254.169.254/mcp/ws/x`), and a URL resolved
 * against it lets the caller choose the host: a replica forwarding an MCP
 * request would have sent it, the caller's token included, wherever it said.
 * Nothing we serve is a proxy, so the other forms are refused before routing.
 */
export function isOriginForm(target: string | undefined): boolean {
  return target !== undefined && target.startsWith('/') && !target.startsWith('//');
}

class RequestTargetError extends DomainError {
  // nothing about this connection's requests is to be trusted
  readonly closesConnection = true;

  constructor() {
    super(
      'REQUEST_TARGET_INVALID',
      'The request target must be a path (origin-form, e.g. /v1/me); absolute URLs and authority forms are not served',
    );
  }
}
