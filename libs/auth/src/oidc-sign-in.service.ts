import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import * as oidc from 'openid-client';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError, ErrorCode, ValidationError } from '@aileron/errors';
import { open, seal, sha256Hex } from '@aileron/crypto';
import { outboundPolicyOf } from '@aileron/net';
import {
  browserSignInIssuerProblem,
  clearCookie,
  LOGIN_COOKIE,
  LOGIN_PATH,
  LOGIN_TTL_SECONDS,
  mintBrowserSessionToken,
  safeReturnPath,
  serializeCookie,
  BROWSER_SESSION_COOKIE,
  BROWSER_SESSION_PATH,
  BROWSER_SESSION_TTL_SECONDS,
} from './domain/browser-session';
import { AuthRepository, IdentityProviderRecord } from './auth.repository';
import { BrowserKeys } from './browser-keys.service';
import { IdpAnswer, IdpFetchError, openIdClientFetch, scrubRemoteText } from './idp-http';
import { PrincipalResolver } from './principal.resolver';
import { SystemScopes } from './scope-issuer';

const LOGIN_AAD = 'aileron/browser-sign-in';
const DISCOVERY_TTL_MS = 10 * 60_000;
const DEFAULT_SCOPES = ['email', 'profile'];

/** What the pending sign-in cookie holds, sealed: nothing in it is readable or changeable by the browser. */
interface PendingSignIn {
  organizationId: string;
  state: string;
  nonce: string;
  verifier: string;
  returnTo: string;
  expiresAt: number;
}

export class SignInError extends DomainError {
  constructor(code: ErrorCode, detail: string) {
    super(code, detail);
  }
}

/**
 * Signing a person in through their organisation's identity provider with the
 * OpenID Connect authorization-code flow and PKCE (openid-client does the
 * protocol). The pending sign-in (state, nonce, code verifier, where to return)
 * rides in a sealed, short-lived cookie; the callback checks state, exchanges
 * the code, verifies the ID token (signature against the IdP's JWKS, issuer,
 * audience = client id, nonce, expiry), maps the claims exactly as an IdP
 * JWT's are mapped, and opens a browser session kept only as a hash.
 */
