import { Logger } from '@nestjs/common';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  type JSONRPCMessage,
  type JSONRPCNotification,
  type JSONRPCRequest,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { createParser } from 'eventsource-parser';
import { ConnectionUnavailableError, type UpstreamBearer } from '@aileron/connections';
import type { Instance } from '../pool-instances.service';
import type { Cancellation } from './cancellation';
import { InProcessTransport } from './in-process-transport';
import { asResponse, BodyWatch, Exchange, httpExchange } from './http-fetch';
import { parseMessage, RpcError, UPSTREAM_GONE, UPSTREAM_UNAVAILABLE } from './jsonrpc';
import { type OutboundPolicy, RefusedAddressError } from '@aileron/net';

const logger = new Logger('PoolUpstream');

export type Answer = { result: Record<string, unknown> } | { error: RpcError };

/**
 * What a downstream MCP session holds for each server it reaches: an upstream
 * session of its own (`Upstream`), or its share of one that a workspace's
 * sessions share (`SharedUpstream`, for catalog entries with `sessions: shared`).
 */
export interface UpstreamSession<On = unknown> {
  readonly server: string;
  readonly instance: Instance;
  readonly alive: boolean;
  /** `on`: what the request this message belongs to was sent for, when that can be told */
  onServerMessage: (message: JSONRPCRequest | JSONRPCNotification, on: On | undefined) => void;
  /** told once, when the session can no longer be used */
  onGone: (reason: string) => void;
  start(): Promise<void>;
  setProtocolVersion(version: string): void;
  /**
   * Resolves with the answer; never rejects. `answered`, where the session
   * can, hears the answer first, synchronously, as it is read (a shared
   * session's answers go through its own bookkeeping first and leave it out).
   */
  request(
    method: string,
    params: Record<string, unknown> | undefined,
    cancel?: Cancellation,
    on?: On,
    answered?: (answer: Answer) => void,
  ): Promise<Answer>;
  notify(method: string, params?: Record<string, unknown>): Promise<void>;
  /** the answer to a request the server sent (sampling, elicitation, roots) */
  respond(id: RequestId, answer: Answer): Promise<void>;
  close(): Promise<void>;
}

interface Pending<On> {
  resolve(answer: Answer): void;
  /** what the caller said the request was for: messages the server sends on its stream belong to it */
  on: On | undefined;
}

/**
 * One upstream MCP session on one instance, for one downstream session: log
 * level, subscriptions and roots are per session upstream as they are
 * downstream. Requests carry ids of our own, so several downstream requests
 * (and our own) never collide; responses come back as values, the protocol's
 * other traffic through `onServerMessage`.
 */
export class Upstream<On = unknown> implements UpstreamSession<On> {
  /** Streamable HTTP to an instance, or an in-process connection to a built-in server */
  private readonly transport: StreamableHTTPClientTransport | InProcessTransport;
  /** a built-in server connecting to its end of the in-process connection */
  private readonly attached: Promise<void>;
  private readonly pending = new Map<RequestId, Pending<On>>();
  private nextId = 0;
  private closedWith: string | null = null;
  /** stops listening for the instance's end: a closed session must not stay reachable from its instance */
  private readonly unwatch: () => void;
  /** `on`: what the request this message came with was sent for (see `request`), when the server said so by its stream */
  onServerMessage: (message: JSONRPCRequest | JSONRPCNotification, on: On | undefined) => void = () => undefined;
  /** told once, when the session can no longer be used */
  onGone: (reason: string) => void = () => undefined;

  /** whether it counts among the instance's sessions: a shared one counts the sessions sharing it instead */
  private readonly counted: boolean;
  /** an upstream that signs in with OAuth: the token of the connection this session's caller uses */
  private readonly bearer: UpstreamBearer | undefined;
  /** the Authorization value last sent, which no error message may repeat */
  private sentAuthorization: string | undefined;

