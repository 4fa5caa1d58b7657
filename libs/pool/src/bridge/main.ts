/**
 * The bridge: a Streamable HTTP MCP front for a stdio MCP server, one child
 * process per MCP session. It forwards raw JSON-RPC both ways without
 * interpreting it, so whatever the server speaks reaches the proxy unchanged.
 *
 *   node main.js [--host 127.0.0.1] [--port 0] [--exit-on-stdin-eof] [--env-fd N] -- <command> <args...>
 *
 * The bearer secret comes from AILERON_BRIDGE_TOKEN. With `--env-fd N` it and
 * the server's variables come as JSON (`{"env":{...}}`) on that file
 * descriptor instead: the local driver starts bwrap with a fixed environment
 * of its own, so nothing a catalog entry sets can act on a program that runs
 * on the host, and secrets stay off every command line. Once listening it prints
 * one line `{"ready":{"port":N}}` on stdout. Runs inside the local sandbox and
 * as the entrypoint of the Kubernetes runner image, so it needs nothing but
 * node, the MCP SDK and its sibling `streamable-http` (node and the SDK too).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, readFileSync } from 'node:fs';
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import { isInitializeRequest, isJSONRPCErrorResponse, isJSONRPCNotification, isJSONRPCRequest, isJSONRPCResultResponse, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { NodeStreamableHttpTransport } from '../streamable-http';

const MAX_BODY_BYTES = 4 * 1024 * 1024;
const KILL_GRACE_MS = 2000;

interface Session {
  front: NodeStreamableHttpTransport;
  child: ChildProcess;
  /** client requests forwarded and not yet answered, oldest first */
  inFlight: Set<RequestId>;
  /** progress token → the client request that carried it */
  progress: Map<string | number, RequestId>;
  closed: boolean;
  /** the client's GET streams open now: without one the transport drops messages tied to no request */
  streams: number;
  /** such messages, held until a stream opens (a server's list_changed right after initialized) */
  waiting: JSONRPCMessage[];
}

const MAX_WAITING = 200;
const log = (line: string) => process.stderr.write(`bridge: ${line}\n`);

function parseArgs(argv: string[]): { host: string; port: number; exitOnStdinEof: boolean; envFd: number | undefined; command: string; args: string[] } {
  const dash = argv.indexOf('--');
  const [command, ...args] = dash < 0 ? [] : argv.slice(dash + 1);
  const own = dash < 0 ? argv : argv.slice(0, dash);
  let host = '127.0.0.1';
  let port = 0;
  let exitOnStdinEof = false;
  let envFd: number | undefined;
  for (let i = 0; i < own.length; i++) {
    if (own[i] === '--host') host = own[++i] ?? host;
    else if (own[i] === '--port') port = Number(own[++i]);
    else if (own[i] === '--exit-on-stdin-eof') exitOnStdinEof = true;
    else if (own[i] === '--env-fd') envFd = Number(own[++i]);
    else throw new Error(`unknown option ${own[i]}`);
  }
  if (!command || !Number.isInteger(port) || port < 0 || port > 65535 || (envFd !== undefined && !(Number.isInteger(envFd) && envFd > 2))) {
    throw new Error('usage: main.js [--host H] [--port N] [--exit-on-stdin-eof] [--env-fd N] -- <command> <args...>');
  }
  return { host, port, exitOnStdinEof, envFd, command, args };
}

function jsonError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
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

function kill(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS).unref();
}

/** The variables the driver handed over on a file descriptor (read to its end: the driver closes it at once). */
function environmentFrom(fd: number): Record<string, string> {
  const parsed = JSON.parse(readFileSync(fd, 'utf8')) as { env?: unknown };
  closeSync(fd);
  const env = parsed.env;
  if (typeof env !== 'object' || env === null || Object.values(env).some((v) => typeof v !== 'string')) throw new Error(`file descriptor ${fd} holds no environment`);
  return env as Record<string, string>;
}

