import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Configuration, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { expect } from 'vitest';

/** A loopback server's base URL once it listens. */
async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
}

async function close(server: Server | undefined): Promise<void> {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
}

export interface AuthorizationServerOptions {
  /** RFC 7591 registration (on by default) */
  registration?: boolean;
  /** a client registered by hand, as an admin would for an entry's oauth.client_id */
  preregistered?: { client_id: string; client_secret: string; redirect_uri: string };
  /** access token lifetime, seconds */
  accessTokenTtl?: number;
}

/**
 * A real OAuth 2.1 authorization server (oidc-provider, certified) in front
 * of an upstream MCP server: authorization code with PKCE, RFC 8707
 * resources, refresh tokens that rotate, revocation, introspection for the
 * resource server, dynamic registration. Its sign-in is headless: whoever
 * `account` names signs in and allows at once, as a person would in a browser.
 */
export class UpstreamAuthorizationServer {
  /** who signs in at the next authorization */
  account = 'upstream-person';
  /** set: the token endpoint answers 503, as a server that is down for a while */
  tokenEndpointDown = false;
  /** every token request, by grant type (` refused` after it when refused), in order */
  readonly grants: string[] = [];
  /** every client registration's metadata */
  readonly registrations: Record<string, unknown>[] = [];
  /** every code and token it issued, and every client secret it gave: what must never show anywhere else */
  readonly secrets: string[] = [];
  provider!: Provider;
  issuer = '';
  private server: Server | undefined;
  private callback!: (req: IncomingMessage, res: ServerResponse) => Promise<void>;

  constructor(private readonly options: AuthorizationServerOptions = {}) {}

