import type { UpstreamBearer } from '@aileron/connections';
import type { JSONRPCNotification, JSONRPCRequest, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { Instance } from '../pool-instances.service';
import type { Cancellation } from './cancellation';
import { INVALID_PARAMS, UPSTREAM_GONE } from './jsonrpc';
import { type Answer, Upstream, type UpstreamSession } from './upstream';

/** MCP's log levels, most verbose first: a session wants the messages at or after its own. */
const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;
/** where a server says which of its tasks a message belongs to (`_meta`) */
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** what each request sent up on a session's behalf carries, so that what the server sends about it finds its way back */
interface Tag {
  session: SharedSession<unknown>;
  on: unknown;
}

type ServerMessage = JSONRPCRequest | JSONRPCNotification;

/** each instance's shared upstream sessions, by the clients they suit (`sharingKey`) */
const sharedOf = new WeakMap<Instance, Map<string, SharedUpstream>>();

/**
 * The upstream session a downstream MCP session uses for a server: one of its
 * own, or, for an instance whose catalog entry says `sessions: shared`, its
 * share of the one that every session of the workspace with the same protocol
 * version and client capabilities uses. A server decides what it offers from
 * those two (server-everything lists its sampling tool only to clients that
 * sample), so sessions that differ in them never share.
 */
export function openUpstream<On>(
  server: string,
  instance: Instance,
  initParams: Record<string, unknown>,
  bearer?: UpstreamBearer,
): UpstreamSession<On> {
  if (instance.sessionMode !== 'shared') return new Upstream<On>(server, instance, bearer ? { bearer } : {});
  let shared = sharedOf.get(instance);
  if (!shared) sharedOf.set(instance, (shared = new Map()));
  const key = sharingKey(initParams);
  let upstream = shared.get(key);
  if (!upstream?.alive) {
    // an instance keeps at most one shared session that no one uses: another client's may come back
    for (const idle of shared.values()) if (idle.idle) void idle.close();
    const made = new SharedUpstream(server, instance, initParams, () => {
      if (shared.get(key) === made) shared.delete(key);
    });
    made.onIdle = () => {
      if ([...shared.values()].some((other) => other !== made)) void made.close();
    };
    shared.set(key, (upstream = made));
  }
  return upstream.join<On>();
}

function sharingKey(initParams: Record<string, unknown>): string {
  return JSON.stringify([initParams.protocolVersion ?? null, canonical(initParams.capabilities ?? {})]);
}

/** The same value with every object's keys in order: two clients saying the same thing in another order still share. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
  );
}

/**
 * One upstream session (one child, for a local stdio server) serving many
 * downstream sessions. Initialized once, with the first session's
 * parameters; every later session's `initialize` is answered with its result.
 * Requests go up with ids of the upstream session's own (no two sessions'
 * ids meet there), progress tokens replaced by ours, and cancellations follow
 * from each session's requests. What the server sends back goes to the
 * session it belongs to: progress by token, a server's request or log line by
 * the request it came with (over stdio: the latest request in flight), by the
 * task it is about, or, when nothing tells, a request to the session the
 * server last heard from and a notification to every session. Log levels and
 * resource subscriptions are per session downstream and one upstream: the
 * upstream gets the most verbose level any session set, and each session only
 * the lines at or above its own; a URI is subscribed upstream while any
 * session subscribes to it, and its updates go to those sessions alone.
 */
class SharedUpstream {
  private readonly upstream: Upstream<Tag>;
  private readonly members = new Set<SharedSession<unknown>>();
  /** the initialize answer every session gets */
  readonly ready: Promise<Answer>;
  private initializedSent = false;
  /** where a server's request that names no call goes: the session whose message the server heard last */
  private lastSpeaker: SharedSession<unknown> | undefined;
  /** our progress token → the session and the token it gave */
  private readonly progress = new Map<string, { session: SharedSession<unknown>; token: string | number }>();
  private nextToken = 0;
  /** the server's requests not yet answered → the session asked */
  private readonly asked = new Map<RequestId, SharedSession<unknown>>();
  /** URI → the sessions subscribed to it */
  private readonly subscribers = new Map<string, Set<SharedSession<unknown>>>();
  /** tasks the server runs for a session (a request that answered with a task), and tasks a session's client runs for the server */
  private readonly serverTasks = new Map<string, SharedSession<unknown>>();
  private readonly clientTasks = new Map<string, SharedSession<unknown>>();
  /** the level last set upstream; undefined: never set, the server's own */
  private upstreamLevel: number | undefined;
  /** level changes one after another, so the last one asked is the one the server keeps */
  private levels: Promise<Answer> = Promise.resolve({ result: {} });
  onIdle: () => void = () => undefined;

  constructor(
    readonly server: string,
    readonly instance: Instance,
    initParams: Record<string, unknown>,
    private readonly forget: () => void,
  ) {
    // the sessions sharing it count as the instance's sessions, not it: with none left, the instance may idle out
    this.upstream = new Upstream<Tag>(server, instance, { counted: false });
    this.upstream.onServerMessage = (message, tag) => this.fromServer(message, tag);
    this.upstream.onGone = (reason) => {
      this.forget();
      for (const session of [...this.members]) session.gone(reason);
    };
    this.ready = this.open(initParams);
    // a failed start is each joining session's to report
    this.ready.catch(() => undefined);
  }

  get alive(): boolean {
    return this.upstream.alive;
  }

  get idle(): boolean {
    return this.members.size === 0;
  }

  join<On>(): SharedSession<On> {
    const session = new SharedSession<On>(this);
    this.members.add(session as SharedSession<unknown>);
    return session;
  }

  close(): Promise<void> {
    return this.upstream.close();
  }

  private async open(initParams: Record<string, unknown>): Promise<Answer> {
    try {
      await this.upstream.start();
    } catch (error) {
      await this.upstream.close();
      throw error;
    }
    const answer = await this.upstream.request('initialize', initParams);
    if ('error' in answer) {
      await this.upstream.close();
      return answer;
    }
    const version = answer.result.protocolVersion;
    if (typeof version === 'string') this.upstream.setProtocolVersion(version);
    return answer;
  }

  // ── a session → the server ──────────────────────────────────────────────

  async request(
    session: SharedSession<unknown>,
    method: string,
    params: Record<string, unknown> | undefined,
    cancel: Cancellation | undefined,
    on: unknown,
  ): Promise<Answer> {
    if (method === 'initialize') return this.ready.catch((error: unknown) => gone(String(error)));
    this.lastSpeaker = session;
    switch (method) {
      case 'logging/setLevel': {
        const level = LEVELS.indexOf(params?.level as (typeof LEVELS)[number]);
        // a level MCP does not have is the server's to refuse
        if (level < 0) break;
        session.level = level;
        return this.applyLevel();
      }
      case 'resources/subscribe':
      case 'resources/unsubscribe':
        return this.subscription(session, method, params ?? {}, cancel, on);
      case 'tasks/get':
      case 'tasks/result':
      case 'tasks/cancel': {
        const owner = this.serverTasks.get(String(params?.taskId));
        // another session's task is not there for this one, as on a server of its own
        if (owner && owner !== session)
          return { error: { code: INVALID_PARAMS, message: `Task not found: ${String(params?.taskId)}` } };
        break;
      }
      case 'tasks/list': {
        const answer = await this.forward(session, method, params, cancel, on);
        if ('error' in answer || !Array.isArray(answer.result.tasks)) return answer;
        const tasks = (answer.result.tasks as { taskId?: unknown }[]).filter(
          (task) => this.serverTasks.get(String(task.taskId)) === session,
        );
        return { result: { ...answer.result, tasks } };
      }
    }
    return this.forward(session, method, params, cancel, on);
  }

  notify(session: SharedSession<unknown>, method: string, params?: Record<string, unknown>): Promise<void> {
    // the server was initialized once: later sessions' `initialized` would tell it again
    if (method === 'notifications/initialized') {
      if (this.initializedSent) return Promise.resolve();
      this.initializedSent = true;
    }
    this.lastSpeaker = session;
    return this.upstream.notify(method, params);
  }

  respond(session: SharedSession<unknown>, id: RequestId, answer: Answer): Promise<void> {
    // only the session asked answers
    if (this.asked.get(id) !== session) return Promise.resolve();
    this.asked.delete(id);
    const task = taskIdOf(answer);
    if (task !== undefined) this.clientTasks.set(task, session);
    return this.upstream.respond(id, answer);
  }

  /** A session leaves: what only it wanted upstream ends, what it was asked is refused. */
  leave(session: SharedSession<unknown>): void {
    if (!this.members.delete(session)) return;
    if (this.lastSpeaker === session) this.lastSpeaker = undefined;
    for (const [uri, sessions] of this.subscribers) {
      if (!sessions.delete(session) || sessions.size > 0) continue;
      this.subscribers.delete(uri);
      void this.upstream.request('resources/unsubscribe', { uri });
    }
    for (const [token, entry] of this.progress) if (entry.session === session) this.progress.delete(token);
    for (const tasks of [this.serverTasks, this.clientTasks])
      for (const [task, owner] of tasks) if (owner === session) tasks.delete(task);
    for (const [id, owner] of this.asked) {
      if (owner !== session) continue;
      this.asked.delete(id);
      void this.upstream.respond(id, { error: { code: UPSTREAM_GONE, message: 'The MCP session asked has closed' } });
    }
    if (session.level !== undefined) void this.applyLevel();
    if (this.members.size === 0) this.onIdle();
  }

  private async forward(
    session: SharedSession<unknown>,
    method: string,
    params: Record<string, unknown> | undefined,
    cancel: Cancellation | undefined,
    on: unknown,
  ): Promise<Answer> {
    const meta = params?._meta as Record<string, unknown> | undefined;
    const token = meta?.progressToken as string | number | undefined;
    let ours: string | undefined;
    if (token !== undefined) {
      // two sessions may both say `1`: the server sees tokens that only we gave out
      ours = `p${++this.nextToken}`;
      this.progress.set(ours, { session, token });
      params = { ...params, _meta: { ...meta, progressToken: ours } };
    }
    const answer = await this.upstream.request(method, params, cancel, { session, on });
    const task = taskIdOf(answer);
    if (task !== undefined) this.serverTasks.set(task, session);
    // a task's progress goes on after the answer that created it, until the session leaves
    else if (ours !== undefined) this.progress.delete(ours);
    return answer;
  }

  /** A URI is subscribed upstream by the first session that subscribes to it, and unsubscribed by the last to leave it. */
  private async subscription(
    session: SharedSession<unknown>,
    method: 'resources/subscribe' | 'resources/unsubscribe',
    params: Record<string, unknown>,
    cancel: Cancellation | undefined,
    on: unknown,
  ): Promise<Answer> {
    const subscribe = method === 'resources/subscribe';
    const uri = String(params.uri);
    const sessions = this.subscribers.get(uri);
    if (!subscribe) sessions?.delete(session);
    // another session has it subscribed upstream, and keeps it so
    if (sessions && sessions.size > 0) {
      if (subscribe) sessions.add(session);
      return { result: {} };
    }
    this.subscribers.delete(uri);
    const answer = await this.forward(session, method, params, cancel, on);
    if (subscribe && !('error' in answer) && session.alive)
      this.subscribers.set(uri, (this.subscribers.get(uri) ?? new Set()).add(session));
    return answer;
  }

  /** Sets the upstream to the most verbose level a session asked for, when that changed. */
  private applyLevel(): Promise<Answer> {
    this.levels = this.levels.then(async () => {
      let wanted: number | undefined;
      // a session that set no level takes whatever the server sends, as from a server of its own
      for (const member of this.members)
        if (member.level !== undefined) wanted = Math.min(wanted ?? LEVELS.length, member.level);
      if (wanted !== undefined && [...this.members].some((member) => member.level === undefined)) wanted = 0;
      if (wanted === undefined || wanted === this.upstreamLevel) return { result: {} };
      const answer = await this.upstream.request('logging/setLevel', { level: LEVELS[wanted] });
      if (!('error' in answer)) this.upstreamLevel = wanted;
      return answer;
    });
    return this.levels;
  }

  // ── the server → sessions ───────────────────────────────────────────────

  private fromServer(message: ServerMessage, tag: Tag | undefined): void {
    const params = (message.params ?? {}) as Record<string, unknown>;
    // the session whose request this came with, if one did: it may have left since, and what was its goes to no one else
    const caller = tag?.session;
    const deliver = (session: SharedSession<unknown>, what: ServerMessage = message) =>
      session.deliver(what, session === caller ? tag!.on : undefined);
    const byTask = this.taskOwner(params);
    if ('id' in message) {
      const clientTask = typeof params.taskId === 'string' ? this.clientTasks.get(params.taskId) : undefined;
      const asked = clientTask ?? byTask ?? (caller ? (caller.alive ? caller : undefined) : this.speaker());
      if (!asked) {
        void this.upstream.respond(message.id, {
          error: { code: UPSTREAM_GONE, message: 'No MCP session is open to answer this request' },
        });
        return;
      }
      this.asked.set(message.id, asked);
      deliver(asked);
      return;
    }
    switch (message.method) {
      case 'notifications/progress': {
        const entry = this.progress.get(String(params.progressToken));
        // a request that ended, or a token we never gave out: nobody's
        if (entry) deliver(entry.session, { ...message, params: { ...params, progressToken: entry.token } });
        return;
      }
      case 'notifications/cancelled': {
        const id = params.requestId as RequestId;
        const asked = this.asked.get(id);
        if (!asked) return;
        this.asked.delete(id);
        deliver(asked);
        return;
      }
      case 'notifications/resources/updated':
        for (const session of this.subscribers.get(String(params.uri)) ?? []) deliver(session);
        return;
      case 'notifications/tasks/status': {
        const owner = this.serverTasks.get(String(params.taskId)) ?? this.clientTasks.get(String(params.taskId));
        if (owner) deliver(owner);
        return;
      }
    }
    const owner = message.method.endsWith('/list_changed') ? undefined : (byTask ?? caller);
    if (owner) {
      if (wants(owner, message)) deliver(owner);
      return;
    }
    for (const session of this.members) if (wants(session, message)) deliver(session);
  }

  private taskOwner(params: Record<string, unknown>): SharedSession<unknown> | undefined {
    const related = (params._meta as Record<string, { taskId?: unknown } | undefined> | undefined)?.[RELATED_TASK];
    return typeof related?.taskId === 'string' ? this.serverTasks.get(related.taskId) : undefined;
  }

  private speaker(): SharedSession<unknown> | undefined {
    if (this.lastSpeaker?.alive) return this.lastSpeaker;
    for (const member of this.members) if (member.alive) return member;
    return undefined;
  }
}

/** A downstream session's share of a SharedUpstream: what McpSession holds instead of an Upstream of its own. */
class SharedSession<On> implements UpstreamSession<On> {
  onServerMessage: (message: ServerMessage, on: On | undefined) => void = () => undefined;
  onGone: (reason: string) => void = () => undefined;
  /** the level this session set (an index of LEVELS) */
  level: number | undefined;
  private closedWith: string | null = null;

  constructor(private readonly shared: SharedUpstream) {
    shared.instance.upstreamSessions++;
  }

  get server(): string {
    return this.shared.server;
  }

  get instance(): Instance {
    return this.shared.instance;
  }

  get alive(): boolean {
    return this.closedWith === null && this.shared.alive;
  }

  async start(): Promise<void> {
    await this.shared.ready;
  }

  setProtocolVersion(): void {
    // the shared session's, set once when it was initialized with this session's version
  }

  request(
    method: string,
    params: Record<string, unknown> | undefined,
    cancel?: Cancellation,
    on?: On,
  ): Promise<Answer> {
    if (this.closedWith) return Promise.resolve(gone(this.closedWith));
    return this.shared.request(this as SharedSession<unknown>, method, params, cancel, on);
  }

  notify(method: string, params?: Record<string, unknown>): Promise<void> {
    if (this.closedWith) return Promise.resolve();
    return this.shared.notify(this as SharedSession<unknown>, method, params);
  }

  respond(id: RequestId, answer: Answer): Promise<void> {
    if (this.closedWith) return Promise.resolve();
    return this.shared.respond(this as SharedSession<unknown>, id, answer);
  }

  /** Leaves the shared session; it stays for the others (and stops with its instance). */
  async close(): Promise<void> {
    if (this.closedWith) return;
    this.gone('closed');
    this.shared.leave(this as SharedSession<unknown>);
  }

  deliver(message: ServerMessage, on: unknown): void {
    if (this.closedWith === null) this.onServerMessage(message, on as On | undefined);
  }

  gone(reason: string): void {
    if (this.closedWith) return;
    this.closedWith = reason;
    this.shared.instance.upstreamSessions--;
    this.onGone(reason);
  }
}

function gone(reason: string): Answer {
  return { error: { code: UPSTREAM_GONE, message: reason } };
}

function taskIdOf(answer: Answer): string | undefined {
  if ('error' in answer) return undefined;
  const task = answer.result.task as { taskId?: unknown } | undefined;
  return typeof task?.taskId === 'string' ? task.taskId : undefined;
}

/** Whether a session takes a log line at its level; anything else it takes whole. */
function wants(session: SharedSession<unknown>, message: ServerMessage): boolean {
  if (message.method !== 'notifications/message' || session.level === undefined) return true;
  const level = LEVELS.indexOf(message.params?.level as (typeof LEVELS)[number]);
  return level < 0 || level >= session.level;
}
