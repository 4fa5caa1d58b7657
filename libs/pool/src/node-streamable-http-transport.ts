import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  WebStandardStreamableHTTPServerTransport,
  type WebStandardStreamableHTTPServerTransportOptions,
} from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo, RequestId } from '@modelcontextprotocol/sdk/types.js';

export interface NodeStreamableHttpTransportOptions extends WebStandardStreamableHTTPServerTransportOptions {
  /**
   * Answers as one JSON body, which the protocol lets a server choose per
   * request: a request whose answer is ready within `withinMs`, with nothing
   * sent for it before the answer, while at least `whenConcurrent` requests
   * (this one included) are being answered in this process. A request that
   * takes longer, or gets progress, log lines or requests of its own, streams
   * from then on, priming event first, so it stays resumable. Off when unset.
   *
   * Why only under load: a JSON body costs a client far less to read than an
   * event stream (the SDK's client about 0.35 ms of CPU less per call here)
   * and the server writes once instead of four times, which is what counts
   * when the CPU is the limit. A lone request is better served by an event
   * stream opened at once: its headers reach the client while the tool runs,
   * so the client has its reading set up before the answer comes, where a
   * JSON body is all read after it (p50 about 0.1 ms worse, measured).
   * `load` counts the requests being answered: the transports that share one
   * count together (a proxy's sessions share the proxy's).
   */
  answerAsJson?: { withinMs: number; whenConcurrent: number; load: AnswerLoad };
}

/** How many POSTs the transports that share it are answering at once: how busy their owner is. */
export class AnswerLoad {
  private answering = 0;

  get current(): number {
    return this.answering;
  }

  enter(): void {
    this.answering++;
  }

  leave(): void {
    this.answering--;
  }
}

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
  private readonly json: NodeStreamableHttpTransportOptions['answerAsJson'];
  /** answers that may still go out as JSON, by the id of their request */
  private readonly held = new Map<RequestId, HeldAnswer>();

  constructor({ answerAsJson, ...options }: NodeStreamableHttpTransportOptions) {
    this.inner = new WebStandardStreamableHTTPServerTransport(options);
    this.json = answerAsJson;
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
    // a progress notification, log line or request for a held request: it streams from now on, this message included
    if (this.held.size > 0 && 'method' in message && options?.relatedRequestId !== undefined)
      this.held.get(options.relatedRequestId)?.stream();
    return this.inner.send(message, options);
  }

  /** One HTTP exchange; `parsedBody` is the POST body when the caller has read it already. */
  async handleRequest(
    req: IncomingMessage & { auth?: AuthInfo },
    res: ServerResponse,
    parsedBody?: unknown,
  ): Promise<void> {
    const load = req.method === 'POST' ? this.json?.load : undefined;
    load?.enter();
    const held = this.hold(req, parsedBody);
    try {
      let response: Response;
      try {
        response = await this.inner.handleRequest(toWebRequest(req, parsedBody === undefined), {
          parsedBody,
          authInfo: req.auth,
        });
      } catch (error) {
        // the SDK answers bad exchanges itself; what it throws is a fault of ours, and its text stays in the log
        this.inner.onerror?.(error instanceof Error ? error : new Error(String(error)));
        response = Response.json(
          { jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null },
          { status: 500 },
        );
      }
      await writeResponse(response, res, held?.answer);
    } finally {
      load?.leave();
      if (held) {
        held.answer.dispose();
        if (this.held.get(held.id) === held.answer) this.held.delete(held.id);
      }
    }
  }

  /**
   * Registered before the SDK sees the request, so a message sent for it
   * while the SDK still handles the exchange already finds it. Only a single
   * request is held (cheaply recognised: the SDK validates it anyway); a batch
   * streams as before.
   */
  private hold(req: IncomingMessage, body: unknown): { id: RequestId; answer: HeldAnswer } | undefined {
    if (
      !this.json ||
      this.json.load.current < this.json.whenConcurrent ||
      req.method !== 'POST' ||
      typeof body !== 'object' ||
      body === null ||
      Array.isArray(body)
    )
      return undefined;
    const { id, method } = body as { id?: unknown; method?: unknown };
    if (typeof method !== 'string' || (typeof id !== 'string' && typeof id !== 'number')) return undefined;
    const answer = new HeldAnswer(this.json.withinMs);
    this.held.set(id, answer);
    return { id, answer };
  }
}