@Injectable()
export class OidcSignIn implements OnModuleDestroy {
  private readonly logger = new Logger('OidcSignIn');
  /**
   * Each organisation's IdP client, by its settings: bounded like every
   * SharedCache, so it holds the organisations signing in now, not every one
   * that ever did.
   */
  private readonly clients: SharedCache<oidc.Configuration>;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repository: AuthRepository,
    private readonly principals: PrincipalResolver,
    private readonly keys: BrowserKeys,
    private readonly clock: Clock,
    @Inject(MESSAGE_BUS) bus: MessageBus,
  ) {
    this.clients = new SharedCache(bus, 'oidc-clients', DISCOVERY_TTL_MS, clock);
  }

  onModuleDestroy(): void {
    this.clients.close();
  }

  /** The callback the IdP sends people back to; register it as the client's redirect URI. */
  redirectUri(): string {
    return `${this.config.publicUrl}${LOGIN_PATH}/callback`;
  }

  /** Whether the organisation offers browser sign-in, and how to name its IdP on a button. */
  async option(organizationId: string): Promise<{ label: string } | null> {
    const provider = await this.repository.findIdentityProvider(SystemScopes.organization(organizationId));
    return provider?.clientId ? { label: new URL(provider.issuer).host } : null;
  }

  /** The redirect to the IdP's authorization endpoint, and the cookie that remembers what was asked. */
  async begin(
    organizationSlug: string,
    returnTo: string,
    secure: boolean,
  ): Promise<{ location: string; cookie: string }> {
    const returnPath = safeReturnPath(returnTo);
    if (!returnPath)
      throw new ValidationError([
        { path: 'query.return_to', message: 'must be the path of a review page of this control plane' },
      ]);
    const organizationId = await this.repository.findOrganizationIdBySlug(
      SystemScopes.system('browser sign-in'),
      organizationSlug,
    );
    const provider = organizationId
      ? await this.repository.findIdentityProvider(SystemScopes.organization(organizationId))
      : null;
    if (!organizationId || !provider?.clientId) {
      throw new SignInError(
        'SIGN_IN_NOT_CONFIGURED',
        `Organisation "${organizationSlug}" has no identity provider set up for browser sign-in`,
      );
    }
    const client = await this.client(provider);
    const pending: PendingSignIn = {
      organizationId,
      state: oidc.randomState(),
      nonce: oidc.randomNonce(),
      verifier: oidc.randomPKCECodeVerifier(),
      returnTo: returnPath,
      expiresAt: this.clock.now() + LOGIN_TTL_SECONDS * 1000,
    };
    const url = oidc.buildAuthorizationUrl(client, {
      redirect_uri: this.redirectUri(),
      scope: ['openid', ...(provider.scopes.length > 0 ? provider.scopes : DEFAULT_SCOPES)].join(' '),
      state: pending.state,
      nonce: pending.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(pending.verifier),
      code_challenge_method: 'S256',
    });
    const sealed = seal(await this.keys.signInKey(), Buffer.from(JSON.stringify(pending)), LOGIN_AAD);
    return {
      location: url.href,
      cookie: serializeCookie(LOGIN_COOKIE, sealed, { path: LOGIN_PATH, maxAgeSeconds: LOGIN_TTL_SECONDS, secure }),
    };
  }

  /**
   * The IdP's redirect back: `query` is the callback's query string, `pendingCookie`
   * what `begin` left in this browser. Answers with the session cookie and where to go.
   */
  async complete(
    query: URLSearchParams,
    pendingCookie: string | undefined,
    secure: boolean,
  ): Promise<{ location: string; cookies: string[] }> {
    const pending = await this.pending(pendingCookie);
    // state first: a response to someone else's sign-in is not even looked at
    if (query.get('state') !== pending.state) {
      throw new SignInError(
        'SIGN_IN_STATE_MISMATCH',
        'The sign-in response does not belong to the sign-in this browser started; start again from the review page',
      );
    }
    const provider = await this.repository.findIdentityProvider(SystemScopes.organization(pending.organizationId));
    if (!provider?.clientId)
      throw new SignInError(
        'SIGN_IN_NOT_CONFIGURED',
        'The organisation no longer has an identity provider set up for browser sign-in',
      );
    const client = await this.client(provider);
    const callback = new URL(this.redirectUri());
    callback.search = query.toString();
    let claims: Record<string, unknown>;
    try {
      const tokens = await oidc.authorizationCodeGrant(client, callback, {
        pkceCodeVerifier: pending.verifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
      claims = { ...(tokens.claims() ?? {}) };
    } catch (error) {
      throw this.explain(error, provider);
    }
    const principal = await this.principals.fromIdToken(provider, claims);
    const session = mintBrowserSessionToken();
    const now = this.clock.date();
    await this.repository.createBrowserSession(
      SystemScopes.organization(provider.organizationId),
      {
        userId: principal.id,
        tokenHash: session.hash,
        expiresAt: new Date(now.getTime() + BROWSER_SESSION_TTL_SECONDS * 1000),
      },
      now,
    );
    return {
      location: pending.returnTo,
      cookies: [
        serializeCookie(BROWSER_SESSION_COOKIE, session.token, {
          path: BROWSER_SESSION_PATH,
          maxAgeSeconds: BROWSER_SESSION_TTL_SECONDS,
          secure,
        }),
        clearCookie(LOGIN_COOKIE, LOGIN_PATH, secure),
      ],
    };
  }

  private async pending(cookie: string | undefined): Promise<PendingSignIn> {
    const expired = new SignInError(
      'SIGN_IN_EXPIRED',
      'No sign-in started in this browser in the last 10 minutes; start again from the review page',
    );
    if (!cookie) throw expired;
    let pending: PendingSignIn;
    try {
      pending = JSON.parse(open(await this.keys.signInKey(), cookie, LOGIN_AAD).toString('utf8')) as PendingSignIn;
    } catch {
      throw expired;
    }
    if (typeof pending.expiresAt !== 'number' || pending.expiresAt <= this.clock.now()) throw expired;
    return pending;
  }

  /**
   * openid-client's failures as problems a person can act on. Never the IdP's
   * free text (its error bodies are logged, scrubbed, by the fetch), never our
   * reasons for refusing an address (those are for the operator's log), never
   * the secret.
   */
  private explain(error: unknown, provider: IdentityProviderRecord): DomainError {
    if (error instanceof DomainError) return error;
    const unreachable = causeOf(error, IdpFetchError);
    if (unreachable) {
      this.logger.warn(
        { issuer: provider.issuer, reason: unreachable.reason },
        `browser sign-in could not reach the identity provider: ${unreachable.reason}`,
      );
      return new SignInError(
        'IDP_UNREACHABLE',
        `Could not complete the sign-in with the identity provider at ${hostOf(provider.issuer)}`,
      );
    }
    if (error instanceof oidc.AuthorizationResponseError) {
      return new SignInError(
        'SIGN_IN_REFUSED',
        `The identity provider refused the sign-in (${oauthErrorCode(error.error)})`,
      );
    }
    if (error instanceof oidc.ResponseBodyError) {
      // invalid_grant: a code issued for another sign-in (its PKCE challenge does not match this browser's verifier), used or expired
      return new SignInError(
        'SIGN_IN_CODE_REJECTED',
        `The identity provider did not accept the authorization code (${oauthErrorCode(error.error)}); start again from the review page`,
      );
    }
    if (error instanceof oidc.ClientError) {
      const claim = (error.cause as { cause?: { claim?: unknown } } | undefined)?.cause?.claim;
      if (claim === 'nonce')
        return new SignInError(
          'SIGN_IN_NONCE_MISMATCH',
          'The ID token was not issued for the sign-in this browser started (nonce mismatch)',
        );
      if (
        error.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' ||
        error.code === 'OAUTH_RESPONSE_IS_NOT_JSON' ||
        error.code === 'OAUTH_PARSE_ERROR'
      ) {
        this.logger.warn(
          { issuer: provider.issuer, code: error.code },
          'browser sign-in: the identity provider answered unexpectedly',
        );
        return new SignInError(
          'IDP_UNREACHABLE',
          `The identity provider at ${hostOf(provider.issuer)} answered unexpectedly`,
        );
      }
      // openid-client's own words about the ID token (which check failed), never the IdP's
      return new SignInError(
        'SIGN_IN_ID_TOKEN_INVALID',
        `The identity provider's ID token is not valid: ${error.message}${typeof claim === 'string' ? ` ("${claim}" claim)` : ''}`,
      );
    }
    this.logger.warn(
      {
        issuer: provider.issuer,
        error: error instanceof Error ? `${error.name}: ${scrubRemoteText(error.message)}` : 'unknown',
      },
      'browser sign-in failed talking to the identity provider',
    );
    return new SignInError(
      'IDP_UNREACHABLE',
      `Could not complete the sign-in with the identity provider at ${hostOf(provider.issuer)}`,
    );
  }

  /** An error answer of the IdP, for the operator: what and where, its body scrubbed. */
  private logErrorAnswer(issuer: string, answer: IdpAnswer, url: URL): void {
    this.logger.warn(
      { issuer, endpoint: `${url.host}${url.pathname}`, status: answer.status, body: scrubRemoteText(answer.body) },
      `the identity provider answered HTTP ${answer.status}`,
    );
  }

  /** The client for the organisation's IdP, from its discovery document (cached a while). */
  private client(provider: IdentityProviderRecord): Promise<oidc.Configuration> {
    // new settings make a new client; the old one ages out (a failed discovery is not kept)
    const settings = sha256Hex([provider.issuer, provider.clientId, provider.clientSecretSealed ?? ''].join('\0'));
    return this.clients.getOrLoad(`${provider.organizationId}:${settings}`, () => this.discover(provider));
  }

  private async discover(provider: IdentityProviderRecord): Promise<oidc.Configuration> {
    const problem = browserSignInIssuerProblem(provider.issuer);
    if (problem) throw new SignInError('SIGN_IN_NOT_CONFIGURED', `The identity provider's issuer ${problem}`);
    // the organisation chose these URLs, and the discovery document the next ones: every connection passes the SSRF rules
    const fetcher = openIdClientFetch(outboundPolicyOf(this.config), (answer, url) =>
      this.logErrorAnswer(provider.issuer, answer, url),
    );
    const insecure = new URL(provider.issuer).protocol === 'http:';
    let metadata: oidc.ServerMetadata;
    try {
      const discovered = await oidc.discovery(new URL(provider.issuer), provider.clientId!, undefined, oidc.None(), {
        [oidc.customFetch]: fetcher,
        timeout: 10,
        ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
      });
      metadata = discovered.serverMetadata();
    } catch (error) {
      const unreachable = causeOf(error, IdpFetchError);
      const why = unreachable
        ? unreachable.reason
        : error instanceof Error
          ? `${error.name}: ${scrubRemoteText(error.message)}`
          : 'unknown error';
      this.logger.warn(
        { issuer: provider.issuer, reason: why },
        `could not read the identity provider's discovery document: ${why}`,
      );
      throw new SignInError(
        'IDP_UNREACHABLE',
        `Could not read the discovery document of the identity provider at ${hostOf(provider.issuer)}`,
      );
    }
    const secret = provider.clientSecretSealed
      ? this.keys.openClientSecret(provider.organizationId, provider.clientSecretSealed)
      : null;
    const methods = metadata.token_endpoint_auth_methods_supported;
    const auth = !secret
      ? oidc.None()
      : methods && !methods.includes('client_secret_basic') && methods.includes('client_secret_post')
        ? oidc.ClientSecretPost(secret)
        : oidc.ClientSecretBasic(secret);
    const client = new oidc.Configuration(metadata, provider.clientId!, undefined, auth);
    client[oidc.customFetch] = fetcher;
    client.timeout = 10;
    if (insecure) oidc.allowInsecureRequests(client);
    // the ID token's signature is checked against the IdP's JWKS, not taken on trust from the TLS channel
    oidc.enableNonRepudiationChecks(client);
    return client;
  }
}

/** The error codes OAuth 2.0 and OpenID Connect define; anything else the IdP sends is not repeated. */
const OAUTH_ERROR_CODES = new Set([
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'access_denied',
  'unsupported_response_type',
  'server_error',
  'temporarily_unavailable',
  'interaction_required',
  'login_required',
  'account_selection_required',
  'consent_required',
  'invalid_request_uri',
  'invalid_request_object',
  'request_not_supported',
  'request_uri_not_supported',
  'registration_not_supported',
]);

function oauthErrorCode(value: unknown): string {
  return typeof value === 'string' && OAUTH_ERROR_CODES.has(value) ? value : 'error';
}

function hostOf(url: string): string {
  return URL.canParse(url) ? new URL(url).host : 'an invalid URL';
}

/** openid-client wraps what our fetch threw; the reason is in the chain of causes. */
function causeOf<T extends Error>(error: unknown, type: new (...args: never[]) => T): T | null {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    if (current instanceof type) return current;
  }
  return null;
}
