import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type {
  JSONRPCMessage,
  JSONRPCNotification,
  JSONRPCRequest,
  RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '@aileron/auth';
import type { Clock } from '@aileron/clock';
import type { NamespacedServer } from '@aileron/catalog';
import type { CallPrincipal } from '@aileron/policy';
import { ConnectionUnavailableError, type UpstreamBearer } from '@aileron/connections';
import { databaseUnavailableReason, isUnstorableText, UNSTORABLE_TEXT_DETAIL } from '@aileron/database';
import { DomainError, toolError } from '@aileron/errors';
import { EXECUTION_NAME_MAX, nestsDeeperThan, RECORD_DEPTH_MAX } from '@aileron/audit';
import type { Instance } from '../pool-instances.service';
import { DIRECT_ANSWERS, NodeStreamableHttpTransport } from '../node-streamable-http-transport';
import { INSTANCE_BUSY, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError, UPSTREAM_UNAVAILABLE } from './jsonrpc';
import { Namespacing } from './namespacing';
import { BoundedEventStore } from './bounded-event-store';
import { openUpstream } from './shared-upstream';
import { Cancellation } from './cancellation';
import { type Answer, connectionError, type UpstreamSession as UpstreamLink } from './upstream';

/** Who is calling, as the policy, approvals and audit see it. */
export interface CallContext {
  organizationId: string;
  workspaceId: string;
  workspaceSlug: string;
  /** `token:<id>`, `user:<id>`, `gateway:<id>`: a session belongs to whoever opened it */
  requester: string;
  /** the policy's view of the caller */
  principal: CallPrincipal;
  /** set when the caller is an enrolled gateway: its approvals are bound to it */
  gatewayId: string | null;
  /** the authenticated caller, for services that check access themselves (approval waits) */
  caller: Principal;
  /** the MCP session */
  mcpSessionId: string;
  /** the agent session whose caveat token opened the MCP session, if one did */
  agentSessionId: string | null;
}

export interface ToolCall {
  server: string;
  tool: string;
  arguments: Record<string, unknown>;
}

/** Policy, approvals, pinning and audit: what the proxy asks about calls it forwards. */
export interface CallGate {
  /**
   * whether this caller may reach a server at all (a session token's
   * `servers` caveat): one it may not is never opened, listed or forwarded to,
   * for tools, resources, prompts and completions alike
   */
  reaches(ctx: CallContext, server: string): boolean;
  /** which of a server's tools this caller may see (and so call) */
  listFilter(ctx: CallContext, server: string): Promise<(tool: string) => boolean>;
  /** tools whose definition changed from the pinned one and are held back; records the change */
  observeTools(
    ctx: CallContext,
    server: string,
    version: string,
    tools: Record<string, unknown>[],
  ): Promise<ReadonlySet<string>>;
  /**
   * Policy and approval: `run` to forward (with the approval it consumed, if
   * any) or the tool result to answer with instead.
   */
  authorize(
    ctx: CallContext,
    call: ToolCall,
    wait: { signal: AbortSignal; progress?: (message: string) => void },
  ): Promise<{ run: true; approvalId: string | null } | { run: false; result: Record<string, unknown> }>;
  /** audit: the call starts now; the returned function records how it ended */
  started(ctx: CallContext, call: ToolCall, instance: Instance, approvalId: string | null): (answer: Answer) => void;
}

/** How a session reaches instances; the pool's instance manager in production. */
export interface InstanceSource {
  /** what `/mcp/{ws}` aggregates, with each server's tool prefix */
  servers(): Promise<NamespacedServer[]>;
  acquire(server: string): Promise<Instance>;
  /** for an upstream that signs in with OAuth: the token of the connection this session's caller uses */
  bearer?(server: string, instance: Instance): UpstreamBearer | undefined;
  /** resolves true once the connection this session's caller uses for `server` can be used, false after `ms` */
  awaitConnection?(server: string, ms: number, signal: AbortSignal): Promise<boolean>;
}

interface ClientRequest {
  cancel: Cancellation;
  server: string | null;
  /** performance.now(): only which request came later is read */
  startedAt: number;
  /** answers the client now, before the handler returns; the answer it returns later is then not sent again */
  answerNow?: (answer: Answer) => void;
}

/** an upstream session whose server messages say which of our client's requests they came with */
type UpstreamSession = UpstreamLink<ClientRequest>;

/**
 * Experimental capabilities `/mcp/{ws}` declares when a server behind it
 * does, with the requests that go to every such server: a client's
 * `codex/sandbox-state/update` (its sandbox policy) reaches each server that
 * runs commands for it (the sandbox tools, a shell server of the catalog),
 * and is answered once all of them have applied it.
 */
const PASSED_ON_EXPERIMENTAL: Readonly<Record<string, readonly string[]>> = {
  'codex/sandbox-state': ['codex/sandbox-state/update'],
};

const MAX_QUEUED = 200;
const MAX_LIST_PAGES = 20;

/**
 * One downstream MCP session: a Streamable HTTP server transport facing the
 * client and one upstream session per server it reaches (its own, or its share
 * of one, see shared-upstream.ts). Messages pass as
 * JSON-RPC without being re-modelled, so fields the SDK does not know survive;
 * the proxy steps in only where it must: names (aggregate endpoint), policy on
 * tools, approvals, pinning, audit, and ids where several parties meet.
 */
export class McpSession {
  readonly front: NodeStreamableHttpTransport;
  readonly names: Namespacing;
  /**
   * the Clock's time the client was last heard from, which the idle sweep compares: a server's own
   * notifications (some send them every few seconds) must not keep a session its client left alive
   */
  lastActivity: number;
  private readonly clock: Clock;
  private readonly connectWaitMs: number;
  /** requests of our own to the client (a URL elicitation), by our id: their answers come back here */
  private readonly ownRequests = new Map<string, (answer: Answer) => void>();
  private readonly upstreams = new Map<string, UpstreamSession>();
  private readonly connecting = new Map<string, Promise<UpstreamSession>>();
  private initParams: Record<string, unknown> | null = null;
  private protocolVersion: string | null = null;
  private readonly clientRequests = new Map<RequestId, ClientRequest>();
  /** our id for a request a server sent → that server's session and its own id */
  private readonly serverRequests = new Map<string, { upstream: UpstreamSession; id: RequestId }>();
  /** progress tokens the client gave → its request, so progress reaches the right stream */
  private readonly progressTokens = new Map<string | number, RequestId>();
  private readonly waitingForStream: JSONRPCMessage[] = [];
  private getStreams = 0;
  private nextServerRequest = 0;
  private closed = false;
  /** the client sent `initialized`: sessions opened later (reconnects) repeat it upstream */
  private clientInitialized = false;
  ctx!: CallContext;
  onClosed: () => void = () => undefined;
  onSessionId: (id: string) => void = () => undefined;

  constructor(
    private readonly endpoint: { server: string } | { aggregate: true },
    private readonly source: InstanceSource,
    private readonly gate: CallGate,
    identity: Omit<CallContext, 'mcpSessionId'>,
    options: {
      allowedOrigins?: string[];
      clock: Clock;
      /** how long a call waits for its person to connect an OAuth upstream after a URL elicitation; 0: never elicits */
      connectWaitMs?: number;
    },
  ) {
    this.clock = options.clock;
    this.connectWaitMs = options.connectWaitMs ?? 0;
    this.lastActivity = this.clock.now();
    this.names = new Namespacing('aggregate' in endpoint);
    this.front = new NodeStreamableHttpTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new BoundedEventStore(),
      directAnswers: DIRECT_ANSWERS,
      onsessioninitialized: (sessionId) => {
        this.ctx = { ...identity, mcpSessionId: sessionId, principal: { ...identity.principal, session: sessionId } };
        this.onSessionId(sessionId);
      },
      onsessionclosed: () => void this.close(),
      ...(options.allowedOrigins ? { allowedOrigins: options.allowedOrigins } : {}),
    });
    // the transport knows the id only once it answers initialize; requests need it earlier
    this.ctx = { ...identity, mcpSessionId: '' };
    this.front.onmessage = (message) => this.fromClient(message);
    this.front.onclose = () => void this.close();
  }

  get sessionId(): string | undefined {
    return this.front.sessionId;
  }

  /** A request in flight or a client listening on its stream: not idle, however quiet. */
  get busy(): boolean {
    return this.clientRequests.size > 0 || this.getStreams > 0;
  }

  /** The HTTP exchange for this session; a GET opens the stream for messages not tied to a request. */
  async handle(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    this.lastActivity = this.clock.now();
    if (req.method === 'GET') {
      this.getStreams++;
      res.once('close', () => this.getStreams--);
      // the transport registers the stream synchronously within handleRequest; flush after it
      setImmediate(() => this.flushWaiting());
    }
    await this.front.handleRequest(req, res, body);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const request of this.clientRequests.values()) request.cancel.abort('session closed');
    await Promise.all([...this.upstreams.values()].map((u) => u.close()));
    await this.front.close().catch(() => undefined);
    this.onClosed();
  }

  // ── client → proxy ──────────────────────────────────────────────────────

  private fromClient(message: JSONRPCMessage): void {
    this.lastActivity = this.clock.now();
    if ('method' in message && 'id' in message) {
      void this.onRequest(message as JSONRPCRequest);
    } else if ('method' in message) {
      void this.onNotification(message as JSONRPCNotification);
    } else if ('id' in message) {
      const answer: Answer =
        'error' in message
          ? { error: message.error as RpcError }
          : { result: (message as { result: Record<string, unknown> }).result };
      const own = this.ownRequests.get(String(message.id));
      if (own) {
        this.ownRequests.delete(String(message.id));
        own(answer);
        return;
      }
      // the client's answer to a request a server sent (sampling, elicitation, roots)
      const route = this.serverRequests.get(String(message.id));
      if (!route) return;
      this.serverRequests.delete(String(message.id));
      void route.upstream.respond(route.id, answer);
    }
  }

  private async onRequest(request: JSONRPCRequest): Promise<void> {
    const cancel = new Cancellation();
    const entry: ClientRequest = { cancel, server: null, startedAt: performance.now() };
    this.clientRequests.set(request.id, entry);
    const token = (request.params?._meta as { progressToken?: string | number } | undefined)?.progressToken;
    if (token !== undefined) this.progressTokens.set(token, request.id);
    let answered = false;
    const reply = (answer: Answer): Promise<void> => {
      answered = true;
      const message =
        'error' in answer
          ? { jsonrpc: '2.0' as const, id: request.id, error: answer.error }
          : { jsonrpc: '2.0' as const, id: request.id, result: answer.result };
      return this.front.send(message as JSONRPCMessage).catch(() => undefined);
    };
    entry.answerNow = (answer) => {
      if (!answered && !cancel.aborted) void reply(answer);
    };
    let answer: Answer;
    try {
      answer = await this.dispatch(request, entry);
    } catch (error) {
      answer = { error: toRpcError(error) };
    } finally {
      this.clientRequests.delete(request.id);
      if (token !== undefined) this.progressTokens.delete(token);
    }
    if (answered) return;
    if (cancel.aborted && !this.closed) return; // cancelled: the client expects no answer
    await reply(answer);
  }

  private async onNotification(notification: JSONRPCNotification): Promise<void> {
    const params = notification.params ?? {};
    switch (notification.method) {
      case 'notifications/cancelled': {
        const request = this.clientRequests.get((params as { requestId: RequestId }).requestId);
        request?.cancel.abort((params as { reason?: string }).reason ?? 'cancelled by the client');
        return;
      }
      case 'notifications/initialized':
        this.clientInitialized = true;
        await Promise.all(
          [...this.upstreams.values()].map((u) =>
            u.notify(notification.method, notification.params as Record<string, unknown> | undefined),
          ),
        );
        return;
      default:
        // roots/list_changed, progress of a server's request: every upstream hears it
        await Promise.all(
          [...this.upstreams.values()].map((u) =>
            u.notify(notification.method, notification.params as Record<string, unknown> | undefined),
          ),
        );
    }
  }

  private async dispatch(request: JSONRPCRequest, entry: ClientRequest): Promise<Answer> {
    const params = (request.params ?? {}) as Record<string, unknown>;
    const cancel = entry.cancel;
    switch (request.method) {
      case 'initialize':
        return this.initialize(params);
      case 'ping':
        return { result: {} };
      case 'tools/list':
        return this.listTools(cancel);
      case 'tools/call':
        return this.callTool(params, entry);
      case 'prompts/list':
        return this.fanOutList(
          'prompts/list',
          'prompts',
          (server, prompt) => ({ ...prompt, name: this.names.promptName(server, String(prompt.name)) }),
          cancel,
          (pairs) => this.names.setPrompts(pairs),
        );
      case 'resources/list':
        return this.fanOutList(
          'resources/list',
          'resources',
          (server, resource) => ({ ...resource, uri: this.names.uri(server, String(resource.uri)) }),
          cancel,
        );
      case 'resources/templates/list':
        return this.fanOutList(
          'resources/templates/list',
          'resourceTemplates',
          (server, template) => ({ ...template, uriTemplate: this.names.uri(server, String(template.uriTemplate)) }),
          cancel,
        );
      case 'prompts/get': {
        const target = this.names.resolvePrompt(String(params.name ?? ''), this.single);
        if (!target) return unknownName('prompt', params.name);
        return this.forward(target.server, request.method, { ...params, name: target.name }, entry);
      }
      case 'resources/read':
      case 'resources/subscribe':
      case 'resources/unsubscribe': {
        const target = this.names.resolveUri(String(params.uri ?? ''), this.single);
        if (!target) return unknownName('resource', params.uri);
        return this.forward(target.server, request.method, { ...params, uri: target.uri }, entry);
      }
      case 'completion/complete': {
        const ref = (params.ref ?? {}) as Record<string, unknown>;
        const target =
          ref.type === 'ref/prompt'
            ? this.names.resolvePrompt(String(ref.name ?? ''), this.single)
            : this.names.resolveUri(String(ref.uri ?? ''), this.single);
        if (!target) return unknownName('completion reference', ref.name ?? ref.uri);
        const inner = 'name' in target ? { ...ref, name: target.name } : { ...ref, uri: target.uri };
        return this.forward(target.server, request.method, { ...params, ref: inner }, entry);
      }
      case 'logging/setLevel':
        await Promise.all((await this.connected()).map((u) => u.request('logging/setLevel', params, cancel)));
        return { result: {} };
      default:
        if (!('aggregate' in this.endpoint)) return this.forward(this.single, request.method, params, entry);
        if (this.passedOnTo(request.method).length > 0) return this.passOn(request.method, params, entry);
        return { error: { code: METHOD_NOT_FOUND, message: `Method not found: ${request.method}` } };
    }
  }

  private get single(): string {
    return 'server' in this.endpoint ? this.endpoint.server : '';
  }

  private async initialize(params: Record<string, unknown>): Promise<Answer> {
    this.initParams = params;
    this.protocolVersion = typeof params.protocolVersion === 'string' ? params.protocolVersion : null;
    // the servers this caller may not reach stay out of the aggregate (and out of every list and read after it)
    let servers = [this.single];
    if ('aggregate' in this.endpoint) {
      const all = await this.source.servers();
      for (const server of all) this.knownServers.add(server.name);
      // every server of the workspace counts, reachable or not: a tool's name does not depend on who asks
      this.names.setServers(all);
      servers = all.map((server) => server.name).filter((server) => this.gate.reaches(this.ctx, server));
    }
    const results = await Promise.all(
      servers.map((server) =>
        this.upstream(server).then(
          (u) => ({ server, upstream: u, error: null }),
          (error: unknown) => ({ server, upstream: null, error: toRpcError(error) }),
        ),
      ),
    );
    if ('server' in this.endpoint) {
      const only = results[0]!;
      if (only.error) return { error: only.error };
      return { result: this.initResults.get(only.server)! };
    }
    const up = results.filter((r) => r.upstream);
    const capabilities: Record<string, Record<string, unknown>> = { tools: { listChanged: true }, logging: {} };
    const instructions: string[] = [];
    for (const { server } of up) {
      const result = this.initResults.get(server)!;
      const caps = (result.capabilities ?? {}) as Record<string, Record<string, unknown> | undefined>;
      for (const name of ['prompts', 'resources', 'completions'] as const) {
        if (caps[name]) capabilities[name] = { ...(capabilities[name] ?? {}), ...caps[name] };
      }
      for (const name of Object.keys(PASSED_ON_EXPERIMENTAL)) {
        const declared = caps.experimental?.[name];
        // the first server's version stands for all: the request is passed on as the client sent it
        if (declared && !capabilities.experimental?.[name])
          capabilities.experimental = { ...(capabilities.experimental ?? {}), [name]: declared };
      }
      if (typeof result.instructions === 'string') instructions.push(`## ${server}\n${result.instructions}`);
    }
    const failed = results.filter((r) => r.error).map((r) => `${r.server}: ${r.error!.message}`);
    if (failed.length > 0) instructions.push(`Unavailable now: ${failed.join('; ')}`);
    return {
      result: {
        protocolVersion:
          this.initResults.get(up[0]?.server ?? '')?.protocolVersion ?? this.protocolVersion ?? '2025-06-18',
        capabilities,
        serverInfo: { name: 'aileron', title: `Aileron workspace ${this.ctx.workspaceSlug}`, version: '0.1.0' },
        ...(instructions.length > 0 ? { instructions: instructions.join('\n\n') } : {}),
      },
    };
  }

  private readonly initResults = new Map<string, Record<string, unknown>>();
  /** the servers behind the aggregate, opened or not */
  private readonly knownServers = new Set<string>();
  /** the last of each passed-on request every server applied: given again to a server's new session */
  private readonly passedOnState = new Map<string, Record<string, unknown>>();

  /** The servers behind the aggregate that declared the experimental capability this request belongs to. */
  private passedOnTo(method: string): string[] {
    const capability = Object.keys(PASSED_ON_EXPERIMENTAL).find((name) =>
      PASSED_ON_EXPERIMENTAL[name]!.includes(method),
    );
    if (!capability) return [];
    return [...this.initResults]
      .filter(([, result]) => {
        const experimental = (result.capabilities as { experimental?: Record<string, unknown> } | undefined)
          ?.experimental;
        return experimental?.[capability] !== undefined;
      })
      .map(([server]) => server);
  }

  /**
   * The request to each server that declared its capability, at once;
   * answered when every one has (their `_meta` together), or with the first
   * error, so a client that waits for the answer knows each server applied it.
   */
  private async passOn(method: string, params: Record<string, unknown>, entry: ClientRequest): Promise<Answer> {
    const answers = await Promise.all(
      this.passedOnTo(method).map((server) => this.forward(server, method, params, entry)),
    );
    const failed = answers.find((answer): answer is { error: RpcError } => 'error' in answer);
    if (failed) return failed;
    this.passedOnState.set(method, params);
    const meta = Object.assign(
      {},
      ...answers.map((answer) => ('result' in answer ? (answer.result._meta as object | undefined) : undefined)),
    ) as Record<string, unknown>;
    return { result: Object.keys(meta).length > 0 ? { _meta: meta } : {} };
  }

  /**
   * The live upstream session for a server, opened (or reopened after the
   * instance died) on demand with the client's own initialize parameters.
   */
  private upstream(server: string): Promise<UpstreamSession> {
    const existing = this.upstreams.get(server);
    if (existing?.alive) return Promise.resolve(existing);
    let pending = this.connecting.get(server);
    if (!pending) {
      pending = this.connect(server).finally(() => this.connecting.delete(server));
      this.connecting.set(server, pending);
    }
    return pending;
  }

  private async connect(server: string): Promise<UpstreamSession> {
    if (!this.initParams) throw rpcError(INVALID_PARAMS, 'The session is not initialized');
    if (!this.gate.reaches(this.ctx, server)) throw unreachable(server);
    const instance = await this.source.acquire(server);
    const bearer = this.source.bearer?.(server, instance);
    // no connection to sign in with: said now, with who must connect and where, before anything is sent
    if (bearer) await bearer.authorization();
    // its own, or its share of the workspace's one (`sessions: shared`)
    const upstream = openUpstream<ClientRequest>(server, instance, this.initParams, bearer);
    upstream.onServerMessage = (message, on) => this.fromServer(upstream, message, on);
    upstream.onGone = () => {
      if (this.upstreams.get(server) === upstream) this.upstreams.delete(server);
    };
    await upstream.start();
    const answer = await upstream.request('initialize', this.initParams);
    if ('error' in answer) {
      await upstream.close();
      if (connectionCodeOf(answer.error)) throw Object.assign(new Error(answer.error.message), { rpc: answer.error });
      throw rpcError(UPSTREAM_UNAVAILABLE, `${server} refused to initialize: ${answer.error.message}`);
    }
    const version = answer.result.protocolVersion;
    if (typeof version === 'string') upstream.setProtocolVersion(version);
    this.initResults.set(server, answer.result);
    this.upstreams.set(server, upstream);
    // a reconnect happens after the client's own `initialized`: repeat it for the new session
    if (this.clientInitialized) await upstream.notify('notifications/initialized');
    // and what the client asked of every such server (its sandbox policy): a new session without it would run wider
    for (const [method, params] of this.passedOnState) {
      if (!this.passedOnTo(method).includes(server)) continue;
      const applied = await upstream.request(method, params);
      if ('error' in applied) {
        this.upstreams.delete(server);
        await upstream.close();
        throw rpcError(
          UPSTREAM_UNAVAILABLE,
          `${server} refused the client's ${method} in its new session: ${applied.error.message}`,
        );
      }
    }
    return upstream;
  }

  private async connected(): Promise<UpstreamSession[]> {
    const servers = 'server' in this.endpoint ? [this.endpoint.server] : [...this.initResults.keys()];
    const all = await Promise.all(servers.map((s) => this.upstream(s).catch(() => null)));
    return all.filter((u): u is UpstreamSession => u !== null);
  }

  private async forward(
    server: string,
    method: string,
    params: Record<string, unknown>,
    entry: ClientRequest,
  ): Promise<Answer> {
    if (!this.gate.reaches(this.ctx, server)) return { error: unreachable(server).rpc };
    if (!this.initResults.has(server)) return unknownName('server', server);
    const upstream = await this.upstream(server);
    entry.server = server;
    if (!upstream.instance.enter()) return busy(upstream.instance);
    try {
      return await upstream.request(method, params, entry.cancel, entry);
    } finally {
      upstream.instance.leave();
    }
  }

  // ── tools: policy, pinning, approvals, audit ────────────────────────────

  private async listTools(cancel: Cancellation): Promise<Answer> {
    const servers = await this.connected();
    const lists = await Promise.all(
      servers.map(async (upstream) => {
        const tools = await this.allPages(upstream, 'tools/list', 'tools', cancel);
        if ('error' in tools) return { upstream, tools: [], error: tools.error };
        const [visible, held] = await Promise.all([
          this.gate.listFilter(this.ctx, upstream.server),
          this.gate.observeTools(this.ctx, upstream.server, upstream.instance.version, tools.items),
        ]);
        return {
          upstream,
          tools: tools.items.filter((t) => visible(String(t.name)) && !held.has(String(t.name))),
          error: null,
        };
      }),
    );
    if ('server' in this.endpoint && lists[0]?.error) return { error: lists[0].error };
    this.names.setTools(
      lists.flatMap(({ upstream, tools }) => tools.map((t) => ({ server: upstream.server, tool: String(t.name) }))),
    );
    return {
      result: {
        tools: lists.flatMap(({ upstream, tools }) =>
          tools.map((t) => ({ ...t, name: this.names.toolName(upstream.server, String(t.name)) })),
        ),
      },
    };
  }

  private async callTool(params: Record<string, unknown>, entry: ClientRequest, retry = true): Promise<Answer> {
    const target = this.names.resolveTool(String(params.name ?? ''), this.single);
    // a server that could not be opened at initialize (no OAuth connection yet) is tried again: its person may have connected since
    if (target && !this.initResults.has(target.server) && this.gate.reaches(this.ctx, target.server)) {
      const late = await this.lateConnect(target.server, target.name, entry.cancel);
      if (late && 'error' in late && connectionCodeOf(late.error))
        return this.withoutConnection(late.error, target.server, params, entry, retry);
      if (late) return late;
    }
    // a server the caller may not reach was never opened: the gate refuses the call below, as a tool result saying why
    if (!target || (!this.initResults.has(target.server) && this.gate.reaches(this.ctx, target.server))) {
      const instead = this.names.namespaceInstead(String(params.name ?? ''));
      return unknownName(
        'tool',
        params.name,
        instead && `the tools of ${instead.server} are named ${instead.namespace}__<tool> (its tool_prefix)`,
      );
    }
    const args = (params.arguments ?? {}) as Record<string, unknown>;
    if (typeof args !== 'object' || Array.isArray(args))
      return { error: { code: INVALID_PARAMS, message: 'arguments must be an object' } };
    // what the audit log, approvals and policy keep of the call must be able to hold its name
    if (target.name.length > EXECUTION_NAME_MAX)
      return {
        error: {
          code: INVALID_PARAMS,
          message: `A tool name is at most ${EXECUTION_NAME_MAX} characters; this one has ${target.name.length}`,
        },
      };
    if (target.name.includes('\u0000'))
      return { error: { code: INVALID_PARAMS, message: 'A tool name may not contain NUL (\\u0000)' } };
    // the record holds the arguments one level down, in its data
    if (nestsDeeperThan(args, RECORD_DEPTH_MAX - 1))
      return {
        error: { code: INVALID_PARAMS, message: `The arguments nest deeper than ${RECORD_DEPTH_MAX - 1} levels` },
      };
    const call: ToolCall = { server: target.server, tool: target.name, arguments: args };
    const token = (params._meta as { progressToken?: string | number } | undefined)?.progressToken;
    let step = 0;
    const progress =
      token === undefined
        ? undefined
        : (message: string) =>
            void this.toClient(
              {
                jsonrpc: '2.0',
                method: 'notifications/progress',
                params: { progressToken: token, progress: ++step, message },
              },
              entry,
            );
    const cancel = entry.cancel;
    const verdict = await this.gate.authorize(this.ctx, call, {
      // made only for a call that waits for a person: most never do (cancellation.ts)
      get signal() {
        return cancel.signal;
      },
      ...(progress ? { progress } : {}),
    });
    if (!verdict.run) return { result: verdict.result };
    const upstream = await this.upstream(target.server);
    entry.server = target.server;
    if (!upstream.instance.enter()) return busy(upstream.instance);
    let finished: (answer: Answer) => void;
    try {
      finished = this.gate.started(this.ctx, call, upstream.instance, verdict.approvalId);
    } catch (error) {
      // not journaled, so not forwarded; and the call no longer counts against the instance's limit
      upstream.instance.leave();
      throw error;
    }
    let ended = false;
    let unrecorded: { error: unknown } | undefined;
    const end = (answer: Answer): void => {
      if (ended) return;
      ended = true;
      upstream.instance.leave();
      try {
        // recorded before the client has the answer: a crash right after it must not lose the record (journal-crash.test.ts)
        finished(answer);
      } catch (error) {
        // not recorded (the journal cannot be written): the client hears that, never an answer the audit log lacks
        unrecorded = { error };
        return;
      }
      if (!('error' in answer && connectionCodeOf(answer.error))) entry.answerNow?.(answer);
    };
    let answer: Answer;
    try {
      // `end` hears the answer as it arrives: sent back from there, it leaves before the rest of the instance's
      // response is read and before the answer has come back up through the awaits to here (docs/pool.md § Performance)
      answer = await upstream.request('tools/call', { ...params, name: target.name }, entry.cancel, entry, end);
    } catch (error) {
      // never, by its contract; should it, the call still ends, recorded as failed
      answer = { error: toRpcError(error) };
    }
    end(answer);
    if (unrecorded) throw unrecorded.error;
    // no token for the call (a connection refused or never made): a tool result the model can tell its person about
    if ('error' in answer && connectionCodeOf(answer.error))
      return this.withoutConnection(answer.error, target.server, params, entry, retry);
    return answer;
  }

  /**
   * A call whose upstream has no connection it can use. A client that can
   * show a URL (URL elicitation) is asked to send its person to the connect
   * URL; once they took it, the call waits for the connection and runs (once).
   * Otherwise, or when the person declines or takes too long, the answer is a
   * tool error saying who must connect and where.
   */
  private async withoutConnection(
    error: RpcError,
    server: string,
    params: Record<string, unknown>,
    entry: ClientRequest,
    retry: boolean,
  ): Promise<Answer> {
    const refusal = { result: connectionToolError(error) };
    const data = error.data as { code: string; connect_url?: string };
    const elicits = (this.initParams?.capabilities as { elicitation?: { url?: unknown } } | undefined)?.elicitation
      ?.url;
    if (
      !retry ||
      elicits === undefined ||
      this.connectWaitMs <= 0 ||
      !this.source.awaitConnection ||
      !data.connect_url ||
      (data.code !== 'CONNECTION_REQUIRED' && data.code !== 'CONNECTION_NEEDS_RECONNECT')
    )
      return refusal;
    const cancel = entry.cancel;
    const elicitationId = randomUUID();
    const asked = await this.askClient(
      'elicitation/create',
      { mode: 'url', elicitationId, url: data.connect_url, message: error.message },
      entry,
      this.connectWaitMs,
    );
    if (!('result' in asked) || asked.result.action !== 'accept') return refusal;
    if (!(await this.source.awaitConnection(server, this.connectWaitMs, cancel.signal)) || cancel.aborted)
      return refusal;
    void this.toClient({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId } });
    return this.callTool(params, entry, false);
  }

  /** A request of ours to the client, on the stream of the call it is for; its answer, or an error after `ms`. */
  private askClient(
    method: string,
    params: Record<string, unknown>,
    entry: ClientRequest,
    ms: number,
  ): Promise<Answer> {
    const id = `s${++this.nextServerRequest}`;
    return new Promise<Answer>((resolve) => {
      const done = (answer: Answer): void => {
        clearTimeout(timer);
        stopListening();
        this.ownRequests.delete(id);
        resolve(answer);
      };
      const timer = setTimeout(() => done({ error: { code: -32001, message: 'The client did not answer' } }), ms);
      const stopListening = entry.cancel.onAbort(() => done({ error: { code: -32800, message: 'Request cancelled' } }));
      this.ownRequests.set(id, done);
      void this.toClient({ jsonrpc: '2.0', id, method, params }, entry);
    });
  }

  /**
   * A server of the workspace that initialize could not open, opened now for
   * a call of its tool. When it still cannot be (no connection to sign in
   * with), the answer is the error saying who must connect and where; once it can, its
   * tools are listed as tools/list would (policy and pinned definitions
   * apply) and the client is told the list changed. Undefined: go on with the
   * call (now opened), or leave it to the unknown-tool answer.
   */
  private async lateConnect(server: string, tool: string, cancel: Cancellation): Promise<Answer | undefined> {
    if (!this.knownServers.has(server)) return undefined;
    let upstream: UpstreamSession;
    try {
      upstream = await this.upstream(server);
    } catch (error) {
      const rpc = toRpcError(error);
      return connectionCodeOf(rpc) ? { error: rpc } : undefined;
    }
    const tools = await this.allPages(upstream, 'tools/list', 'tools', cancel);
    if ('error' in tools) return undefined;
    const [visible, held] = await Promise.all([
      this.gate.listFilter(this.ctx, server),
      this.gate.observeTools(this.ctx, server, upstream.instance.version, tools.items),
    ]);
    const listed = tools.items.filter((t) => visible(String(t.name)) && !held.has(String(t.name)));
    this.names.addTools(listed.map((t) => ({ server, tool: String(t.name) })));
    void this.toClient({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    return listed.some((t) => t.name === tool) ? undefined : unknownName('tool', tool);
  }

  private async allPages(
    upstream: UpstreamSession,
    method: string,
    key: string,
    cancel: Cancellation,
  ): Promise<{ items: Record<string, unknown>[] } | { error: RpcError }> {
    const items: Record<string, unknown>[] = [];
    let cursor: unknown;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const answer = await upstream.request(method, cursor === undefined ? undefined : { cursor }, cancel);
      if ('error' in answer) return page === 0 ? answer : { items };
      items.push(...((answer.result[key] as Record<string, unknown>[] | undefined) ?? []));
      cursor = answer.result.nextCursor;
      if (typeof cursor !== 'string') break;
    }
    return { items };
  }

  private async fanOutList(
    method: string,
    key: string,
    rename: (server: string, item: Record<string, unknown>) => Record<string, unknown>,
    cancel: Cancellation,
    remember?: (pairs: { server: string; tool: string }[]) => void,
  ): Promise<Answer> {
    const servers = await this.connected();
    const lists = await Promise.all(
      servers.map(async (u) => ({ server: u.server, list: await this.allPages(u, method, key, cancel) })),
    );
    if ('server' in this.endpoint && lists[0] && 'error' in lists[0].list) return { error: lists[0].list.error };
    const ok = lists.flatMap(({ server, list }) =>
      'items' in list ? list.items.map((item) => ({ server, item })) : [],
    );
    remember?.(ok.map(({ server, item }) => ({ server, tool: String(item.name) })));
    return { result: { [key]: ok.map(({ server, item }) => rename(server, item)) } };
  }

  // ── server → client ─────────────────────────────────────────────────────

  /** `on`: the client's request this came with, when the server sent it on that request's stream */
  private fromServer(
    upstream: UpstreamSession,
    message: JSONRPCRequest | JSONRPCNotification,
    on?: ClientRequest,
  ): void {
    if ('id' in message) {
      // ids from several servers meet here: the client sees ours
      const id = `s${++this.nextServerRequest}`;
      this.serverRequests.set(id, { upstream, id: message.id });
      void this.toClient({ ...message, id }, on ?? this.latestRequestTo(upstream.server));
      return;
    }
    const params = (message.params ?? {}) as Record<string, unknown>;
    switch (message.method) {
      case 'notifications/progress': {
        const request = this.progressTokens.get(params.progressToken as string | number);
        // a server that ignores cancellation keeps reporting; tokens of ended requests are invalid for the client
        if (request === undefined) return;
        void this.toClient(message, this.clientRequests.get(request));
        return;
      }
      case 'notifications/resources/updated':
        void this.toClient({
          ...message,
          params: { ...params, uri: this.names.uri(upstream.server, String(params.uri)) },
        });
        return;
      case 'notifications/cancelled': {
        // a server withdrew its own request: the client knows it by our id
        const ours = [...this.serverRequests].find(
          ([, route]) => route.upstream === upstream && route.id === params.requestId,
        )?.[0];
        if (ours) {
          this.serverRequests.delete(ours);
          void this.toClient({ ...message, params: { ...params, requestId: ours } });
        }
        return;
      }
      case 'notifications/message':
        void this.toClient(message, on ?? this.latestRequestTo(upstream.server));
        return;
      default:
        // list_changed and anything newer: not tied to a request
        void this.toClient(message);
    }
  }

  /**
   * A server that sends a sampling request or log line on its GET stream (or
   * over stdio) does not say which call it belongs to; the most recent open
   * request to that server is the best guess, and exact when there is one.
   */
  private latestRequestTo(server: string): ClientRequest | undefined {
    let latest: ClientRequest | undefined;
    for (const request of this.clientRequests.values()) {
      if (request.server === server && (!latest || request.startedAt >= latest.startedAt)) latest = request;
    }
    return latest;
  }

  private async toClient(message: JSONRPCMessage, related?: ClientRequest): Promise<void> {
    if (this.closed) return;
    const relatedId = related ? [...this.clientRequests].find(([, r]) => r === related)?.[0] : undefined;
    if (relatedId !== undefined) {
      await this.front.send(message, { relatedRequestId: relatedId }).catch(() => this.queueOrSend(message));
      return;
    }
    await this.queueOrSend(message);
  }

  /** Without a GET stream the transport drops such messages silently: hold them until one opens. */
  private async queueOrSend(message: JSONRPCMessage): Promise<void> {
    if (this.getStreams > 0) {
      await this.front.send(message).catch(() => undefined);
      return;
    }
    this.waitingForStream.push(message);
    if (this.waitingForStream.length > MAX_QUEUED) this.waitingForStream.shift();
  }

  private flushWaiting(): void {
    const waiting = this.waitingForStream.splice(0);
    for (const message of waiting) void this.front.send(message).catch(() => undefined);
  }
}

