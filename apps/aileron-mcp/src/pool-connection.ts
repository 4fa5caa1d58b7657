import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  McpError,
  ProgressNotification,
  ProgressNotificationSchema,
  Result,
  ResultSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { ControlPlaneError, problemOf, unreachable } from './control-plane';
import type { Settings } from './settings';

/** Our hop never gives up first: the agent's client has its own timeout, and cancels through us. */
const REQUEST_TIMEOUT_MS = 60 * 60_000;

export interface PoolEvents {
  toolsChanged(): void;
  progress(params: ProgressNotification['params']): void;
}

/** An upstream JSON-RPC error, passed on with the pool's code, message and data (no second "MCP error" prefix). */
export class RelayedError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RelayedError';
  }
}

/**
 * Turns the control plane's refusals (problem documents on POST and DELETE)
 * into ControlPlaneError, so the agent reads "SESSION_ENDED: …" and not the
 * transport's "Error POSTing to endpoint". The GET stream is left to the SDK,
 * which reads a 405 there as "no server-sent stream".
 */
function refusing(base: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    let response: Response;
    try {
      response = await base(url, init);
    } catch (error) {
      if (init?.signal?.aborted) throw error;
      throw unreachable(error);
    }
    if (response.ok || (init?.method ?? 'GET') === 'GET' || (response.status >= 300 && response.status < 400))
      return response;
    throw await problemOf(response);
  };
}

/**
 * The workspace's aggregate MCP endpoint, `/mcp/{ws}`, as the agent session's
 * one upstream MCP session, opened on first use and opened again if the control plane
 * forgot it (a restart, or idle eviction).
 */
export class PoolConnection {
  private current: Promise<Client> | null = null;

  constructor(
    private readonly settings: Settings,
    private readonly version: string,
    private readonly events: PoolEvents,
  ) {}

  /** One request to the pool, its result verbatim (vendor keys, `_meta` and all). */
  async request(
    method: 'tools/list' | 'tools/call',
    params: Record<string, unknown> | undefined,
    signal: AbortSignal,
  ): Promise<Result> {
    for (let attempt = 0; ; attempt++) {
      const client = await this.client();
      try {
        return await client.request({ method, params } as never, ResultSchema, { signal, timeout: REQUEST_TIMEOUT_MS });
      } catch (error) {
        if (attempt === 0 && error instanceof ControlPlaneError && error.code === 'MCP_SESSION_NOT_FOUND') {
          this.forget(client);
          continue;
        }
        if (error instanceof McpError)
          throw new RelayedError(error.code, error.message.replace(/^MCP error -?\d+: /, ''), error.data);
        throw error;
      }
    }
  }

  async close(): Promise<void> {
    const open = this.current;
    this.current = null;
    const client = await open?.catch(() => null);
    if (!client) return;
    // client.close() sends no DELETE: end the upstream session so the pool frees it now
    await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
    await client.close().catch(() => undefined);
  }

  private client(): Promise<Client> {
    if (!this.current) {
      const opening = this.open();
      this.current = opening;
      // a failed attempt is not remembered: the next call tries again
      opening.catch(() => {
        if (this.current === opening) this.current = null;
      });
    }
    return this.current;
  }

  private forget(client: Client): void {
    void this.current?.then((c) => {
      if (c === client) this.current = null;
    });
    void client.close().catch(() => undefined);
  }

  private async open(): Promise<Client> {
    const url = new URL(`${this.settings.url}/mcp/${encodeURIComponent(this.settings.workspace)}`);
    const transport = new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { authorization: `Bearer ${this.settings.token}` } },
      fetch: refusing(),
    });
    const client = new Client({ name: 'aileron-mcp', version: this.version }, { capabilities: {} });
    // progress goes back to the agent under the token it chose, not the SDK's own
    client.setNotificationHandler(ProgressNotificationSchema, (notification) =>
      this.events.progress(notification.params),
    );
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.events.toolsChanged());
    client.onclose = () => {
      void this.current?.then(
        (c) => {
          if (c === client) this.current = null;
        },
        () => undefined,
      );
    };
    await client.connect(transport);
    return client;
  }
}
