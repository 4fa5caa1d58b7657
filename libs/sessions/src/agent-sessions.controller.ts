import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, Principal } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import { createdAtKey, ListCursor, Route, withLegacyKey } from '@aileron/http';
import {
  aliasListQuery,
  idParams,
  listQuery,
  messageBody,
  messagesPage,
  messagesQuery,
  messageView,
  sessionsPage,
  sessionView,
  startedView,
  startInWorkspaceBody,
  startSessionBody,
  toMessageView,
  toSessionView,
  wsIdParams,
  wsParams,
} from './agent-sessions.schemas';
import { inWorkspace, sessionsAlias } from './agent-session-routes';
import { SessionRef, AgentSessionsService } from './agent-sessions.service';

const sessionsCursor = new ListCursor('sessions', createdAtKey);
const messagesCursor = new ListCursor('session-messages', createdAtKey);

const START = {
  summary: 'Start an agent session and mint its caveat token',
  description:
    'The session acts for its creator (a member of the workspace, an API token, or an enrolled gateway for its own workspace) and never does more than the creator could; `caps` and `caveats` only narrow it further. The caveat token is shown once.',
  tag: 'sessions',
  gateways: true,
  response: startedView,
  status: 201,
} as const;
const LIST = {
  summary: "A workspace's agent sessions, newest first",
  tag: 'sessions',
  gateways: true,
  response: sessionsPage,
} as const;
const ONE = { summary: 'One agent session', tag: 'sessions', gateways: true, response: sessionView } as const;
const END = {
  summary: 'End an agent session: its tokens are refused on every replica at once',
  description: 'Its creator may end it, and an owner or admin of its workspace.',
  tag: 'sessions',
  gateways: true,
  response: sessionView,
} as const;
const POST_MESSAGE = {
  summary: "A message on the session's channel: from the agent (its caveat token) to its people, or a member's answer",
  description: 'Each message is a `session.message` event, so webhooks and chat carry it.',
  tag: 'sessions',
  capability: 'comms',
  body: messageBody,
  response: messageView,
  status: 201,
} as const;
const MESSAGES = {
  summary: "The session's messages, oldest first: the agent reads its people's answers, people read the conversation",
  description:
    'Pages by `cursor`; at the end (`next_cursor` null) wait for what comes next with `?after=<id of the last message>&wait=60`, which answers as soon as a newer message arrives on any replica.',
  tag: 'sessions',
  capability: 'comms',
  query: messagesQuery,
  response: messagesPage,
} as const;
const ONE_SESSION = { params: { id: '{session}' } };
const MESSAGE_EXAMPLE = { ...ONE_SESSION, body: { text: 'Need a decision on the schema change', level: 'question' } };

/**
 * Agent sessions live under their workspace like every tenant resource; the
 * guard checks the caller's access to `:ws` and the service that the session
 * is one of that workspace's. The `/v1/sessions…` aliases name the workspace
 * in the body or query instead (gateways of the last release use them), and
 * the service checks the caller's access to it exactly as the guard would.
 */
@Controller()
export class AgentSessionsController {
  constructor(
    private readonly sessions: AgentSessionsService,
    private readonly clock: Clock,
  ) {}

