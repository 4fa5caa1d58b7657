import { createHash } from 'node:crypto';
import { Logger } from '@nestjs/common';
import {
  discoverOAuthServerInfo,
  exchangeAuthorization,
  extractWWWAuthenticateParams,
  refreshAuthorization,
  registerClient,
  selectClientAuthMethod,
  selectResourceURL,
  startAuthorization,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { InvalidGrantError, OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type {
  AuthorizationServerMetadata,
  OAuthClientInformationFull,
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { guardedWebFetch, IdpFetchError, scrubRemoteText } from '@aileron/auth';
import type { OutboundPolicy } from '@aileron/net';

const logger = new Logger('UpstreamOauth');

/** the protocol the discovery probe speaks: the SDK's, as the pool's upstream sessions do */
const PROBE_PROTOCOL_VERSION = '2025-11-25';

/** How the pool is known to an authorization server. */
export type Registration = 'preregistered' | 'metadata_document' | 'dynamic';

/**
 * Everything about an upstream's authorization that is not secret, as a
 * connection (and a connection being made) keeps it: enough to exchange a
 * code, refresh and revoke without discovering again.
 */
export interface UpstreamAuthorization {
  /** the authorization server as discovery found it: tokens and registrations are bound to it */
  authorizationServer: string;
  /** its RFC 8414 / OpenID metadata; null for one that publishes none (endpoints at its root, the 2025-03-26 fallback) */
  metadata: AuthorizationServerMetadata | null;
  /** RFC 8707: the resource the tokens are for, verbatim from the upstream's protected resource metadata */
  resource: string | null;
  redirectUri: string;
  /** what the upstream asked for beyond the connection's scope (a 403 insufficient_scope): a reconnect asks for it too */
  stepUpScope?: string | undefined;
  client: {
    client_id: string;
    registration: Registration;
    token_endpoint_auth_method?: string | undefined;
    /** where its secret is: a vault reference (an admin registered it), or kept by the vault (a registration's); none for a public client */
    secret: { ref: string } | { kept: string } | null;
  };
}

/** A step of the protocol failed; `reason` is ours (the host and what went wrong), never the remote's words. */
export class UpstreamOauthError extends Error {
  constructor(
    readonly step: 'discovery' | 'registration' | 'authorization' | 'token' | 'refresh' | 'revocation',
    readonly reason: string,
    /** the OAuth error code the server answered (invalid_grant, …), when it answered one */
    readonly oauthError: string | null = null,
  ) {
    super(reason);
    this.name = 'UpstreamOauthError';
  }

  /** The server refused the grant itself (a revoked or expired refresh token): only a new sign-in helps. */
  get refused(): boolean {
    return this.oauthError === 'invalid_grant' || this.oauthError === 'unauthorized_client';
  }
}

export interface Discovery {
  authorizationServer: string;
  metadata: AuthorizationServerMetadata | null;
  resource: string | null;
  /** the scopes to ask for, by the MCP scope selection strategy, or none */
  scope: string | undefined;
}

/**
 * The pool as an OAuth client of upstream MCP servers, with the MCP SDK's
 * client helpers doing the protocol (discovery, registration, PKCE, token
 * exchange and refresh). Every request goes through the installation's
 * outbound rules (idpFetch: SSRF checks on every address, https but on
 * loopback, bounded in size and time, no redirects followed).
 */
export class UpstreamOauth {
  private readonly fetch: (url: string | URL, init?: RequestInit) => Promise<Response>;

  constructor(policy: OutboundPolicy) {
    this.fetch = guardedWebFetch(policy, (answer, url) => {
      // a 401 is the answer discovery asks for (the upstream's challenge), not a failure
      if (answer.status === 401) return;
      logger.warn(
        { status: answer.status, host: url.host, said: scrubRemoteText(answer.body) },
        'an upstream authorization endpoint answered an error',
      );
    });
  }

  /**
   * Where the upstream at `url` sends clients to sign in, as the MCP
   * authorization specification says: its 401's `WWW-Authenticate`
   * (`resource_metadata`, `scope`), else the well-known protected resource
   * metadata; then its authorization server's metadata (RFC 8414, else OpenID
   * discovery); the resource indicator from the metadata. Scopes: the entry's
   * when it names some, else the challenge's, else the resource's, with
   * `offline_access` added where the authorization server offers it (a
   * refresh token is what keeps a connection alive).
   */
  async discover(url: string, entryScopes: string[] | undefined): Promise<Discovery> {
    const challenge = await this.challenge(url);
    let info: Awaited<ReturnType<typeof discoverOAuthServerInfo>>;
    try {
      info = await discoverOAuthServerInfo(url, {
        ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
        fetchFn: this.fetch,
      });
    } catch (error) {
      throw failure('discovery', `${hostOf(url)}'s authorization could not be discovered`, error);
    }
    let resource: string | null = null;
    if (info.resourceMetadata) {
      try {
        // checked against the server's URL by the SDK; sent verbatim (a parsed URL would gain a "/")
        if (await selectResourceURL(url, {} as never, info.resourceMetadata)) resource = info.resourceMetadata.resource;
      } catch {
        throw new UpstreamOauthError(
          'discovery',
          `${hostOf(url)} names a protected resource (${hostOf(info.resourceMetadata.resource)}) that is not its own URL`,
        );
      }
    }
    const metadata = info.authorizationServerMetadata ?? null;
    // RFC 8414 §3.3: metadata naming another issuer than the one it was fetched for is not to be used (a mix-up)
    if (info.resourceMetadata && metadata && metadata.issuer !== info.authorizationServerUrl)
      throw new UpstreamOauthError(
        'discovery',
        `${hostOf(String(info.authorizationServerUrl))}'s metadata names another issuer (${hostOf(metadata.issuer)})`,
      );
    let scope =
      entryScopes?.join(' ') || challenge.scope || info.resourceMetadata?.scopes_supported?.join(' ') || undefined;
    if (scope && metadata?.scopes_supported?.includes('offline_access') && !scope.split(' ').includes('offline_access'))
      scope = `${scope} offline_access`;
    return { authorizationServer: String(info.authorizationServerUrl), metadata, resource, scope };
  }

  /**
   * A dynamic registration (RFC 7591) of the pool at the authorization
   * server, or null when it takes none.
   */
  async register(discovery: Discovery, client: OAuthClientMetadata): Promise<OAuthClientInformationFull | null> {
    // no metadata: the 2025-03-26 fallback puts /register at the server's root
    if (discovery.metadata && !discovery.metadata.registration_endpoint) return null;
    try {
      return await registerClient(discovery.authorizationServer, {
        ...(discovery.metadata ? { metadata: discovery.metadata } : {}),
        clientMetadata: client,
        ...(discovery.scope ? { scope: discovery.scope } : {}),
        fetchFn: this.fetch,
      });
    } catch (error) {
      if (!discovery.metadata) return null;
      throw failure('registration', `${hostOf(discovery.authorizationServer)} refused to register the pool`, error);
    }
  }

  /** The authorization URL to send the person's browser to (PKCE S256, `state`, the resource), and its verifier. */
  async authorizationUrl(
    upstream: UpstreamAuthorization,
    scope: string | undefined,
    state: string,
  ): Promise<{ url: URL; verifier: string }> {
    try {
      const { authorizationUrl, codeVerifier } = await startAuthorization(upstream.authorizationServer, {
        ...(upstream.metadata ? { metadata: upstream.metadata } : {}),
        clientInformation: { client_id: upstream.client.client_id },
        redirectUrl: upstream.redirectUri,
        ...(scope ? { scope } : {}),
        state,
        ...(upstream.resource ? { resource: upstream.resource } : {}),
      });
      return { url: authorizationUrl, verifier: codeVerifier };
    } catch (error) {
      // the SDK refuses a server that does not do S256: so do we
      throw failure(
        'authorization',
        `${hostOf(upstream.authorizationServer)} cannot be signed in to: it does not support PKCE with S256`,
        error,
      );
    }
  }

  async exchange(
    upstream: UpstreamAuthorization,
    secret: string | null,
    code: string,
    verifier: string,
  ): Promise<OAuthTokens> {
    try {
      return await exchangeAuthorization(upstream.authorizationServer, {
        ...(upstream.metadata ? { metadata: upstream.metadata } : {}),
        clientInformation: clientInformation(upstream, secret),
        authorizationCode: code,
        codeVerifier: verifier,
        redirectUri: upstream.redirectUri,
        ...(upstream.resource ? { resource: upstream.resource } : {}),
        fetchFn: this.fetch,
      });
    } catch (error) {
      throw failure('token', `${hostOf(upstream.authorizationServer)} did not give tokens for the code`, error);
    }
  }

  /** New tokens for a refresh token; the refresh token comes back rotated, or the same when the server keeps it. */
  async refresh(upstream: UpstreamAuthorization, secret: string | null, refreshToken: string): Promise<OAuthTokens> {
    try {
      return await refreshAuthorization(upstream.authorizationServer, {
        ...(upstream.metadata ? { metadata: upstream.metadata } : {}),
        clientInformation: clientInformation(upstream, secret),
        refreshToken,
        ...(upstream.resource ? { resource: upstream.resource } : {}),
        fetchFn: this.fetch,
      });
    } catch (error) {
      throw failure('refresh', `${hostOf(upstream.authorizationServer)} did not renew the token`, error);
    }
  }

  /**
   * RFC 7009, where the server has a revocation endpoint (the SDK has no
   * helper for it): the refresh token, which ends the grant on most servers,
   * then the access token. Whether it did is the answer; failing is no error.
   */
  async revoke(
    upstream: UpstreamAuthorization,
    secret: string | null,
    tokens: { access_token: string; refresh_token?: string | undefined },
  ): Promise<boolean> {
    const endpoint = (upstream.metadata as { revocation_endpoint?: unknown } | null)?.revocation_endpoint;
    if (typeof endpoint !== 'string') return false;
    const information = clientInformation(upstream, secret);
    const metadata = upstream.metadata as { revocation_endpoint_auth_methods_supported?: string[] } | null;
    const method = selectClientAuthMethod(
      information,
      metadata?.revocation_endpoint_auth_methods_supported ??
        upstream.metadata?.token_endpoint_auth_methods_supported ??
        [],
    );
    let revoked = true;
    for (const [token, hint] of [
      [tokens.refresh_token, 'refresh_token'],
      [tokens.access_token, 'access_token'],
    ] as const) {
      if (!token) continue;
      const params = new URLSearchParams({ token, token_type_hint: hint });
      const headers = new Headers({ 'content-type': 'application/x-www-form-urlencoded' });
      if (method === 'client_secret_basic' && information.client_secret)
        headers.set(
          'authorization',
          `Basic ${Buffer.from(`${encodeURIComponent(information.client_id)}:${encodeURIComponent(information.client_secret)}`).toString('base64')}`,
        );
      else {
        params.set('client_id', information.client_id);
        if (method === 'client_secret_post' && information.client_secret)
          params.set('client_secret', information.client_secret);
      }
      try {
        const answer = await this.fetch(endpoint, { method: 'POST', headers, body: params.toString() });
        revoked &&= answer.ok;
      } catch (error) {
        logger.warn(
          { host: hostOf(endpoint), reason: error instanceof IdpFetchError ? error.reason : 'failed' },
          'a token could not be revoked upstream',
        );
        revoked = false;
      }
    }
    return revoked;
  }

  /**
   * The upstream's answer to requests without a token: what its 401 says
   * about signing in. An upstream may let `initialize` through and challenge
   * the requests after it (its scope then comes only with that 401), so a
   * session it opened is asked for its tools too, as a client would next.
   */
  private async challenge(url: string): Promise<{ resourceMetadataUrl?: URL; scope?: string }> {
    // the version header on every POST: servers of later protocol versions refuse a request without it
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROBE_PROTOCOL_VERSION,
    };
    let answer: Response;
    try {
      answer = await this.fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: PROBE_PROTOCOL_VERSION,
            capabilities: {},
            clientInfo: { name: 'aileron', version: '1' },
          },
        }),
      });
      const session = answer.ok ? answer.headers.get('mcp-session-id') : null;
      if (answer.ok) {
        const sessionHeaders = { ...(session ? { 'mcp-session-id': session } : {}) };
        answer = await this.fetch(url, {
          method: 'POST',
          headers: { ...headers, ...sessionHeaders },
          body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
        });
        // the probe's session is of no further use: ended, as sessions are not left to the upstream to expire
        if (session)
          await this.fetch(url, { method: 'DELETE', headers: { ...headers, ...sessionHeaders } }).catch(
            () => undefined,
          );
      }
    } catch (error) {
      throw failure('discovery', `${hostOf(url)} could not be reached`, error);
    }
    if (answer.status !== 401) return {};
    const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(answer);
    return { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}), ...(scope ? { scope } : {}) };
  }
}

