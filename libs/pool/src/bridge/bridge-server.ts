/**
 * The bridge's parts: a Streamable HTTP MCP front for a stdio MCP server, one
 * child process per MCP session. It forwards raw JSON-RPC both ways without
 * interpreting it, so whatever the server speaks reaches the proxy unchanged.
 * The program around it (arguments, secrets, signals) is `apps/mcp-bridge`;
 * it runs inside the local sandbox and as the entrypoint of the Kubernetes
 * runner image, so this needs nothing but node, the MCP SDK and its sibling
 * `node-streamable-http-transport`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import {
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { DIRECT_ANSWERS, NodeStreamableHttpTransport } from '../node-streamable-http-transport';
import { RelatedRequests } from './related-requests';
import { allExited, kill, launchOf, type ServerCommand } from './server-process';

const MAX_BODY_BYTES = 4 * 1024 * 1024;

interface Session {
  front: NodeStreamableHttpTransport;
  child: ChildProcess;
  /** which client request each of the server's messages belongs to */
  related: RelatedRequests;
  closed: boolean;
  /** the client's GET streams open now: without one the transport drops messages tied to no request */
  streams: number;
  /** such messages, held until a stream opens (a server's list_changed right after initialized) */
  waiting: JSONRPCMessage[];
}

const MAX_WAITING = 200;