function busy(instance: Instance): Answer {
  return {
    error: {
      code: INSTANCE_BUSY,
      message: `The ${instance.server} instance already has ${instance.maxInflight} requests in flight (AILERON_POOL_MAX_CONCURRENT_CALLS); retry shortly`,
    },
  };
}

/** The same words and code as the one-server endpoint's refusal at the door (McpAdmission). */
function unreachable(server: string): Error & { rpc: RpcError } {
  return rpcError(INVALID_PARAMS, `This session token does not reach the server "${server}"`, {
    code: 'CAPABILITY_REQUIRED',
  });
}

function unknownName(kind: string, name: unknown, hint?: string): Answer {
  return { error: { code: INVALID_PARAMS, message: `Unknown ${kind}: ${String(name)}${hint ? `; ${hint}` : ''}` } };
}

export function rpcError(code: number, message: string, data?: unknown): Error & { rpc: RpcError } {
  return Object.assign(new Error(message), { rpc: { code, message, ...(data === undefined ? {} : { data }) } });
}

/** The stable code of an answer that had no token for its upstream (CONNECTION_REQUIRED, …), if it is one. */
function connectionCodeOf(error: RpcError): string | undefined {
  const code = (error.data as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && code.startsWith('CONNECTION_') ? code : undefined;
}

function connectionToolError(error: RpcError): Record<string, unknown> {
  const data = error.data as { code: string; connect_url?: string };
  return toolError(data.code, error.message, data.connect_url ? { connect_url: data.connect_url } : {});
}

/** Domain errors keep their stable code in `data`; anything unexpected says little. */
function toRpcError(error: unknown): RpcError {
  if (typeof error === 'object' && error !== null && 'rpc' in error) return (error as { rpc: RpcError }).rpc;
  if (error instanceof ConnectionUnavailableError) return connectionError(error);
  // said in our words, not the driver's (its message names hosts and ports)
  if (databaseUnavailableReason(error))
    return {
      code: UPSTREAM_UNAVAILABLE,
      message: "The control plane's database cannot be reached right now; nothing was done. Retry shortly.",
      data: { code: 'DATABASE_UNAVAILABLE' },
    };
  if (isUnstorableText(error))
    return { code: INVALID_PARAMS, message: UNSTORABLE_TEXT_DETAIL, data: { code: 'TEXT_NOT_STORABLE' } };
  // ours by class, not by having a `code`: a driver's or the system's error says things the client must not hear
  if (error instanceof DomainError)
    return { code: UPSTREAM_UNAVAILABLE, message: error.message, data: { code: error.code } };
  return { code: -32603, message: 'Internal error' };
}
