import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type ClientCapabilities,
  type ElicitRequest,
  ElicitRequestSchema,
  type ElicitResult,
  type ElicitationCompleteNotification,
  ElicitationCompleteNotificationSchema,
  McpError,
  ProgressNotification,
  ProgressNotificationSchema,
  Result,
  ResultSchema,
  type ServerCapabilities,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { ControlPlaneError, problemOf, unreachable } from './control-plane';
import type { Settings } from './settings';

/** Our hop never gives up first: the agent's client has its own timeout, and cancels through us. */
const REQUEST_TIMEOUT_MS = 60 * 60_000;

export interface PoolEvents {
  toolsChanged(): void;
  progress(params: ProgressNotification['params']): void;
  /** a server's question for the person at the agent's client (only when the agent declared elicitation) */
  elicit(params: ElicitRequest['params'], signal: AbortSignal): Promise<ElicitResult>;
  /** a URL-mode elicitation is done (the person finished at the page it named) */
  elicitationComplete(params: ElicitationCompleteNotification['params']): void;
}

/** The request that carries a client's sandbox policy (the shell-tool README), and what declares that it is taken. */
export const SANDBOX_STATE_METHOD = 'codex/sandbox-state/update';
export const SANDBOX_STATE_CAPABILITY = 'codex/sandbox-state';

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
  /** the client `current` resolved to */
  private live: Client | null = null;
  /** clients whose transport closed: not used again */
  private readonly closed = new WeakSet<Client>();
  /** what the agent's client can do that the pool may ask of it through us: elicitation, as it declared it */
  private mirrored: ClientCapabilities = {};
  /** the agent's last sandbox policy: a session opened again (the control plane forgot ours) gets it before anything runs */
  private sandboxState: Record<string, unknown> | undefined;

  constructor(
    private readonly settings: Settings,
    private readonly version: string,
    private readonly events: PoolEvents,
  ) {}

  /**
   * Declares to the pool what the agent's client declared that we pass on
   * (elicitation, with its modes), so a server asks only what the person at
   * that client can answer; before the first session opens.
   */
  mirror(agent: ClientCapabilities): void {
    this.mirrored = agent.elicitation ? { elicitation: agent.elicitation } : {};
  }

  /** What `/mcp/{ws}` offers this session, opening it if need be. */
  async serverCapabilities(): Promise<ServerCapabilities | undefined> {
    return (await this.client()).getServerCapabilities();
  }

  /** The agent's sandbox policy to the pool, remembered once the pool applied it (see open). */
  async updateSandboxState(params: Record<string, unknown> | undefined, signal: AbortSignal): Promise<Result> {
    const answer = await this.request(SANDBOX_STATE_METHOD, params, signal);
    this.sandboxState = params ?? {};
    return answer;
  }

  /** One request to the pool, its result verbatim (vendor keys, `_meta` and all). */
  async request(method: string, params: Record<string, unknown> | undefined, signal: AbortSignal): Promise<Result> {
    for (let attempt = 0; ; attempt++) {
      const client = await this.client();
      try {
        return await client.request({ method, params } as never, ResultSchema, { signal, timeout: REQUEST_TIMEOUT_MS });
      } catch (error) {
        // the control plane forgot the session (a restart, an eviction), or it ended while this request was on its way
        const gone =
          (error instanceof ControlPlaneError && error.code === 'MCP_SESSION_NOT_FOUND') || this.closed.has(client);
        if (attempt === 0 && gone) {
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
    if (this.live && this.closed.has(this.live)) this.forget(this.live);
    if (!this.current) {
      const opening = this.open();
      this.current = opening;
      opening.then(
        (client) => {
          if (this.current === opening) this.live = client;
        },
        // a failed attempt is not remembered: the next call tries again
        () => {
          if (this.current === opening) this.current = null;
        },
      );
    }
    return this.current;
  }

  private forget(client: Client): void {
    if (this.live === client) {
      this.live = null;
      this.current = null;
    }
    void client.close().catch(() => undefined);
  }

  private async open(): Promise<Client> {
    const url = new URL(`${this.settings.url}/mcp/${encodeURIComponent(this.settings.workspace)}`);
    const transport = new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { authorization: `Bearer ${this.settings.token}` } },
      fetch: refusing(),
    });
    const client = new Client({ name: 'aileron-mcp', version: this.version }, { capabilities: this.mirrored });
    // progress goes back to the agent under the token it chose, not the SDK's own
    client.setNotificationHandler(ProgressNotificationSchema, (notification) =>
      this.events.progress(notification.params),
    );
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.events.toolsChanged());
    if (this.mirrored.elicitation) {
      // the person at the agent's client answers, not us: the question and the answer pass through as they are
      client.setRequestHandler(ElicitRequestSchema, (request, extra) =>
        this.events.elicit(request.params, extra.signal),
      );
      client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) =>
        this.events.elicitationComplete(notification.params),
      );
    }
    client.onclose = () => {
      this.closed.add(client);
      if (this.live === client) {
        this.live = null;
        this.current = null;
      }
    };
    await client.connect(transport);
    if (this.sandboxState !== undefined) {
      // a new session would run commands within the sandbox's own bounds: it gets the agent's policy first, or is not used
      try {
        await client.request({ method: SANDBOX_STATE_METHOD, params: this.sandboxState } as never, ResultSchema, {
          timeout: REQUEST_TIMEOUT_MS,
        });
      } catch (error) {
        await client.close().catch(() => undefined);
        throw new RelayedError(
          error instanceof McpError ? error.code : -32603,
          `The control plane's session was opened again, and the sandbox policy this client gave could not be applied to it (${error instanceof Error ? error.message : String(error)}); nothing was run`,
        );
      }
    }
    return client;
  }
}