function jsonError(res: ServerResponse, status: number, code: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new RangeError('request body too large');
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/** the stdio MCP server, started once per MCP session, with its whole environment */
export interface BridgeServerOptions extends ServerCommand {
  /** the bearer secret every request must present */
  token: string;
  /** one line per event worth a note (stderr in the program) */
  log: (line: string) => void;
}

export interface BridgeServer {
  /** not yet listening: the caller chooses where */
  readonly server: Server;
  /**
   * Stops taking requests, ends every session and its server process (SIGTERM,
   * SIGKILL after a grace period); resolves once they are gone, or after the
   * grace period and a little more whatever remains.
   */
  close(): Promise<void>;
}

export function createBridgeServer(options: BridgeServerOptions): BridgeServer {
  const { log } = options;
  // Comparing digests keeps the comparison timing-safe whatever the presented length.
  const expected = createHash('sha256').update(`Bearer ${options.token}`).digest();
  const authorized = (req: IncomingMessage) =>
    timingSafeEqual(
      createHash('sha256')
        .update(req.headers.authorization ?? '')
        .digest(),
      expected,
    );

  const sessions = new Map<string, Session>();
  const stopped = new AbortController();
  const launch = launchOf(options, log, stopped.signal);

  function closeSession(session: Session): void {
    if (session.closed) return;
    session.closed = true;
    if (session.front.sessionId) sessions.delete(session.front.sessionId);
    kill(session.child);
    void session.front.close();
  }

  function childExited(session: Session, why: string): void {
    if (session.closed) return;
    log(`MCP server process ${session.child.pid ?? '?'} exited (${why})`);
    const message = `the MCP server process exited (${why})`;
    // Answer what is still waiting at once instead of letting the client time out.
    for (const id of session.related.inFlight) {
      session.front.send({ jsonrpc: '2.0', id, error: { code: -32603, message } }).catch(() => {});
    }
    closeSession(session);
  }

  function toFront(session: Session, message: JSONRPCMessage): void {
    const relatedRequestId = session.related.received(message);
    const unrelated =
      relatedRequestId === undefined && !isJSONRPCResultResponse(message) && !isJSONRPCErrorResponse(message);
    if (unrelated && session.streams === 0) {
      session.waiting.push(message);
      if (session.waiting.length > MAX_WAITING) session.waiting.shift();
      return;
    }
    session.front
      .send(message, relatedRequestId === undefined ? undefined : { relatedRequestId })
      .catch((error: Error) => log(`dropped a message: ${error.message}`));
  }

  function fromFront(session: Session, message: JSONRPCMessage): void {
    session.related.sent(message);
    if (session.child.stdin?.writable) session.child.stdin.write(serializeMessage(message));
  }

  async function openSession(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const { command, args } = await launch;
    const child = spawn(command, args, { env: options.env, stdio: ['pipe', 'pipe', 'inherit'] });
    const spawned = await new Promise<Error | undefined>((resolve) => {
      child.once('spawn', () => resolve(undefined));
      child.once('error', resolve);
    });
    if (spawned) {
      log(`could not start the MCP server: ${(spawned as NodeJS.ErrnoException).code ?? spawned.message}`);
      return jsonError(
        res,
        502,
        -32603,
        `the MCP server process could not be started (${(spawned as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
    const session: Session = {
      front: new NodeStreamableHttpTransport({
        sessionIdGenerator: randomUUID,
        directAnswers: DIRECT_ANSWERS,
        onsessioninitialized: (id) => void sessions.set(id, session),
      }),
      child,
      related: new RelatedRequests(),
      closed: false,
      streams: 0,
      waiting: [],
    };
    session.front.onmessage = (message) => fromFront(session, message);
    session.front.onclose = () => closeSession(session);
    child.on('error', (error) => log(`MCP server process: ${error.message}`));
    child.stdin!.on('error', () => {}); // EPIPE once the child is gone; its exit is handled below
    const buffer = new ReadBuffer();
    child.stdout!.on('data', (chunk: Buffer) => {
      buffer.append(chunk);
      for (;;) {
        try {
          const message = buffer.readMessage();
          if (!message) break;
          toFront(session, message);
        } catch (error) {
          log(`the MCP server wrote a line that is not JSON-RPC: ${(error as Error).message.slice(0, 200)}`);
        }
      }
    });
    // 'close' waits for stdout to drain, so answers written just before dying still go out;
    // a grandchild holding stdout open must not delay the error, hence the fallback.
    const exited = (code: number | null, signal: NodeJS.Signals | null) =>
      childExited(session, signal ?? `code ${code}`);
    child.once('close', exited);
    child.once('exit', (code, signal) => setTimeout(() => exited(code, signal), 250).unref());
    await session.front.handleRequest(req, res, body);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!authorized(req)) return jsonError(res, 401, -32001, 'Unauthorized');
    const path = new URL(req.url ?? '/', 'http://bridge').pathname;
    if (path === '/healthz' && req.method === 'GET') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ ok: true, sessions: sessions.size }));
      return;
    }
    if (path !== '/mcp') return jsonError(res, 404, -32601, 'Not found');
    let body: unknown;
    if (req.method === 'POST') {
      try {
        body = await readJson(req);
      } catch (error) {
        return error instanceof RangeError
          ? jsonError(res, 413, -32600, 'Request body too large')
          : jsonError(res, 400, -32700, 'Parse error');
      }
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId);
      if (!session) return jsonError(res, 404, -32001, 'Session not found');
      if (req.method === 'GET') {
        session.streams++;
        res.once('close', () => session.streams--);
        // the transport registers the stream within handleRequest: send what waited right after
        setImmediate(() => {
          for (const message of session.waiting.splice(0))
            session.front.send(message).catch((error: Error) => log(`dropped a message: ${error.message}`));
        });
      }
      return session.front.handleRequest(req, res, body);
    }
    if (req.method === 'POST' && isInitializeRequest(body)) return openSession(req, res, body);
    return jsonError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) => {
      log(`request failed: ${error.message}`);
      if (!res.headersSent) jsonError(res, 500, -32603, 'Internal error');
      else res.end();
    });
  });

  let stopping: Promise<void> | undefined;
  function close(): Promise<void> {
    stopping ??= new Promise<void>((resolve) => {
      stopped.abort();
      server.close();
      server.closeAllConnections();
      const children = [...sessions.values()].map((session) => session.child);
      for (const session of [...sessions.values()]) closeSession(session);
      void allExited(children).then(resolve);
    });
    return stopping;
  }

  return { server, close };
}