/**
 * The answer to one request while it may still go out as a JSON body: the
 * event stream's chunks wait here until the answer completes it (JSON) or
 * something says it must stream (a message of its own, or the time is up).
 */
class HeldAnswer {
  streaming = false;
  readonly chunks: Uint8Array[] = [];
  private opened: (() => void) | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(ms: number) {
    this.timer = setTimeout(() => this.stream(), ms);
    this.timer.unref();
  }

  /** What to do when it streams; at once if it streams already. */
  onStream(open: () => void): void {
    if (this.streaming) open();
    else this.opened = open;
  }

  stream(): void {
    if (this.streaming) return;
    this.streaming = true;
    clearTimeout(this.timer);
    this.opened?.();
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.opened = undefined;
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
    return new Request(url, {
      method: 'POST',
      headers: new NodeHeaders(req.headers).toHeaders(),
      body: Readable.toWeb(req) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
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
async function writeResponse(response: Response, res: ServerResponse, held?: HeldAnswer): Promise<void> {
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
  const reader = body.getReader();
  let gone = false;
  const onClose = (): void => {
    gone = true;
    reader.cancel().catch(() => undefined);
  };
  // a client can be gone before its answer is written: 'close' has been and will not come again
  if (res.destroyed) onClose();
  else res.once('close', onClose);
  let wrote = false;
  if (held) {
    held.onStream(() => {
      if (res.destroyed) return;
      res.writeHead(response.status, headers);
      for (const chunk of held.chunks.splice(0)) {
        res.write(chunk);
        wrote = true;
      }
      if (!wrote) res.flushHeaders();
    });
  } else {
    res.writeHead(response.status, headers);
    // Whatever the request set going in this turn goes out first: on a proxy,
    // the request to the upstream. Waking the client sooner gains nothing (it
    // waits for the answer anyway) and on a busy host its reading competes
    // with sending the upstream its request.
    await new Promise<void>((resolve) => setImmediate(resolve));
    // runs after the reads that are ready now, so a ready priming event shares the headers' packet
    process.nextTick(() => {
      if (!wrote && !res.destroyed) res.flushHeaders();
    });
  }
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || gone) break;
      if (held && !held.streaming) {
        held.chunks.push(value);
        continue;
      }
      wrote = true;
      if (!res.write(value)) await drained(res);
    }
  } catch {
    // the stream was cancelled or failed: the client is gone or the session closed
  } finally {
    res.off('close', onClose);
    if (held && !held.streaming && !gone && !res.destroyed) {
      // the stream ended with nothing but its answer: that answer is the body
      const json = held.chunks.length > 0 ? messageData(held.chunks.at(-1)!) : undefined;
      if (json) res.writeHead(response.status, jsonHeaders(headers, json.length)).end(json);
      else held.stream(); // ended without an answer (the session closed): as a stream, as before
    }
    if (!res.writableEnded && !res.destroyed) res.end();
  }
}

const MESSAGE_EVENT = Buffer.from('event: message\n');
const DATA_FIELD = Buffer.from('\ndata: ');

/**
 * The JSON of one message event as the SDK's transport writes it (`event`,
 * maybe `id`, then `data` on one line: JSON.stringify never breaks lines).
 * Undefined for anything else (a priming event, a keep-alive), which then
 * goes out as the stream it is.
 */
function messageData(chunk: Uint8Array): Buffer | undefined {
  const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (bytes.length < MESSAGE_EVENT.length + 2 || !bytes.subarray(0, MESSAGE_EVENT.length).equals(MESSAGE_EVENT))
    return undefined;
  if (bytes[bytes.length - 1] !== 0x0a || bytes[bytes.length - 2] !== 0x0a) return undefined;
  const at = bytes.indexOf(DATA_FIELD);
  return at < 0 ? undefined : bytes.subarray(at + DATA_FIELD.length, bytes.length - 2);
}

/** The event stream's headers for a JSON body instead (the session id and the rest stay). */
function jsonHeaders(headers: Record<string, string>, length: number): Record<string, string | number> {
  const {
    'content-type': _stream,
    'cache-control': _cache,
    connection: _connection,
    'x-accel-buffering': _buffering,
    ...rest
  } = headers;
  return { ...rest, 'content-type': 'application/json', 'content-length': length };
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
