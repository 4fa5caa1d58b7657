import { createHash, createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AdapterPayload, Configuration, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { OrgScope, PrincipalCache } from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { Clock } from '@aileron/clock';
import { newKey } from '@aileron/crypto';
import { InstallationKeys } from '@aileron/keys';
import { ClientDocumentError, ClientDocuments } from './client-documents';
import { pagesCsp, refusalPage } from './domain/pages';
import { MCP_SCOPE, workspaceOfResource } from './domain/resource';
import { GrantRecord, OauthRepository } from './oauth.repository';
import { PrismaAdapter } from './prisma-adapter';

const SIGNING_KEY = 'oauth-signing-key';
const COOKIE_KEY = 'oauth-cookie-key';
/** where oidc-provider's endpoints are mounted; the interaction pages are ours, below it */
export const OAUTH_PREFIX = '/oauth';
const INTERACTION_TTL_SECONDS = 600;
const GRANT_TTL_SECONDS = 365 * 24 * 3600;
/** a code is exchanged at once by the client that asked for it */
const CODE_TTL_SECONDS = 60;
// the provider stores and reads its records before any tenant is known: the credential (a code, a token) names it
const PROVIDER = SystemScopes.system('oauth provider');

type OidcModule = typeof import('oidc-provider');

/** Why the provider ended a grant itself: the client revoked its refresh token, or a code or refresh token was used twice (a copy). */
export type ProviderRevocation = 'revoked_by_client' | 'refresh_token_reused' | 'code_reused';
type GrantRevokedListener = (scope: OrgScope, grant: GrantRecord, why: ProviderRevocation) => Promise<void>;

/**
 * Aileron as the OAuth 2.1 authorization server of its own MCP endpoints,
 * with oidc-provider doing the protocol: authorization code with PKCE (S256
 * only), refresh tokens that rotate, revocation, RFC 8707 resource
 * indicators (each access token's audience is one workspace's MCP endpoint),
 * Client ID Metadata Documents and, where an organisation allows it, RFC 7591
 * registration. Its records live in the database (PrismaAdapter); its keys
 * are installation keys sealed by the root key, the same on every replica.
 * The issuer is the public URL; the endpoints are under /oauth.
 *
 * Built on first use, so a process that never serves OAuth never loads it,
 * and the public URL is read then (tests set it once they listen).
 */
@Injectable()
export class OauthProvider {
  private readonly logger = new Logger('OauthProvider');
  private built:
    | Promise<{ provider: Provider; handler: (req: IncomingMessage, res: ServerResponse) => void }>
    | undefined;
  private module: OidcModule | undefined;
  private readonly endedListeners: (() => Promise<void>)[] = [];
  private readonly revokedListeners: GrantRevokedListener[] = [];

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repository: OauthRepository,
    private readonly installationKeys: InstallationKeys,
    private readonly documents: ClientDocuments,
    private readonly cache: PrincipalCache,
    private readonly clock: Clock,
  ) {}

  get issuer(): string {
    return this.config.publicUrl;
  }

  /** The provider, built on first use; a failed build (the database away) is tried again on the next request. */
  async provider(): Promise<Provider> {
    return (await this.build()).provider;
  }

  /** oidc-provider's errors, for the code that refuses in its terms (the interaction pages). */
  async errors(): Promise<OidcModule['errors']> {
    await this.build();
    return this.module!.errors;
  }

  /**
   * Hands a request to the provider. `path` is the provider's own route (below
   * /oauth); the browser asked for `original`. The provider believes the
   * public URL for its own address, whatever Host or X-Forwarded-* the caller
   * sent: the URLs it puts in metadata, redirects and cookies are ours.
   */
  async handle(req: IncomingMessage, res: ServerResponse, path: string, original: string): Promise<void> {
    const { handler } = await this.build();
    const publicUrl = new URL(this.config.publicUrl);
    // OAuth 2.1 §3.2.2.1: an authorization request naming no scope is for the default one, the resource's (the
    // provider grants nothing unasked)
    const query = URL.parse(path, 'http://x');
    if (req.method === 'GET' && query?.pathname === '/auth' && !query.searchParams.has('scope')) {
      const scope = `${query.search ? '&' : '?'}scope=${MCP_SCOPE}`;
      path += scope;
      original += scope;
    }
    req.url = path;
    (req as IncomingMessage & { originalUrl?: string }).originalUrl = original;
    req.headers['x-forwarded-host'] = publicUrl.host;
    req.headers['x-forwarded-proto'] = publicUrl.protocol.slice(0, -1);
    delete req.headers['x-forwarded-for'];
    handler(req, res);
  }

  /** Called when access tokens end (revocation, a refresh's rotation): whatever remembers them must forget. */
  onAccessTokensEnded(listener: () => Promise<void>): void {
    this.endedListeners.push(listener);
  }

  /** Called when the provider ends a grant itself (its consent must end with it), with the consent's own scope. */
  onGrantRevoked(listener: GrantRevokedListener): void {
    this.revokedListeners.push(listener);
  }

  private async grantRevoked(grantId: string, why: ProviderRevocation): Promise<void> {
    const grant = await this.repository.findGrantByProviderGrant(PROVIDER, grantId);
    if (!grant) return;
    const scope = SystemScopes.organization(grant.organizationId);
    await Promise.all(this.revokedListeners.map((listener) => listener(scope, grant, why)));
  }

  private build() {
    this.built ??= this.create().catch((error: unknown) => {
      this.built = undefined;
      throw error;
    });
    return this.built;
  }

  private async create() {
    this.module ??= await import('oidc-provider');
    const { default: ProviderClass, errors } = this.module;
    const [signing, cookieKey] = await Promise.all([
      this.installationKeys.get(SIGNING_KEY, () =>
        generateKeyPairSync('ed25519').privateKey.export({ format: 'der', type: 'pkcs8' }),
      ),
      this.installationKeys.get(COOKIE_KEY, newKey),
    ]);
    const jwk = createPrivateKey({ key: signing, format: 'der', type: 'pkcs8' }).export({ format: 'jwk' });
    // the same on every replica: the key's own thumbprint
    const kid = createHash('sha256').update(String(jwk.x)).digest('base64url').slice(0, 16);
    const ttl = this.config.oauth;
    const documents = this.documents;
    const repository = this.repository;
    const clock = this.clock;
    const hooks = {
      resolveClient: async (id: string): Promise<AdapterPayload | undefined> => {
        try {
          return await documents.resolve(id);
        } catch (error) {
          if (error instanceof ClientDocumentError) throw new errors.InvalidClient(error.reason);
          throw error;
        }
      },
      accessTokensEnded: async () => {
        await this.cache.invalidateAll();
        await Promise.all(this.endedListeners.map((listener) => listener()));
      },
    };
    const publicUrl = this.config.publicUrl;
    const configuration: Configuration = {
      adapter: (model: string) => new PrismaAdapter(model, repository, PROVIDER, clock, hooks),
      jwks: { keys: [{ ...jwk, kid, alg: 'EdDSA', use: 'sig' }] as never },
      cookies: {
        keys: [cookieKey.toString('base64url')],
        names: {
          session: 'aileron_oauth_session',
          interaction: 'aileron_oauth_interaction',
          resume: 'aileron_oauth_resume',
        },
        long: { httpOnly: true, sameSite: 'lax' },
        short: { httpOnly: true, sameSite: 'lax' },
      },
      findAccount: async (_ctx, sub) => {
        const user = await repository.findUserForAccount(PROVIDER, sub);
        // an offboarded person gets no token, nor a refreshed one
        if (!user || user.deactivatedAt) return undefined;
        return { accountId: sub, claims: () => ({ sub }) };
      },
      clientDefaults: {
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        id_token_signed_response_alg: 'EdDSA',
      },
      clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
      responseTypes: ['code'],
      // `mcp` too: it is the resource's scope, and clients that register name it in their metadata
      scopes: ['openid', 'offline_access', MCP_SCOPE],
      // OAuth 2.1: the redirect URI is always named, never implied
      allowOmittingSingleRegisteredRedirectUri: false,
      pkce: { required: () => true },
      enabledJWA: { idTokenSigningAlgValues: ['EdDSA'] },
      formats: { bitsOfOpaqueRandomness: 256 },
      features: {
        devInteractions: { enabled: false },
        dPoP: { enabled: false },
        rpInitiatedLogout: { enabled: false },
        userinfo: { enabled: false },
        pushedAuthorizationRequests: { enabled: false },
        revocation: { enabled: true },
        introspection: { enabled: false },
        registration: { enabled: true, initialAccessToken: false, issueRegistrationAccessToken: false },
        // documents are resolved by the adapter (ClientDocuments: the control plane's outbound rules); this advertises them
        clientIdMetadataDocument: { enabled: true, ack: 'draft-02', allowFetch: async () => false },
        resourceIndicators: {
          enabled: true,
          defaultResource: async (_ctx: KoaContextWithOIDC, _client: unknown, oneOf?: string) => {
            if (oneOf) return oneOf;
            throw new errors.InvalidTarget(
              `the resource parameter is required: the MCP endpoint of a workspace, ${publicUrl}/mcp/<workspace>`,
            );
          },
          useGrantedResource: async () => true,
          getResourceServerInfo: async (_ctx: KoaContextWithOIDC, resource: string) => {
            if (workspaceOfResource(publicUrl, resource) === null)
              throw new errors.InvalidTarget(
                `the resource must be the MCP endpoint of a workspace of this control plane, ${publicUrl}/mcp/<workspace>`,
              );
            return {
              scope: MCP_SCOPE,
              audience: resource,
              accessTokenTTL: ttl.accessTokenTtlSeconds,
              accessTokenFormat: 'opaque',
            };
          },
        },
      } as Configuration['features'],
      ttl: {
        AccessToken: ttl.accessTokenTtlSeconds,
        AuthorizationCode: CODE_TTL_SECONDS,
        RefreshToken: ttl.refreshTokenTtlSeconds,
        // a connection's whole life: after it the person allows the client again, however often it refreshed
        Grant: GRANT_TTL_SECONDS,
        Interaction: INTERACTION_TTL_SECONDS,
        Session: INTERACTION_TTL_SECONDS,
        IdToken: ttl.accessTokenTtlSeconds,
      },
      interactions: { url: (_ctx, interaction) => `${OAUTH_PREFIX}/interaction/${interaction.uid}` },
      // every request for access is shown to the person: only the grant this very consent made is used, never one from earlier
      loadExistingGrant: async (ctx) => {
        const grantId = (ctx.oidc.result as { consent?: { grantId?: string } } | undefined)?.consent?.grantId;
        return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
      },
      issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
      rotateRefreshToken: true,
      // tokens end with the grant (revocation, offboarding), not with the browser's short sign-in at the provider
      expiresWithSession: async () => false,
      clientBasedCORS: (_ctx, origin, client) =>
        client.redirectUris?.some((uri) => URL.parse(uri)?.origin === origin) ?? false,
      renderError: (ctx, out) => {
        const nonce = randomBytes(16).toString('base64');
        ctx.type = 'html';
        ctx.set('content-security-policy', pagesCsp(nonce));
        ctx.set('x-frame-options', 'DENY');
        ctx.set('cache-control', 'no-store');
        ctx.body = refusalPage(
          {
            title: 'The MCP client’s request was refused',
            message: `${out.error}: ${out.error_description ?? 'the request is not valid'}. Nothing was granted; the client that sent you here must be fixed or set up again.`,
            uid: null,
            csrf: null,
          },
          nonce,
        );
      },
    };
    const provider = new ProviderClass(this.issuer, configuration);
    // the addresses it computes are the public URL's (handle sets X-Forwarded-* from it)
    provider.proxy = true;
    // Koa would print failures' stacks to stderr itself: they go to our log, as server_error below
    provider.silent = true;
    provider.on('server_error', (_ctx: unknown, error: Error) =>
      this.logger.error({ err: error }, 'the OAuth provider failed a request'),
    );
    provider.on('grant.revoked', (ctx: KoaContextWithOIDC, grantId: string) => {
      const why: ProviderRevocation =
        ctx.oidc?.route === 'revocation'
          ? 'revoked_by_client'
          : ctx.oidc?.params?.grant_type === 'authorization_code'
            ? 'code_reused'
            : 'refresh_token_reused';
      this.grantRevoked(grantId, why).catch((error: unknown) =>
        this.logger.error({ err: error }, 'could not end the consent of a grant the provider revoked'),
      );
    });
    this.logger.log(`OAuth authorization server ready: issuer ${this.issuer}, endpoints under ${OAUTH_PREFIX}`);
    return { provider, handler: provider.callback() };
  }
}
