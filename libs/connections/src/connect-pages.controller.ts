import { randomBytes } from 'node:crypto';
import { Controller, Inject, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BrowserSessions, parseCookies, serializeCookie } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError } from '@aileron/errors';
import { Route } from '@aileron/http';
import { messagePage, pageHeaders } from '@aileron/oauth';
import { ConnectionFlow } from './connection-flow.service';
import { callbackQuery, clientMetadataView, connectQuery } from './connections.schemas';
import { CALLBACK_PATH, CLIENT_METADATA_PATH, CONNECT_PATH } from './domain/connection';

/** binds a connection being made to the browser that began it; sent only to the callback */
const BINDING_COOKIE = 'aileron_connect';

/**
 * The browser's side of connecting the pool to an upstream: the connect URL
 * (after the console's sign-in, on to the upstream's authorization server),
 * the callback it comes back to, and the pool's Client ID Metadata Document.
 * Plain server-rendered pages, no script, their own strict CSP.
 */
@Controller()
export class ConnectPagesController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly flow: ConnectionFlow,
    private readonly browserSessions: BrowserSessions,
  ) {}

  @Route({
    method: 'GET',
    path: CLIENT_METADATA_PATH,
    summary: 'The pool’s Client ID Metadata Document, as an OAuth client of upstream MCP servers',
    description:
      'Its URL is the pool’s client_id at authorization servers that take Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document).',
    tag: 'connections',
    auth: 'public',
    tenancy: 'none',
    response: clientMetadataView,
  })
  clientMetadata(@Res({ passthrough: true }) reply: FastifyReply): z.infer<typeof clientMetadataView> {
    void reply.header('cache-control', 'public, max-age=300');
    const document = this.flow.clientMetadataDocument();
    return {
      client_id: document.client_id,
      client_name: document.client_name ?? 'Aileron',
      client_uri: document.client_uri ?? this.config.publicUrl,
      application_type: document.application_type,
      redirect_uris: document.redirect_uris,
      grant_types: document.grant_types ?? [],
      response_types: document.response_types ?? [],
      token_endpoint_auth_method: document.token_endpoint_auth_method ?? 'none',
    };
  }

  @Route({
    method: 'GET',
    path: CONNECT_PATH,
    summary: 'Connect a server of a workspace that signs in with OAuth, in this browser',
    description:
      'Without a console session, the console’s sign-in first, which returns here. Then on to the upstream’s authorization server (PKCE, state, the resource); the connection is the signed-in person’s, or the workspace’s for a per_workspace server (owners and admins).',
    tag: 'connections',
    auth: 'public',
    tenancy: 'none',
    query: connectQuery,
    status: 303,
    produces: 'text/html',
    example: { query: { workspace: 'default', server: 'github' } },
  })
  async connect(
    @Query() query: z.infer<typeof connectQuery>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const session = await this.browserSessions.peek(request);
    if (!session) {
      const back = `${CONNECT_PATH}?${new URLSearchParams(query)}`;
      void reply
        .header('cache-control', 'no-store')
        .redirect(`/sign-in?${new URLSearchParams({ return_to: back })}`, 303);
      return;
    }
    try {
      const begun = await this.flow.begin(session.principal, query.workspace, query.server);
      void reply
        .header('cache-control', 'no-store')
        .header('set-cookie', this.bindingCookie(begun.binding, 600, request))
        .redirect(begun.location, 303);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      this.page(reply, error.status, { title: `${query.server} cannot be connected`, message: error.message });
    }
  }

  @Route({
    method: 'GET',
    path: CALLBACK_PATH,
    summary: 'Where an upstream’s authorization server sends the browser back with a code',
    description:
      'Takes the connection being made that `state` names, once and within ten minutes, only in the browser that began it; exchanges the code and seals the tokens in the vault.',
    tag: 'connections',
    auth: 'public',
    tenancy: 'none',
    query: callbackQuery,
    produces: 'text/html',
    example: { query: { code: 'code', state: 'state' } },
  })
  async callback(
    @Query() query: z.infer<typeof callbackQuery>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const binding = parseCookies(request.headers.cookie).get(BINDING_COOKIE);
    const session = await this.browserSessions.peek(request);
    const finished = await this.flow.finish(query, binding, session?.principal ?? null);
    void reply.header('set-cookie', this.bindingCookie('', 0, request));
    if (finished.ok)
      this.page(reply, 200, {
        title: `${finished.connection.server} is connected`,
        message:
          finished.connection.subject === 'workspace'
            ? `The pool now calls ${finished.connection.server} with this connection for everyone in workspace ${finished.connection.workspaceSlug}.`
            : `The pool now calls ${finished.connection.server} as you, in workspace ${finished.connection.workspaceSlug}.`,
        next: 'You can close this page and go back to your MCP client.',
      });
    else this.page(reply, 400, { title: finished.title, message: finished.message });
  }

  private page(reply: FastifyReply, status: number, view: { title: string; message: string; next?: string }): void {
    const nonce = randomBytes(16).toString('base64');
    void reply.status(status).headers(pageHeaders(nonce)).send(messagePage(view, nonce));
  }

  /** The cookie that binds a start to this browser, sent only to the callback (empty and expired: cleared). */
  private bindingCookie(value: string, maxAgeSeconds: number, request: FastifyRequest): string {
    const secure = request.protocol === 'https' || this.config.publicUrl.startsWith('https:');
    return serializeCookie(BINDING_COOKIE, value, { path: CALLBACK_PATH, maxAgeSeconds, secure });
  }
}