  constructor(
    readonly server: string,
    readonly instance: Instance,
    options: { counted?: boolean; bearer?: UpstreamBearer } = {},
  ) {
    this.counted = options.counted ?? true;
    this.bearer = options.bearer;
    const endpoint = instance.endpoint;
    if ('attach' in endpoint) {
      const [ours, theirs] = InProcessTransport.pair();
      ours.onrelated = (message, related) => this.receive(message, related === undefined ? [] : [related]);
      this.transport = ours;
      this.attached = endpoint.attach(theirs);
    } else {
      this.transport = new StreamableHTTPClientTransport(new URL(endpoint.url), {
        requestInit: { headers: endpoint.headers },
        fetch: (url, init) => this.fetchTracked(url, init, endpoint.outbound),
        // the instance is ours and close: resumption would only delay telling the client it died
        reconnectionOptions: {
          maxReconnectionDelay: 1000,
          initialReconnectionDelay: 200,
          reconnectionDelayGrowFactor: 2,
          maxRetries: 0,
        },
      });
      this.transport.onmessage = (message) => this.receive(message);
      this.attached = Promise.resolve();
    }
    this.transport.onclose = () => this.gone('the upstream session closed');
    if (this.counted) instance.upstreamSessions++;
    this.unwatch = instance.onEnded((exit) => this.gone(`the server instance stopped (${exit.reason})`));
  }

  get alive(): boolean {
    return this.closedWith === null;
  }

  async start(): Promise<void> {
    await this.transport.start();
    await this.attached;
  }

  setProtocolVersion(version: string): void {
    if (this.transport instanceof StreamableHTTPClientTransport) this.transport.setProtocolVersion(version);
  }

