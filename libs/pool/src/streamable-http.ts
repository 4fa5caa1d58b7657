import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  WebStandardStreamableHTTPServerTransport,
  type WebStandardStreamableHTTPServerTransportOptions,
} from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';

/**
 * The SDK's Streamable HTTP server transport, spoken over `node:http`.
 *
 * The protocol is all the SDK's: sessions, protocol versions, Origin and Host
 * checks, event ids and resumption, the GET stream, DELETE. What differs from
 * the SDK's own Node wrapper is only the way there and back: that wrapper goes
 * through `@hono/node-server`, which builds a web `Request` per exchange and
 * reads the `Response` back with a timer per event stream. On the proxy's hot
 * path that round trip cost about as much as the policy and the audit
 * together (see docs/pool.md § Performance). Here the transport reads
 * `node:http`'s own headers and the event stream is written to the socket as
 * the SDK produces it.
 */
export class NodeStreamableHttpTransport implements Transport {
  private readonly inner: WebStandardStreamableHTTPServerTransport;

  constructor(options: WebStandardStreamableHTTPServerTransportOptions) {
    this.inner = new WebStandardStreamableHTTPServerTransport(options);
  }

  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  set onclose(handler: (() => void) | undefined) {
    this.inner.onclose = handler;
  }
  get onclose(): (() => void) | undefined {
    return this.inner.onclose;
  }

  set onerror(handler: ((error: Error) => void) | undefined) {
    this.inner.onerror = handler;
  }
  get onerror(): ((error: Error) => void) | undefined {
    return this.inner.onerror;
  }

  set onmessage(handler: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined) {
    this.inner.onmessage = handler;
  }
  get onmessage(): (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined {
    return this.inner.onmessage;
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    return this.inner.send(message, options);
  }

  /** One HTTP exchange; `parsedBody` is the POST body when the caller has read it already. */
  async handleRequest(req: IncomingMessage & { auth?: AuthInfo }, res: ServerResponse, parsedBody?: unknown): Promise<void> {
    let response: Response;
    try {
      response = await this.inner.handleRequest(toWebRequest(req, parsedBody === undefined), { parsedBody, authInfo: req.auth });
    } catch (error) {
      // the SDK answers bad exchanges itself; what it throws is a fault of ours, and its text stays in the log
      this.inner.onerror?.(error instanceof Error ? error : new Error(String(error)));
      response = Response.json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }, { status: 500 });
    }
    await writeResponse(response, res);
  }
}

/**
 * What the SDK reads of a request (method, url, headers), straight from
 * `node:http`; a full `Request`, body and all, only when the SDK must read
 * the body itself.
 */
function toWebRequest(req: IncomingMessage, withBody: boolean): Request {
  const url = `http://${hostOf(req.headers)}${req.url ?? '/'}`;
  if (withBody && req.method === 'POST') {
    return new Request(url, { method: 'POST', headers: new NodeHeaders(req.headers).toHeaders(), body: Readable.toWeb(req) as ReadableStream, duplex: 'half' } as RequestInit);
  }
  return { method: req.method ?? 'GET', url, headers: new NodeHeaders(req.headers) } as unknown as Request;
}

/** The Host header if it can stand in a URL; the SDK checks the real one against `allowedHosts` itself. */
function hostOf(headers: IncomingHttpHeaders): string {
  const host = headers.host;
  return host && /^[\w.-]+(:\d{1,5})?$|^\[[\da-fA-F:.]+\](:\d{1,5})?$/.test(host) ? host : 'localhost';
}

/** The read side of web `Headers` over `node:http`'s headers, which are already lower-case. */
class NodeHeaders {
  constructor(private readonly raw: IncomingHttpHeaders) {}

  get(name: string): string | null {
    const value = this.raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(', ') : value;
  }

  has(name: string): boolean {
    return this.raw[name.toLowerCase()] !== undefined;
  }

  *entries(): IterableIterator<[string, string]> {
    for (const name of Object.keys(this.raw)) {
      const value = this.get(name);
      if (value !== null) yield [name, value];
    }
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  forEach(callback: (value: string, name: string) => void): void {
    for (const [name, value] of this.entries()) callback(value, name);
  }

  toHeaders(): Headers {
    return new Headers([...this.entries()]);
  }
}

/**
 * Writes the SDK's answer. An event stream goes out chunk by chunk as the SDK
 * enqueues events; the headers leave with the first chunk when there is one
 * at once (the priming event), else on their own, so a client waiting on a
 * quiet stream still sees it open. A client that goes away cancels the
 * stream, which tells the SDK the stream is gone.
 */
async function writeResponse(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  const body = response.body;
  if (body === null) {
    res.writeHead(response.status, headers).end();
    return;
  }
  if (!headers['content-type']?.startsWith('text/event-stream')) {
    const bytes = Buffer.from(await response.arrayBuffer());
    res.writeHead(response.status, headers).end(bytes);
    return;
  }
  res.writeHead(response.status, headers);
  const reader = body.getReader();
  let gone = false;
  const onClose = (): void => {
    gone = true;
    reader.cancel().catch(() => undefined);
  };
  // a client can be gone before its answer is written: 'close' has been and will not come again
  if (res.destroyed) onClose();
  else res.once('close', onClose);
  // Whatever the request set going in this turn goes out first: on a proxy,
  // the request to the upstream. Waking the client sooner gains nothing (it
  // waits for the answer anyway) and on a busy host its reading competes
  // with sending the upstream its request.
  await new Promise<void>((resolve) => setImmediate(resolve));
  let wrote = false;
  // runs after the reads that are ready now, so a ready priming event shares the headers' packet
  process.nextTick(() => {
    if (!wrote && !res.destroyed) res.flushHeaders();
  });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || gone) break;
      wrote = true;
      if (!res.write(value)) await drained(res);
    }
  } catch {
    // the stream was cancelled or failed: the client is gone or the session closed
  } finally {
    res.off('close', onClose);
    if (!res.writableEnded && !res.destroyed) res.end();
  }
}

/** Resolves when the socket takes more, or when it is gone (a closed response never drains). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
