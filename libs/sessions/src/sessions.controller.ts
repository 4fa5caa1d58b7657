import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, Principal } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import { Route } from '@aileron/http';
import {
  idParams,
  listQuery,
  messageBody,
  messagesQuery,
  messageView,
  sessionView,
  startedView,
  startSessionBody,
  toMessageView,
  toSessionView,
} from './sessions.schemas';
import { SessionsService } from './sessions.service';

/**
 * Agent sessions. The workspace is named in the body or query, not the path,
 * because a gateway launching an agent knows its workspace by its token; the
 * service checks the caller's access to it exactly as a `:ws` route would.
 */
@Controller()
export class SessionsController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly clock: Clock,
  ) {}

  @Route({
    method: 'POST',
    path: '/v1/sessions',
    summary: 'Start an agent session and mint its caveat token',
    description:
      'The session acts for its creator (a member of the workspace, an API token, or an enrolled gateway for its own workspace) and never does more than the creator could; `caps` and `caveats` only narrow it further. The caveat token is shown once.',
    tag: 'sessions',
    tenancy: 'caller',
    gateways: true,
    body: startSessionBody,
    response: startedView,
    status: 201,
    example: { body: { workspace: '{ws}', name: 'fix flaky test', agent: 'claude', ttl_seconds: 3600 } },
  })
  async start(@Caller() caller: Principal, @Body() body: z.infer<typeof startSessionBody>): Promise<z.infer<typeof startedView>> {
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

  @Route({
    method: 'GET',
    path: '/v1/sessions',
    summary: "A workspace's agent sessions, newest first",
    tag: 'sessions',
    tenancy: 'caller',
    gateways: true,
    query: listQuery,
    response: z.object({ sessions: z.array(sessionView) }),
    example: { query: { workspace: '{ws}' } },
  })
  async list(@Caller() caller: Principal, @Query() query: z.infer<typeof listQuery>): Promise<{ sessions: z.infer<typeof sessionView>[] }> {
    const found = await this.sessions.list(caller, query.workspace, { live: query.live === 'true', limit: query.limit });
    return { sessions: found.map((s) => toSessionView(s, this.clock.date())) };
  }

  @Route({
    method: 'GET',
    path: '/v1/sessions/:id',
    summary: 'One agent session',
    tag: 'sessions',
    tenancy: 'caller',
    gateways: true,
    params: idParams,
    response: sessionView,
    example: { params: { id: '{session}' } },
  })
  async get(@Caller() caller: Principal, @Param() params: z.infer<typeof idParams>): Promise<z.infer<typeof sessionView>> {
    return toSessionView((await this.sessions.get(caller, params.id)).session, this.clock.date());
  }

  @Route({
    method: 'DELETE',
    path: '/v1/sessions/:id',
    summary: 'End an agent session: its tokens are refused on every replica at once',
    description: 'Its creator may end it, and an owner or admin of its workspace.',
    tag: 'sessions',
    tenancy: 'caller',
    gateways: true,
    params: idParams,
    response: sessionView,
    example: { params: { id: '{session}' } },
  })
  async end(@Caller() caller: Principal, @Param() params: z.infer<typeof idParams>): Promise<z.infer<typeof sessionView>> {
    return toSessionView(await this.sessions.end(caller, params.id), this.clock.date());
  }

  @Route({
    method: 'POST',
    path: '/v1/sessions/:id/messages',
    summary: "A message on the session's channel: from the agent (its caveat token) to its people, or a member's answer",
    description: 'Each message is a `session.message` event, so webhooks and chat carry it.',
    tag: 'sessions',
    tenancy: 'caller',
    capability: 'comms',
    params: idParams,
    body: messageBody,
    response: messageView,
    status: 201,
    example: { params: { id: '{session}' }, body: { text: 'Need a decision on the schema change', level: 'question' } },
  })
  async post(@Caller() caller: Principal, @Param() params: z.infer<typeof idParams>, @Body() body: z.infer<typeof messageBody>): Promise<z.infer<typeof messageView>> {
    return toMessageView(await this.sessions.post(caller, params.id, body.text, body.level));
  }

  @Route({
    method: 'GET',
    path: '/v1/sessions/:id/messages',
    summary: "The session's messages: the agent reads its people's answers, people read the conversation",
    description: 'Long-poll: `?after=<message>&wait=60` answers as soon as a newer message arrives on any replica.',
    tag: 'sessions',
    tenancy: 'caller',
    capability: 'comms',
    params: idParams,
    query: messagesQuery,
    response: z.object({ messages: z.array(messageView) }),
    example: { params: { id: '{session}' } },
  })
  async messages(@Caller() caller: Principal, @Param() params: z.infer<typeof idParams>, @Query() query: z.infer<typeof messagesQuery>): Promise<{ messages: z.infer<typeof messageView>[] }> {
    return { messages: (await this.sessions.messages(caller, params.id, query.after ?? null, query.wait, query.limit)).map(toMessageView) };
  }
}