  @Route({
    ...START,
    method: 'POST',
    ...inWorkspace('', 'session.create'),
    body: startInWorkspaceBody,
    example: { body: { name: 'fix flaky test', agent: 'claude', ttl_seconds: 3600 } },
  })
  startIn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof wsParams>,
    @Body() body: z.infer<typeof startInWorkspaceBody>,
  ): Promise<z.infer<typeof startedView>> {
    return this.startSession(caller, { ...body, workspace: params.ws });
  }

  @Route({
    ...START,
    method: 'POST',
    ...sessionsAlias('', START.description),
    body: startSessionBody,
    example: { body: { workspace: '{ws}', name: 'fix flaky test', agent: 'claude', ttl_seconds: 3600 } },
  })
  start(
    @Caller() caller: Principal,
    @Body() body: z.infer<typeof startSessionBody>,
  ): Promise<z.infer<typeof startedView>> {
    return this.startSession(caller, body);
  }

  @Route({ ...LIST, method: 'GET', ...inWorkspace(''), query: listQuery })
  listIn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof wsParams>,
    @Query() query: z.infer<typeof listQuery>,
  ): Promise<z.infer<typeof sessionsPage>> {
    return this.listSessions(caller, params.ws, query);
  }

  @Route({
    ...LIST,
    method: 'GET',
    ...sessionsAlias('', ''),
    query: aliasListQuery,
    example: { query: { workspace: '{ws}' } },
  })
  list(
    @Caller() caller: Principal,
    @Query() query: z.infer<typeof aliasListQuery>,
  ): Promise<z.infer<typeof sessionsPage>> {
    return this.listSessions(caller, query.workspace, query);
  }

  @Route({ ...ONE, method: 'GET', ...inWorkspace('/:id'), example: ONE_SESSION })
  getIn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof wsIdParams>,
  ): Promise<z.infer<typeof sessionView>> {
    return this.one(caller, { id: params.id, workspace: params.ws });
  }

  @Route({ ...ONE, method: 'GET', ...sessionsAlias('/:id', ''), example: ONE_SESSION })
  get(@Caller() caller: Principal, @Param() params: z.infer<typeof idParams>): Promise<z.infer<typeof sessionView>> {
    return this.one(caller, { id: params.id });
  }

  @Route({ ...END, method: 'DELETE', ...inWorkspace('/:id'), example: ONE_SESSION })
  endIn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof wsIdParams>,
  ): Promise<z.infer<typeof sessionView>> {
    return this.endSession(caller, { id: params.id, workspace: params.ws });
  }

  @Route({ ...END, method: 'DELETE', ...sessionsAlias('/:id', END.description), example: ONE_SESSION })
  end(@Caller() caller: Principal, @Param() params: z.infer<typeof idParams>): Promise<z.infer<typeof sessionView>> {
    return this.endSession(caller, { id: params.id });
  }

  @Route({ ...POST_MESSAGE, method: 'POST', ...inWorkspace('/:id/messages'), example: MESSAGE_EXAMPLE })
  postIn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof wsIdParams>,
    @Body() body: z.infer<typeof messageBody>,
  ): Promise<z.infer<typeof messageView>> {
    return this.postMessage(caller, { id: params.id, workspace: params.ws }, body);
  }

  @Route({
    ...POST_MESSAGE,
    method: 'POST',
    ...sessionsAlias('/:id/messages', POST_MESSAGE.description),
    example: MESSAGE_EXAMPLE,
  })
  post(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof idParams>,
    @Body() body: z.infer<typeof messageBody>,
  ): Promise<z.infer<typeof messageView>> {
    return this.postMessage(caller, { id: params.id }, body);
  }

  @Route({ ...MESSAGES, method: 'GET', ...inWorkspace('/:id/messages'), example: ONE_SESSION })
  messagesIn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof wsIdParams>,
    @Query() query: z.infer<typeof messagesQuery>,
  ): Promise<z.infer<typeof messagesPage>> {
    return this.readMessages(caller, { id: params.id, workspace: params.ws }, query);
  }

  @Route({ ...MESSAGES, method: 'GET', ...sessionsAlias('/:id/messages', MESSAGES.description), example: ONE_SESSION })
  messages(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof idParams>,
    @Query() query: z.infer<typeof messagesQuery>,
  ): Promise<z.infer<typeof messagesPage>> {
    return this.readMessages(caller, { id: params.id }, query);
  }

  private async startSession(
    caller: Principal,
    body: z.infer<typeof startSessionBody>,
  ): Promise<z.infer<typeof startedView>> {
    const { session, token } = await this.sessions.start(caller, {
      workspace: body.workspace,
      ...(body.name !== undefined ? { name: body.name } : {}),
      ...(body.agent !== undefined ? { agent: body.agent } : {}),
      ...(body.ttl_seconds !== undefined ? { ttlSeconds: body.ttl_seconds } : {}),
      ...(body.caps !== undefined ? { caps: body.caps } : {}),
      ...(body.caveats !== undefined ? { caveats: body.caveats } : {}),
    });
    return { id: session.id, caveat_token: token, expires_at: session.expiresAt.toISOString(), caps: session.caps };
  }

  private async listSessions(
    caller: Principal,
    workspace: string,
    query: z.infer<typeof listQuery>,
  ): Promise<z.infer<typeof sessionsPage>> {
    const rows = await this.sessions.list(
      caller,
      workspace,
      { live: query.live === 'true' },
      sessionsCursor.keyset(query),
    );
    const now = this.clock.date();
    return withLegacyKey(
      sessionsCursor.page(
        rows,
        query,
        (s) => s,
        (s) => toSessionView(s, now),
      ),
      'sessions',
    );
  }

  private async one(caller: Principal, ref: SessionRef): Promise<z.infer<typeof sessionView>> {
    return toSessionView((await this.sessions.get(caller, ref)).session, this.clock.date());
  }

  private async endSession(caller: Principal, ref: SessionRef): Promise<z.infer<typeof sessionView>> {
    return toSessionView(await this.sessions.end(caller, ref), this.clock.date());
  }

  private async postMessage(
    caller: Principal,
    ref: SessionRef,
    body: z.infer<typeof messageBody>,
  ): Promise<z.infer<typeof messageView>> {
    return toMessageView(await this.sessions.post(caller, ref, body.text, body.level));
  }

  private async readMessages(
    caller: Principal,
    ref: SessionRef,
    query: z.infer<typeof messagesQuery>,
  ): Promise<z.infer<typeof messagesPage>> {
    const rows = await this.sessions.messages(caller, ref, messagesCursor.keyset(query), query.after, query.wait);
    return withLegacyKey(
      messagesCursor.page(rows, query, (m) => m, toMessageView),
      'messages',
    );
  }
}
