import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  WebStandardStreamableHTTPServerTransport,
  type WebStandardStreamableHTTPServerTransportOptions,
} from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import {
  type JSONRPCMessage,
  type JSONRPCRequest,
  JSONRPCRequestSchema,
  type MessageExtraInfo,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
import { isPlainRequest } from './bridge/message-kind';

export interface NodeStreamableHttpTransportOptions extends WebStandardStreamableHTTPServerTransportOptions {
  /**
   * Answers a lone request on an open session straight from its handler, as
   * one JSON body (the protocol lets a server choose JSON per request), when
   * the answer is ready within `withinMs` with nothing sent for the request
   * before it. A request that takes longer, or gets progress, a log line or a
   * request of its own first, is handed to the SDK's transport at that moment
   * and streams from then on, priming event first, so it stays resumable.
   * Off when unset.
   *
   * Why: the SDK's transport builds a web `Response` and a `ReadableStream`
   * per request and formats an event stream that the client then takes apart
   * again; for a call answered in a millisecond that was a quarter of the
   * proxy's CPU per call (docs/pool.md § Performance). Only an exchange the
   * SDK would accept as it stands takes this way: the checks below admit and
   * never refuse, so every refusal, every batch, notification and
   * initialization, the GET stream, DELETE and resumption stay the SDK's.
   */
  directAnswers?: { withinMs: number };
}

/**
 * Direct answers as every front of the pool takes them (a session of
 * `/mcp/{ws}`, the bridge before a pod's server): a call not answered within
 * 100 ms streams, priming event first, so a broken connection can resume it.
 */
export const DIRECT_ANSWERS = { withinMs: 100 } as const;

/**
 * The SDK's Streamable HTTP server transport, spoken over `node:http`.
 *
 * The protocol is the SDK's: sessions, protocol versions, Origin and Host
 * checks, event ids and resumption, the GET stream, DELETE. What differs from
 * the SDK's own Node wrapper is the way there and back: that wrapper goes
 * through `@hono/node-server`, which builds a web `Request` per exchange and
 * reads the `Response` back with a timer per event stream. Here the transport
 * reads `node:http`'s own headers, the event stream is written to the socket
 * as the SDK produces it, and a quick answer to a plain request skips the
 * stream altogether (`directAnswers`).
 */
export class NodeStreamableHttpTransport implements Transport {
  private readonly inner: WebStandardStreamableHTTPServerTransport;
  private readonly withinMs: number | undefined;
  private readonly hostsAllowed: string[] | undefined;
  private readonly originsAllowed: string[] | undefined;
  private readonly eventStore: boolean;
  /** requests being answered directly, by their id, until the SDK takes them over or they are answered */
  private readonly direct = new Map<RequestId, DirectAnswer>();
  private handler: ((message: JSONRPCMessage, extra?: MessageExtraInfo) => void) | undefined;
  private closeHandler: (() => void) | undefined;
  private closed = false;

  constructor({ directAnswers, ...options }: NodeStreamableHttpTransportOptions) {
    this.inner = new WebStandardStreamableHTTPServerTransport(options);
    this.withinMs = directAnswers?.withinMs;
    this.eventStore = options.eventStore !== undefined;
    if (options.enableDnsRebindingProtection) {
      this.hostsAllowed = options.allowedHosts ?? [];
      this.originsAllowed = options.allowedOrigins ?? [];
    }
    this.inner.onmessage = (message, extra) => {
      // the SDK dispatching a request it takes over from a direct answer: its handler has it already
      if (this.direct.size > 0 && 'method' in message && 'id' in message) {
        const answer = this.direct.get(message.id);
        if (answer?.state === 'handing over') return answer.takenOver();
      }
      this.handler?.(message, extra);
    };
    this.inner.onclose = () => {
      this.closed = true;
      for (const answer of [...this.direct.values()]) answer.sessionClosed();
      this.closeHandler?.();
    };
  }

  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  set onclose(handler: (() => void) | undefined) {
    this.closeHandler = handler;
  }
  get onclose(): (() => void) | undefined {
    return this.closeHandler;
  }

  set onerror(handler: ((error: Error) => void) | undefined) {
    this.inner.onerror = handler;
  }
  get onerror(): ((error: Error) => void) | undefined {
    return this.inner.onerror;
  }

  set onmessage(handler: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined) {
    this.handler = handler;
  }
  get onmessage(): (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined {
    return this.handler;
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (this.direct.size > 0) {
      const id = 'method' in message ? options?.relatedRequestId : (message as { id?: RequestId }).id;
      const answer = id === undefined ? undefined : this.direct.get(id);
      if (answer) return answer.send(message, options);
    }
    return this.inner.send(message, options);
  }

  /** One HTTP exchange; `parsedBody` is the POST body when the caller has read it already. */
  async handleRequest(
    req: IncomingMessage & { auth?: AuthInfo },
    res: ServerResponse,
    parsedBody?: unknown,
  ): Promise<void> {
    const request = this.answerableDirectly(req, parsedBody);
    if (request) return this.answerDirectly(req, res, request, parsedBody);
    await writeResponse(await this.sdkResponse(req, parsedBody), res);
  }

  private async sdkResponse(req: IncomingMessage & { auth?: AuthInfo }, parsedBody: unknown): Promise<Response> {
    try {
      return await this.inner.handleRequest(toWebRequest(req, parsedBody === undefined), {
        parsedBody,
        authInfo: req.auth,
      });
    } catch (error) {
      // the SDK answers bad exchanges itself; what it throws is a fault of ours, and its text stays in the log
      this.inner.onerror?.(error instanceof Error ? error : new Error(String(error)));
      return Response.json(
        { jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null },
        { status: 500 },
      );
    }
  }

  /**
   * The request, as the SDK would read it, when the exchange is one the SDK
   * would accept without a word: a single request (not initialize, not asking
   * for progress, which will stream anyway) on this open session, with a
   * protocol version the SDK supports, both media types accepted, a JSON body,
   * and Host and Origin as allowed. Anything else is the SDK's to answer.
   */
  private answerableDirectly(req: IncomingMessage, body: unknown): JSONRPCRequest | undefined {
    if (this.withinMs === undefined || this.closed || req.method !== 'POST') return undefined;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
    const headers = req.headers;
    const sessionId = this.inner.sessionId;
    if (sessionId === undefined || headers['mcp-session-id'] !== sessionId) return undefined;
    const version = headers['mcp-protocol-version'];
    if (version === undefined || !SUPPORTED_PROTOCOL_VERSIONS.includes(version as string)) return undefined;
    const accept = headers.accept;
    if (!accept?.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
    if (!isJsonContentType(headers['content-type'])) return undefined;
    if (this.hostsAllowed?.length && !this.hostsAllowed.includes(headers.host ?? '')) return undefined;
    if (this.originsAllowed?.length && headers.origin !== undefined && !this.originsAllowed.includes(headers.origin))
      return undefined;
    let request: JSONRPCRequest;
    if (isPlainRequest(body)) request = body;
    else {
      const parsed = JSONRPCRequestSchema.safeParse(body);
      if (!parsed.success) return undefined;
      request = parsed.data;
    }
    if (request.method === 'initialize' || request.params?._meta?.progressToken !== undefined) return undefined;
    if (this.direct.has(request.id)) return undefined;
    return request;
  }

  private answerDirectly(
    req: IncomingMessage & { auth?: AuthInfo },
    res: ServerResponse,
    request: JSONRPCRequest,
    body: unknown,
  ): Promise<void> {
    const answer = new DirectAnswer(request.id, res, this.withinMs!, {
      sessionId: this.inner.sessionId!,
      handOver: async () => {
        // the SDK registers the request's stream and dispatches the request again, which takenOver() swallows
        const response = await this.sdkResponse(req, body);
        if (answer.state === 'handing over') answer.refused(); // the session closed meanwhile: the SDK's answer says so
        await writeResponse(response, res);
      },
      sendOnStream: (message, options) => this.inner.send(message, options),
      forget: () => {
        if (this.direct.get(request.id) === answer) this.direct.delete(request.id);
      },
    });
    this.direct.set(request.id, answer);
    // as the SDK does: only a client that got a priming event can come back for what it missed
    const resumable = this.eventStore && (req.headers['mcp-protocol-version'] as string) >= '2025-11-25';
    let requestInfo: MessageExtraInfo['requestInfo'];
    this.handler?.(request, {
      authInfo: req.auth,
      // as the SDK builds it, when a handler reads it (the pool's do not: a URL and a copy of the headers a call saved)
      get requestInfo() {
        requestInfo ??= {
          headers: Object.fromEntries(new NodeHeaders(req.headers).entries()),
          url: new URL(`http://${hostOf(req.headers)}${req.url ?? '/'}`),
        };
        return requestInfo;
      },
      ...(resumable
        ? {
            // the client polls for the rest: the request must be on a stream the SDK can close first
            closeSSEStream: () => void answer.handOverNow().then(() => this.inner.closeSSEStream(request.id)),
            closeStandaloneSSEStream: () => this.inner.closeStandaloneSSEStream(),
          }
        : {}),
    });
    return answer.done;
  }
}

type Send = (message: JSONRPCMessage, options?: TransportSendOptions) => Promise<void>;

/**
 * A request answered directly: its answer goes out as one JSON body, unless
 * something must be said on its behalf first or it takes too long. Then the
 * SDK's transport takes the request over (the same POST, so the SDK's checks
 * run as for any other) and what was said in the meantime goes on its event
 * stream in order, the answer last.
 */
class DirectAnswer {
  state: 'direct' | 'handing over' | 'streaming' | 'ended' = 'direct';
  readonly done: Promise<void>;
  private finish!: () => void;
  private readonly timer: NodeJS.Timeout;
  private readonly waiting: {
    message: JSONRPCMessage;
    options?: TransportSendOptions;
    sent: () => void;
    failed: (error: unknown) => void;
  }[] = [];
  private handingOver: Promise<void> | undefined;
  private tookOver: (() => void) | undefined;

  constructor(
    private readonly id: RequestId,
    private readonly res: ServerResponse,
    withinMs: number,
    private readonly how: {
      sessionId: string;
      handOver: () => Promise<void>;
      sendOnStream: Send;
      forget: () => void;
    },
  ) {
    this.done = new Promise((resolve) => {
      this.finish = resolve;
    });
    this.timer = setTimeout(() => void this.handOverNow(), withinMs);
    this.timer.unref();
    // a client gone before its answer: the request runs on, its answer has nowhere to go
    res.once('close', () => {
      if (this.state === 'direct') this.end();
    });
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (this.state === 'direct' && !('method' in message)) {
      const json = Buffer.from(JSON.stringify(message));
      this.res
        .writeHead(200, {
          'content-type': 'application/json',
          'content-length': json.length,
          'mcp-session-id': this.how.sessionId,
        })
        .end(json);
      this.end();
      return Promise.resolve();
    }
    if (this.state === 'ended') return this.how.sendOnStream(message, options);
    const queued = new Promise<void>((sent, failed) => this.waiting.push({ message, options, sent, failed }));
    void this.handOverNow();
    return queued;
  }

  /** Hands the request to the SDK's transport; resolves once its stream is registered (or the session refused it). */
  handOverNow(): Promise<void> {
    if (this.state === 'direct') {
      this.state = 'handing over';
      clearTimeout(this.timer);
      this.handingOver = new Promise<void>((resolve) => {
        this.tookOver = resolve;
      });
      void this.how
        .handOver()
        .catch(() => undefined) // the SDK's answer could not be written: the client is gone
        .finally(() => this.finish());
    }
    return this.handingOver ?? Promise.resolve();
  }

  /** The SDK has the request's stream: what waited goes on it, in order, and later messages follow. */
  takenOver(): void {
    this.state = 'streaming';
    this.tookOver?.();
    void this.drain();
  }

  /** The SDK refused the request when it was handed over (the session had closed): what waited has nowhere to go. */
  refused(): void {
    this.state = 'ended';
    this.tookOver?.();
    this.how.forget();
    for (const waiting of this.waiting.splice(0))
      waiting.failed(new Error(`No connection established for request ID: ${String(this.id)}`));
  }

  /** The session closed while the request was answered directly: the client hears so, as it would on a new request. */
  sessionClosed(): void {
    if (this.state !== 'direct') return;
    if (!this.res.headersSent && !this.res.destroyed)
      this.res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
    this.end();
  }

  private async drain(): Promise<void> {
    // a message sent while an earlier one is being stored joins the queue and keeps its place
    while (this.waiting.length > 0) {
      const next = this.waiting.shift()!;
      await this.how.sendOnStream(next.message, next.options).then(next.sent, next.failed);
    }
    this.state = 'ended';
    this.how.forget();
  }

  private end(): void {
    this.state = 'ended';
    clearTimeout(this.timer);
    this.how.forget();
    this.finish();
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
