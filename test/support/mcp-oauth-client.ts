import { createServer, Server } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import type { TestControlPlane, TestResponse } from './control-plane';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';

/** What the authorization server sent the browser back to the client with. */
export interface Callback {
  code: string | null;
  state: string | null;
  error: string | null;
  errorDescription: string | null;
}

/**
 * An MCP client's web side on loopback, as Claude or Cursor have one: its
 * Client ID Metadata Documents (any path, any content a test gives, hostile
 * ones included) and the redirect URI the browser comes back to with the code.
 */
export class ClientSite {
  private server: Server | undefined;
  private base = '';
  private readonly documents = new Map<string, unknown>();
  private readonly waiting: ((callback: Callback) => void)[] = [];
  private readonly arrived: Callback[] = [];
  /** every document fetch, by path: the control plane's reads */
  readonly fetched: string[] = [];

  get redirectUri(): string {
    return `${this.base}/callback`;
  }

  /** Publishes a document at `path`; answers its URL (the client_id). */
  document(path: string, make: (url: string) => unknown): string {
    const url = `${this.base}${path}`;
    this.documents.set(path, make(url));
    return url;
  }

  /** A well-behaved client's document: a public client with the site's redirect URI. */
  goodDocument(path: string, name: string): string {
    return this.document(path, (url) => ({
      client_id: url,
      client_name: name,
      redirect_uris: [this.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }));
  }

  /** Registers a public client with the site's redirect URI, as RFC 7591 has a client do it itself. */
  register(cp: TestControlPlane, name: string): Promise<TestResponse> {
    return cp.request('POST', '/oauth/reg', {
      token: null,
      body: { client_name: name, redirect_uris: [this.redirectUri], token_endpoint_auth_method: 'none' },
    });
  }

  /** The next time the browser arrives at the redirect URI. */
  nextCallback(): Promise<Callback> {
    const ready = this.arrived.shift();
    return ready ? Promise.resolve(ready) : new Promise((resolve) => this.waiting.push(resolve));
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', this.base);
      if (url.pathname === '/callback') {
        const callback: Callback = {
          code: url.searchParams.get('code'),
          state: url.searchParams.get('state'),
          error: url.searchParams.get('error'),
          errorDescription: url.searchParams.get('error_description'),
        };
        const waiter = this.waiting.shift();
        if (waiter) waiter(callback);
        else this.arrived.push(callback);
        return void res
          .writeHead(200, { 'content-type': 'text/html' })
          .end('<!doctype html><title>Done</title><p>You can close this page.</p>');
      }
      this.fetched.push(url.pathname);
      const document = this.documents.get(url.pathname);
      if (document === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  }

  stop(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/**
 * The MCP SDK's OAuth client side, kept in memory as a desktop client keeps
 * it: the client id (a metadata document's URL, or none, to register
 * dynamically), the PKCE verifier, the tokens; `authorizationUrl` is where it
 * would open the browser.
 */
export class MemoryOAuthProvider implements OAuthClientProvider {
  authorizationUrl: URL | undefined;
  private verifier = '';
  private saved: OAuthTokens | undefined;
  private information: OAuthClientInformationMixed | undefined;

  constructor(
    private readonly site: ClientSite,
    clientId: string | undefined,
    private readonly name: string,
  ) {
    // a loopback metadata URL is given as the client's id: the SDK would only announce an https one itself
    if (clientId) this.information = { client_id: clientId };
  }

  get redirectUrl(): string {
    return this.site.redirectUri;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.site.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.information;
  }

  saveClientInformation(information: OAuthClientInformationMixed): void {
    this.information = information;
  }

  tokens(): OAuthTokens | undefined {
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.saved = tokens;
  }

  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    return this.verifier;
  }
}

/** An MCP initialize request with `token`, as any client's first request on an endpoint. */
export function initializeWith(cp: TestControlPlane, token: string, path = '/mcp/default'): Promise<TestResponse> {
  return cp.request('POST', path, {
    token,
    headers: { accept: 'application/json, text/event-stream' },
    body: {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    },
  });
}

/** The SDK's transport to an MCP endpoint of `cp`, authorising with `provider`. */
export function oauthTransport(
  cp: TestControlPlane,
  path: string,
  provider: MemoryOAuthProvider,
): StreamableHTTPClientTransport {
  return new StreamableHTTPClientTransport(new URL(`${cp.url}${path}`), { authProvider: provider });
}

/**
 * A client's first connection, as Claude or Cursor make it: the SDK meets the
 * endpoint's 401 and asks for the browser; `page` opens the authorization
 * URL (`signIn` takes it through the console's sign-in if it has no session
 * yet) and allows the client on the consent page; the SDK exchanges the code,
 * and `provider` holds the tokens. Answers the authorization URL and the
 * consent page's text, for the test to look at.
 */
export async function connectInBrowser(
  cp: TestControlPlane,
  page: Page,
  site: ClientSite,
  provider: MemoryOAuthProvider,
  options: { path?: string; signIn?: (page: Page) => Promise<void> } = {},
): Promise<{ authorizationUrl: URL; consent: string }> {
  const path = options.path ?? '/mcp/default';
  const first = new Client({ name: 'oauth-test', version: '1.0.0' });
  await expect(first.connect(oauthTransport(cp, path, provider))).rejects.toThrow(UnauthorizedError);
  const authorizationUrl = provider.authorizationUrl!;
  const callback = site.nextCallback();
  await page.goto(authorizationUrl.href);
  if (new URL(page.url()).pathname === '/sign-in') await options.signIn?.(page);
  await page.waitForURL(/\/oauth\/interaction\//);
  const consent = (await page.locator('main').innerText()).replace(/\s+/g, ' ');
  await page.getByRole('button', { name: 'Allow' }).click();
  const { code, error } = await callback;
  expect(error).toBeNull();
  await oauthTransport(cp, path, provider).finishAuth(code!);
  return { authorizationUrl, consent };
}

/** A token request of the refresh grant, as a public client makes it. */
export function refreshGrant(cp: TestControlPlane, clientId: string, refreshToken: string): Promise<TestResponse> {
  return cp.request('POST', '/oauth/token', {
    token: null,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: clientId,
    }).toString(),
  });
}