  /**
   * Sends a request and resolves with its answer; never rejects. Requests
   * and notifications the server sends on this request's stream (sampling,
   * progress, log lines of the call) come to `onServerMessage` with `on`.
   *
   * `answered` hears the answer in the turn that read it, before the promise
   * resolves. Why: the rest of the instance's response (its end, usually in
   * the same read) is taken apart by node:http in that turn, and the answer
   * then comes back up through the caller's awaits, some 40 µs of a quick
   * call's 0.6 ms through the pool that a client waiting for the answer need
   * not wait for (docs/pool.md § Performance).
   */
  request(
    method: string,
    params: Record<string, unknown> | undefined,
    cancel?: Cancellation,
    on?: On,
    answered?: (answer: Answer) => void,
  ): Promise<Answer> {
    if (this.closedWith) return Promise.resolve({ error: { code: UPSTREAM_GONE, message: this.closedWith } });
    const id = `a${++this.nextId}`;
    return new Promise<Answer>((resolve) => {
      const stopListening = cancel?.onAbort(() => {
        this.pending.delete(id);
        void this.notify('notifications/cancelled', {
          requestId: id,
          reason: String(cancel.reason ?? 'cancelled by the client'),
        });
        resolve({ error: { code: -32800, message: 'Request cancelled' } });
      });
      this.pending.set(id, {
        resolve: (answer) => {
          stopListening?.();
          if (answered) hear(answered, answer);
          resolve(answer);
        },
        on,
      });
      const message: JSONRPCRequest = { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) };
      this.transport.send(message).catch((error: unknown) => {
        // no token for the call: the instance is fine, the caller is told who must connect and where
        if (error instanceof ConnectionUnavailableError) {
          this.settle(id, { error: connectionError(error) });
          return;
        }
        this.instance.suspected = true;
        this.settle(id, {
          error: {
            code: UPSTREAM_GONE,
            message: `the server could not be reached: ${describe(error, this.secrets())}`,
          },
        });
      });
    });
  }

  notify(method: string, params?: Record<string, unknown>): Promise<void> {
    if (this.closedWith) return Promise.resolve();
    return this.transport
      .send({ jsonrpc: '2.0', method, ...(params ? { params } : {}) } as JSONRPCNotification)
      .catch(() => undefined);
  }

  /** The answer to a request the server sent us (sampling, elicitation, roots). */
  respond(id: RequestId, answer: Answer): Promise<void> {
    if (this.closedWith) return Promise.resolve();
    const message =
      'error' in answer
        ? { jsonrpc: '2.0' as const, id, error: answer.error }
        : { jsonrpc: '2.0' as const, id, result: answer.result };
    return this.transport.send(message as JSONRPCMessage).catch(() => undefined);
  }

  /** Ends the upstream session (DELETE) and forgets it. */
  async close(): Promise<void> {
    if (this.closedWith) return;
    this.gone('closed');
    if (this.transport instanceof StreamableHTTPClientTransport)
      await this.transport.terminateSession().catch(() => undefined);
    await this.transport.close().catch(() => undefined);
  }

  /** what the instance's requests carry that no error message may repeat */
  private secrets(): string[] {
    const endpoint = this.instance.endpoint;
    return [
      ...('headers' in endpoint ? Object.values(endpoint.headers) : []),
      ...(this.sentAuthorization ? [this.sentAuthorization, this.sentAuthorization.replace(/^Bearer /, '')] : []),
    ];
  }

  /** `stream`: the ids of the requests whose POST the message came on; none for the GET stream (or a JSON answer). */
  private receive(message: JSONRPCMessage, stream: RequestId[] = []): void {
    if ('id' in message && !('method' in message)) {
      const answer: Answer =
        'error' in message
          ? { error: message.error as RpcError }
          : { result: (message as { result: Record<string, unknown> }).result };
      this.settle(message.id as RequestId, answer);
      return;
    }
    let on: On | undefined;
    for (const id of stream) on ??= this.pending.get(id)?.on;
    this.onServerMessage(message as JSONRPCRequest | JSONRPCNotification, on);
  }

  private settle(id: RequestId, answer: Answer): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    pending.resolve(answer);
  }

  private gone(reason: string): void {
    if (this.closedWith) return;
    this.closedWith = reason;
    this.unwatch();
    if (this.counted) this.instance.upstreamSessions--;
    for (const [id] of this.pending) this.settle(id, { error: { code: UPSTREAM_GONE, message: reason } });
    this.onGone(reason);
    void this.transport.close().catch(() => undefined);
  }

  /**
   * A POST that carries requests: its answer is read here when it is an
   * event stream, and the SDK's transport is told "accepted". Two reasons:
   * the SDK does not say when such a stream ends without the answer (the
   * instance died mid-call), and its reading (a web stream per body, piped
   * through a decoder and a parser stream) cost more per call than the rest
   * of the hop. Resumption of these streams is off anyway (maxRetries 0):
   * a broken stream means the instance is suspect and the caller hears so.
   * JSON answers and everything else (the GET stream, DELETE) stay the SDK's.
   */
  private async fetchTracked(
    url: string | URL,
    init: RequestInit | undefined,
    outbound: OutboundPolicy | undefined,
  ): Promise<Response> {
    const body = init?.body;
    // the SDK sends JSON text; anything else (never seen) is refused rather than sent past the guarded agents
    if (body !== undefined && body !== null && typeof body !== 'string')
      throw new TypeError('only JSON text bodies are sent to an MCP server');
    const ids = init?.method === 'POST' && typeof body === 'string' ? requestIds(body) : [];
    const exchange = await this.exchange(url, { ...init, body: body ?? undefined }, outbound);
    if (ids.length === 0) return asResponse(exchange, init?.method);
    const { response } = exchange;
    if (response.statusCode !== 200 || !EVENT_STREAM.test(response.headers['content-type'] ?? ''))
      return asResponse(exchange, init?.method, this.watch(ids));
    this.readEvents(exchange, ids);
    const session = response.headers['mcp-session-id'];
    return new Response(null, {
      status: 202,
      headers: typeof session === 'string' ? { 'mcp-session-id': session } : {},
    });
  }

  /**
   * One exchange with the instance. Where the upstream signs in with OAuth it
   * carries the connection's access token, and an answer of 401 is tried once
   * more with a renewed one (the request's body is our text: it can be sent
   * again). A token that cannot be had throws ConnectionUnavailableError.
   */
  private async exchange(
    url: string | URL,
    init: RequestInit & { body?: string },
    outbound: OutboundPolicy | undefined,
  ): Promise<Exchange> {
    if (!this.bearer) return httpExchange(url, init, outbound);
    const sent = await this.bearer.authorization();
    const first = await httpExchange(url, this.authorized(init, sent), outbound);
    const wanted = insufficientScope(first);
    if (wanted !== undefined) {
      discard(first);
      return this.bearer.insufficientScope(sent, wanted);
    }
    if (first.response.statusCode !== 401) return first;
    discard(first);
    const renewed = await this.bearer.rejected(sent);
    const second = await httpExchange(url, this.authorized(init, renewed), outbound);
    if (second.response.statusCode !== 401) return second;
    discard(second);
    return this.bearer.refusedAfterRenewal(renewed);
  }

  private authorized(init: RequestInit & { body?: string }, authorization: string): RequestInit & { body?: string } {
    this.sentAuthorization = authorization;
    const headers = new Headers(init.headers);
    headers.set('authorization', authorization);
    return { ...init, headers };
  }

  private readEvents({ response, release }: Exchange, ids: RequestId[]): void {
    const watch = this.watch(ids);
    const parser = createParser({
      onEvent: (event) => {
        // the SDK's reading: unnamed or `message` events carry messages; priming events carry none
        if ((event.event !== undefined && event.event !== 'message') || !event.data) return;
        const message = parseMessage(event.data);
        if (message) this.receive(message, ids);
      },
    });
    let ended = false;
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => parser.feed(chunk));
    response.once('end', () => {
      ended = true;
      release();
      watch.end();
    });
    response.once('close', () => {
      if (ended) return;
      release();
      watch.broke(new Error(response.errored?.message ?? 'the response stream was cut off'));
    });
  }

  /** How a POST's answer ended tells which of its requests will never be answered. */
  private watch(ids: RequestId[]): BodyWatch {
    const settleOrphans = (why: string): void => {
      // responses are delivered before the stream's end is seen; anything left was never answered
      setImmediate(() => {
        for (const id of ids) this.settle(id, { error: { code: UPSTREAM_GONE, message: why } });
      });
    };
    return {
      end: () => settleOrphans('the server ended the response without answering'),
      broke: (error) => {
        const why = `the connection to the server broke: ${describe(error)}`;
        settleOrphans(why);
        // the session is unusable; the instance may be dead: the next request reconnects and checks
        this.instance.suspected = true;
        setImmediate(() => this.gone(why));
      },
    };
  }
}