function clientInformation(upstream: UpstreamAuthorization, secret: string | null): OAuthClientInformationMixed {
  return {
    client_id: upstream.client.client_id,
    ...(secret !== null ? { client_secret: secret } : {}),
    ...(upstream.client.token_endpoint_auth_method
      ? { token_endpoint_auth_method: upstream.client.token_endpoint_auth_method }
      : {}),
  } as OAuthClientInformationMixed;
}

/** A failure in our words: the host and the step; the OAuth error code when the server answered one. */
function failure(step: UpstreamOauthError['step'], reason: string, error: unknown): UpstreamOauthError {
  if (error instanceof UpstreamOauthError) return error;
  if (error instanceof IdpFetchError) return new UpstreamOauthError(step, `${reason}: ${error.reason}`);
  if (error instanceof OAuthError) {
    const code = /^[a-z_]{1,64}$/.test(error.errorCode) ? error.errorCode : 'server_error';
    return new UpstreamOauthError(
      step,
      `${reason} (${code})`,
      error instanceof InvalidGrantError ? 'invalid_grant' : code,
    );
  }
  // the SDK's own messages quote URLs and bodies: the log gets them scrubbed, the caller our words
  logger.warn({ step, said: scrubRemoteText(error instanceof Error ? error.message : String(error)) }, reason);
  return new UpstreamOauthError(step, reason);
}

function hostOf(url: string): string {
  return URL.canParse(url) ? new URL(url).host : 'the upstream';
}

/** The id a dynamic registration is kept under in the vault: one per server, authorization server and redirect URI. */
export function registrationKey(server: string, authorizationServer: string, redirectUri: string): string {
  const digest = createHash('sha256').update(`${authorizationServer}\n${redirectUri}`).digest('hex').slice(0, 32);
  return `oauth-client:${server}:${digest}`;
}