  async start(resource: () => string): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.issuer = await listen(this.server);
    const { default: ProviderClass } = await import('oidc-provider');
    const ttl = this.options.accessTokenTtl ?? 300;
    const configuration: Configuration = {
      clients: [
        // the MCP server introspects with this
        {
          client_id: 'mcp-resource-server',
          client_secret: 'resource-server-secret',
          grant_types: [],
          redirect_uris: [],
          response_types: [],
        },
        ...(this.options.preregistered
          ? [
              {
                client_id: this.options.preregistered.client_id,
                client_secret: this.options.preregistered.client_secret,
                redirect_uris: [this.options.preregistered.redirect_uri],
                grant_types: ['authorization_code', 'refresh_token'],
                response_types: ['code' as const],
                token_endpoint_auth_method: 'client_secret_basic' as const,
              },
            ]
          : []),
      ],
      clientDefaults: {
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      scopes: ['openid', 'offline_access', 'mcp:tools'],
      pkce: { required: () => true },
      findAccount: async (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
      rotateRefreshToken: true,
      allowOmittingSingleRegisteredRedirectUri: false,
      features: {
        devInteractions: { enabled: false },
        registration: { enabled: this.options.registration !== false },
        revocation: { enabled: true, allowedPolicy: async () => true },
        introspection: { enabled: true, allowedPolicy: async () => true },
        resourceIndicators: {
          enabled: true,
          defaultResource: async () => resource(),
          useGrantedResource: async () => true,
          getResourceServerInfo: async () => ({
            scope: 'mcp:tools',
            audience: resource(),
            accessTokenTTL: ttl,
            accessTokenFormat: 'opaque',
          }),
        },
      } as Configuration['features'],
      ttl: {
        AccessToken: ttl,
        AuthorizationCode: 60,
        RefreshToken: 86_400,
        Grant: 86_400,
        Interaction: 600,
        Session: 600,
      },
    };
    this.provider = new ProviderClass(this.issuer, configuration);
    this.provider.on('grant.success', (ctx: KoaContextWithOIDC) =>
      this.grants.push(String(ctx.oidc.params?.grant_type ?? '')),
    );
    this.provider.on('grant.error', (ctx: KoaContextWithOIDC) =>
      this.grants.push(`${String(ctx.oidc.params?.grant_type ?? '')} refused`),
    );
    this.provider.on(
      'registration_create.success',
      (_ctx: KoaContextWithOIDC, client: { metadata(): Record<string, unknown>; clientSecret?: string }) => {
        this.registrations.push(client.metadata());
        if (client.clientSecret) this.secrets.push(client.clientSecret);
      },
    );
    const saved = (token: { jti: string }): void => {
      this.secrets.push(token.jti);
    };
    this.provider.on('access_token.saved', saved);
    this.provider.on('refresh_token.saved', saved);
    this.provider.on('authorization_code.saved', saved);
    this.callback = this.provider.callback();
  }

  async stop(): Promise<void> {
    await close(this.server);
  }

  /** Revokes every grant of the account: its refresh tokens (and access tokens) stop working, as a person revoking the app upstream. */
  async revokeEverythingOf(account: string): Promise<void> {
    for (const id of this.accountGrants.get(account) ?? []) {
      await Promise.all([
        this.provider.AccessToken.revokeByGrantId(id),
        this.provider.RefreshToken.revokeByGrantId(id),
        this.provider.AuthorizationCode.revokeByGrantId(id),
        this.provider.Grant.adapter.destroy(id),
      ]);
    }
  }

  /** Revokes one access token, as an upstream does when it decides a token is no longer good. */
  async revokeAccessToken(token: string): Promise<void> {
    const found = await this.provider.AccessToken.find(token);
    await found?.destroy();
  }

  /** What the introspection endpoint says of a token, as the resource server asks it. */
  async introspect(token: string): Promise<Record<string, unknown>> {
    const answer = await fetch(`${this.issuer}/token/introspection`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from('mcp-resource-server:resource-server-secret').toString('base64')}`,
      },
      body: new URLSearchParams({ token }).toString(),
    });
    return (await answer.json()) as Record<string, unknown>;
  }

  private readonly accountGrants = new Map<string, Set<string>>();

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    if (path.startsWith('/interaction/')) return this.interaction(req, res);
    if (this.tokenEndpointDown && path === '/token') {
      this.grants.push('unanswered');
      res
        .writeHead(503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: 'temporarily_unavailable', error_description: 'down for maintenance' }));
      return;
    }
    void this.callback(req, res);
  }

  /** The person signs in and allows everything asked, at once. */
  private async interaction(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const details = await this.provider.interactionDetails(req, res);
    const params = details.params as Record<string, string>;
    const grant = new this.provider.Grant({ accountId: this.account, clientId: params.client_id });
    const scopes = (params.scope ?? '').split(' ').filter(Boolean);
    if (scopes.length > 0) grant.addOIDCScope(scopes.join(' '));
    const resource = params.resource;
    if (resource) grant.addResourceScope(resource, 'mcp:tools');
    const grantId = await grant.save();
    const set = this.accountGrants.get(this.account) ?? new Set<string>();
    set.add(grantId);
    this.accountGrants.set(this.account, set);
    await this.provider.interactionFinished(
      req,
      res,
      { login: { accountId: this.account }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  }
}

/**
 * An upstream MCP server (the SDK's, over Streamable HTTP) that the
 * authorization server above protects: without a token it answers 401 with
 * `WWW-Authenticate: Bearer resource_metadata=…` (RFC 9728), it serves its
 * protected resource metadata, and it checks every bearer by introspection,
 * for its audience too. Its `whoami` tool says whose token it was called with.
 */
export class ProtectedMcpServer {
  /** every Authorization header it was sent, in order */
  readonly seen: string[] = [];
  /** how many requests it answered 401 */
  refused = 0;
  url = '';
  private base = '';
  private server: Server | undefined;
  private readonly transports = new Map<string, StreamableHTTPServerTransport>();

  constructor(private readonly as: UpstreamAuthorizationServer) {}

  get resource(): string {
    return this.url;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.base = await listen(this.server);
    this.url = `${this.base}/mcp`;
  }

  async stop(): Promise<void> {
    for (const transport of this.transports.values()) await transport.close().catch(() => undefined);
    await close(this.server);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    if (path === '/.well-known/oauth-protected-resource/mcp') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          resource: this.resource,
          authorization_servers: [this.as.issuer],
          scopes_supported: ['mcp:tools'],
          bearer_methods_supported: ['header'],
        }),
      );
      return;
    }
    if (path !== '/mcp') return void res.writeHead(404).end();
    const authorization = String(req.headers.authorization ?? '');
    this.seen.push(authorization);
    const token = /^Bearer (.+)$/.exec(authorization)?.[1];
    const claims = token ? await this.as.introspect(token) : { active: false };
    const audience = claims.aud;
    const forUs = audience === this.resource || (Array.isArray(audience) && audience.includes(this.resource));
    if (!claims.active || !forUs) {
      this.refused++;
      res
        .writeHead(401, {
          'content-type': 'application/json',
          'www-authenticate': `Bearer resource_metadata="${this.base}/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"${token ? ', error="invalid_token"' : ''}`,
        })
        .end(JSON.stringify({ error: 'invalid_token' }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown) : undefined;
    const sessionId = req.headers['mcp-session-id'];
    let transport = typeof sessionId === 'string' ? this.transports.get(sessionId) : undefined;
    if (!transport) {
      if (typeof sessionId === 'string') return void res.writeHead(404).end();
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void this.transports.set(id, transport!),
      });
      const mcp = new McpServer({ name: 'protected-upstream', version: '1.0.0' });
      mcp.registerTool('whoami', { description: 'Says whose token called it' }, async (extra) => {
        const current = String(extra.requestInfo?.headers.authorization ?? '').replace(/^Bearer /, '');
        const seen = await this.as.introspect(current);
        return { content: [{ type: 'text', text: `upstream account ${String(seen.sub)}` }] };
      });
      await mcp.connect(transport);
    }
    await transport.handleRequest(req, res, body);
  }
}

/** Which of the upstream's codes, tokens and client secrets a text holds: there must be none. */
export function secretsIn(as: UpstreamAuthorizationServer, text: string): string[] {
  expect(as.secrets.length).toBeGreaterThan(0);
  return as.secrets.filter((secret) => text.includes(secret));
}

export type { KoaContextWithOIDC };