/** What hears an answer early runs inside the reading of a response: a fault of its own must not end that reading. */
function hear(answered: (answer: Answer) => void, answer: Answer): void {
  try {
    answered(answer);
  } catch (error) {
    logger.error({ err: error instanceof Error ? error.message : String(error) }, 'handling an answer failed');
  }
}

const EVENT_STREAM = /^text\/event-stream\s*(;|$)/i;

/**
 * The scope an answer of 403 with `error="insufficient_scope"` asks for (RFC
 * 6750 § 3.1, the MCP specification's step-up), or undefined for any other answer.
 */
function insufficientScope({ response }: Exchange): string | undefined {
  if (response.statusCode !== 403) return undefined;
  const header = String(response.headers['www-authenticate'] ?? '');
  if (!/\berror="?insufficient_scope"?/.test(header)) return undefined;
  return /\bscope="([^"]*)"/.exec(header)?.[1] ?? '';
}

/** An answer that is not read: its socket goes back to the agent. */
function discard({ response, release }: Exchange): void {
  response.resume();
  response.once('end', release);
}

/** The JSON-RPC error of a call that has no token: its stable code, and where to connect. */
export function connectionError(error: ConnectionUnavailableError): RpcError {
  return {
    code: UPSTREAM_UNAVAILABLE,
    message: error.message,
    data: { code: error.code, connect_url: error.connectUrl },
  };
}

/** The SDK writes the messages we build, keys in our order: the request's id is at the front. */
const OUR_REQUEST = /^\{"jsonrpc":"2\.0","id":"(a\d+)","method":/;

function requestIds(body: string): RequestId[] {
  const ours = OUR_REQUEST.exec(body);
  if (ours) return [ours[1]!];
  try {
    const parsed = JSON.parse(body) as unknown;
    const list = Array.isArray(parsed) ? parsed : [parsed];
    return list
      .filter((m): m is JSONRPCRequest => typeof m === 'object' && m !== null && 'method' in m && 'id' in m)
      .map((m) => m.id);
  } catch {
    return [];
  }
}

/**
 * What the MCP client is told of a failed exchange: the kind of failure,
 * never the server's own words. An HTTP error's body (the SDK puts it in its
 * message) may hold anything the server or a proxy before it says, echoed
 * headers and internal addresses included; it goes to the log, scrubbed of
 * the headers we sent, and the caller hears the status.
 */
function describe(error: unknown, secrets: readonly string[] = []): string {
  if (error instanceof StreamableHTTPError) {
    const said = secrets
      .reduce((text, secret) => (secret ? text.split(secret).join('[redacted]') : text), error.message)
      .slice(0, 500);
    logger.warn({ status: error.code, said }, 'an MCP server answered an error');
    return typeof error.code === 'number' && error.code > 0
      ? `the server answered HTTP ${error.code}`
      : 'the server answered an error';
  }
  if (error instanceof RefusedAddressError) {
    logger.warn({ reason: error.message }, 'a connection to an MCP server was refused by the outbound rules');
    return 'its address is refused by the outbound rules (UPSTREAM_ALLOW_CIDRS)';
  }
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string'
    ? `connection failed (${code})`
    : error instanceof Error && error.name === 'AbortError'
      ? 'aborted'
      : 'connection failed';
}