function main(): void {
  const options = parseArgs(process.argv.slice(2));
  const handed = options.envFd !== undefined ? environmentFrom(options.envFd) : {};
  const token = handed.AILERON_BRIDGE_TOKEN ?? process.env.AILERON_BRIDGE_TOKEN;
  delete handed.AILERON_BRIDGE_TOKEN;
  // The servers we spawn inherit our environment and the handed variables; the secret must not reach them.
  delete process.env.AILERON_BRIDGE_TOKEN;
  const serverEnv = { ...process.env, ...handed };
  if (!token) throw new Error('AILERON_BRIDGE_TOKEN is not set');
  // Comparing digests keeps the comparison timing-safe whatever the presented length.
  const expected = createHash('sha256').update(`Bearer ${token}`).digest();
  const authorized = (req: IncomingMessage) =>
    timingSafeEqual(createHash('sha256').update(req.headers.authorization ?? '').digest(), expected);

  const sessions = new Map<string, Session>();

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
    for (const id of session.inFlight) {
      session.front.send({ jsonrpc: '2.0', id, error: { code: -32603, message } }).catch(() => {});
    }
    closeSession(session);
  }

  function toFront(session: Session, message: JSONRPCMessage): void {
    let relatedRequestId: RequestId | undefined;
    if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
      if (message.id !== undefined) forget(session, message.id);
    } else if (isJSONRPCNotification(message) && message.method === 'notifications/progress') {
      relatedRequestId = session.progress.get(message.params?.progressToken as string | number);
    } else if (isJSONRPCNotification(message) && (message.method === 'notifications/resources/updated' || message.method.endsWith('/list_changed'))) {
      relatedRequestId = undefined;
    } else {
      // stdio does not say which call a sampling request or log line belongs to; the latest call is the best guess.
      relatedRequestId = [...session.inFlight].at(-1);
    }
    const unrelated = relatedRequestId === undefined && !isJSONRPCResultResponse(message) && !isJSONRPCErrorResponse(message);
    if (unrelated && session.streams === 0) {
      session.waiting.push(message);
      if (session.waiting.length > MAX_WAITING) session.waiting.shift();
      return;
    }
    session.front.send(message, relatedRequestId === undefined ? undefined : { relatedRequestId }).catch((error: Error) => log(`dropped a message: ${error.message}`));
  }

  function forget(session: Session, id: RequestId): void {
    session.inFlight.delete(id);
    for (const [token, request] of session.progress) if (request === id) session.progress.delete(token);
  }

  function fromFront(session: Session, message: JSONRPCMessage): void {
    if (isJSONRPCRequest(message)) {
      session.inFlight.add(message.id);
      const progressToken = message.params?._meta?.progressToken;
      if (progressToken !== undefined) session.progress.set(progressToken, message.id);
    } else if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') {
      // A cancelled request gets no answer from the server; stop waiting for one.
      const id = message.params?.requestId as RequestId | undefined;
      if (id !== undefined) forget(session, id);
    }
    if (session.child.stdin?.writable) session.child.stdin.write(serializeMessage(message));
  }

  async function openSession(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const child = spawn(options.command, options.args, { env: serverEnv, stdio: ['pipe', 'pipe', 'inherit'] });
    const spawned = await new Promise<Error | undefined>((resolve) => {
      child.once('spawn', () => resolve(undefined));
      child.once('error', resolve);
    });
    if (spawned) {
      log(`could not start the MCP server: ${(spawned as NodeJS.ErrnoException).code ?? spawned.message}`);
      return jsonError(res, 502, -32603, `the MCP server process could not be started (${(spawned as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    const session: Session = {
      front: new NodeStreamableHttpTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => void sessions.set(id, session),
      }),
      child,
      inFlight: new Set(),
      progress: new Map(),
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
    const exited = (code: number | null, signal: NodeJS.Signals | null) => childExited(session, signal ?? `code ${code}`);
    child.once('close', exited);
    child.once('exit', (code, signal) => setTimeout(() => exited(code, signal), 250).unref());
    await session.front.handleRequest(req, res, body);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!authorized(req)) return jsonError(res, 401, -32001, 'Unauthorized');
    const path = new URL(req.url ?? '/', 'http://bridge').pathname;
    if (path === '/healthz' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, sessions: sessions.size }));
      return;
    }
    if (path !== '/mcp') return jsonError(res, 404, -32601, 'Not found');
    let body: unknown;
    if (req.method === 'POST') {
      try {
        body = await readJson(req);
      } catch (error) {
        return error instanceof RangeError ? jsonError(res, 413, -32600, 'Request body too large') : jsonError(res, 400, -32700, 'Parse error');
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
          for (const message of session.waiting.splice(0)) session.front.send(message).catch((error: Error) => log(`dropped a message: ${error.message}`));
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

  let stopping = false;
  function shutdown(why: string): void {
    if (stopping) return;
    stopping = true;
    log(`stopping (${why})`);
    server.close();
    server.closeAllConnections();
    const children = [...sessions.values()].map((session) => session.child);
    for (const session of [...sessions.values()]) closeSession(session);
    const running = children.filter((child) => child.exitCode === null && child.signalCode === null);
    let left = running.length;
    if (left === 0) process.exit(0);
    for (const child of running) child.once('exit', () => --left === 0 && process.exit(0));
    setTimeout(() => process.exit(0), KILL_GRACE_MS + 500).unref();
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  if (options.exitOnStdinEof) {
    // The local driver holds our stdin: when it closes (stop, or the control plane died) we go too.
    process.stdin.on('end', () => shutdown('stdin closed')).on('error', () => shutdown('stdin closed')).resume();
  }

  server.listen(options.port, options.host, () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : options.port;
    process.stdout.write(`${JSON.stringify({ ready: { port } })}\n`);
    log(`listening on ${options.host}:${port}`);
  });
}

try {
  main();
} catch (error) {
  log((error as Error).message);
  process.exit(2);
}
