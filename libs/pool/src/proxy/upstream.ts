import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { JSONRPCMessage, JSONRPCNotification, JSONRPCRequest, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { Instance } from '../instances.service';
import { httpFetch } from './http-fetch';
import { RpcError, UPSTREAM_GONE } from './jsonrpc';

export type Answer = { result: Record<string, unknown> } | { error: RpcError };

interface Pending {
  resolve(answer: Answer): void;
}

/**
 * One upstream MCP session on one instance, for one downstream session: log
 * level, subscriptions and roots are per session upstream as they are
 * downstream. Requests carry ids of our own, so several downstream requests
 * (and our own) never collide; responses come back as values, the protocol's
 * other traffic through `onServerMessage`.
 */
export class Upstream {
  private readonly transport: StreamableHTTPClientTransport;
  private readonly pending = new Map<RequestId, Pending>();
  private nextId = 0;
  private closedWith: string | null = null;
  onServerMessage: (message: JSONRPCRequest | JSONRPCNotification) => void = () => undefined;
  /** told once, when the session can no longer be used */
  onGone: (reason: string) => void = () => undefined;

  constructor(
    readonly server: string,
    readonly instance: Instance,
  ) {
    this.transport = new StreamableHTTPClientTransport(new URL(instance.endpoint.url), {
      requestInit: { headers: instance.endpoint.headers },
      fetch: (url, init) => this.fetchTracked(url, init),
      // the instance is ours and close: resumption would only delay telling the client it died
      reconnectionOptions: { maxReconnectionDelay: 1000, initialReconnectionDelay: 200, reconnectionDelayGrowFactor: 2, maxRetries: 0 },
    });
    this.transport.onmessage = (message) => this.receive(message);
    this.transport.onclose = () => this.gone('the upstream session closed');
    instance.sessions++;
    void instance.ended.then((exit) => this.gone(`the server instance stopped (${exit.reason})`));
  }

  get alive(): boolean {
    return this.closedWith === null;
  }

  async start(): Promise<void> {
    await this.transport.start();
  }

  setProtocolVersion(version: string): void {
    this.transport.setProtocolVersion(version);
  }

  /** Sends a request and resolves with its answer; never rejects. */
  request(method: string, params: Record<string, unknown> | undefined, signal?: AbortSignal): Promise<Answer> {
    if (this.closedWith) return Promise.resolve({ error: { code: UPSTREAM_GONE, message: this.closedWith } });
    const id = `a${++this.nextId}`;
    return new Promise<Answer>((resolve) => {
      const onAbort = (): void => {
        this.pending.delete(id);
        void this.notify('notifications/cancelled', { requestId: id, reason: String(signal?.reason ?? 'cancelled by the client') });
        resolve({ error: { code: -32800, message: 'Request cancelled' } });
      };
      this.pending.set(id, {
        resolve: (answer) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(answer);
        },
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      const message: JSONRPCRequest = { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) };
      this.transport.send(message).catch((error: unknown) => {
        this.instance.suspected = true;
        this.settle(id, { error: { code: UPSTREAM_GONE, message: `the server could not be reached: ${describe(error)}` } });
      });
    });
  }

  notify(method: string, params?: Record<string, unknown>): Promise<void> {
    if (this.closedWith) return Promise.resolve();
    return this.transport.send({ jsonrpc: '2.0', method, ...(params ? { params } : {}) } as JSONRPCNotification).catch(() => undefined);
  }

  /** The answer to a request the server sent us (sampling, elicitation, roots). */
  respond(id: RequestId, answer: Answer): Promise<void> {
    if (this.closedWith) return Promise.resolve();
    const message = 'error' in answer ? { jsonrpc: '2.0' as const, id, error: answer.error } : { jsonrpc: '2.0' as const, id, result: answer.result };
    return this.transport.send(message as JSONRPCMessage).catch(() => undefined);
  }

  /** Ends the upstream session (DELETE) and forgets it. */
  async close(): Promise<void> {
    if (this.closedWith) return;
    this.gone('closed');
    await this.transport.terminateSession().catch(() => undefined);
    await this.transport.close().catch(() => undefined);
  }

  private receive(message: JSONRPCMessage): void {
    if ('id' in message && !('method' in message)) {
      const answer: Answer = 'error' in message ? { error: message.error as RpcError } : { result: (message as { result: Record<string, unknown> }).result };
      this.settle(message.id as RequestId, answer);
      return;
    }
    this.onServerMessage(message as JSONRPCRequest | JSONRPCNotification);
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
    this.instance.sessions--;
    for (const [id] of this.pending) this.settle(id, { error: { code: UPSTREAM_GONE, message: reason } });
    this.onGone(reason);
    void this.transport.close().catch(() => undefined);
  }

  /**
   * The SDK's transport does not say when a POST's response stream ends
   * without the answer (the instance died mid-call): watch each one, so the
   * caller gets an error at once instead of waiting forever.
   */
  private fetchTracked(url: string | URL, init?: RequestInit): Promise<Response> {
    const ids = init?.method === 'POST' && typeof init.body === 'string' ? requestIds(init.body) : [];
    if (ids.length === 0) return httpFetch(url, init);
    const settleOrphans = (why: string): void => {
      // responses are delivered before the stream's end is seen; anything left was never answered
      setImmediate(() => {
        for (const id of ids) this.settle(id, { error: { code: UPSTREAM_GONE, message: why } });
      });
    };
    return httpFetch(url, init, {
      end: () => settleOrphans('the server ended the response without answering'),
      broke: (error) => {
        const why = `the connection to the server broke: ${describe(error)}`;
        settleOrphans(why);
        // the session is unusable; the instance may be dead: the next request reconnects and checks
        this.instance.suspected = true;
        setImmediate(() => this.gone(why));
      },
    });
  }
}

function requestIds(body: string): RequestId[] {
  try {
    const parsed = JSON.parse(body) as unknown;
    const list = Array.isArray(parsed) ? parsed : [parsed];
    return list.filter((m): m is JSONRPCRequest => typeof m === 'object' && m !== null && 'method' in m && 'id' in m).map((m) => m.id);
  } catch {
    return [];
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

