import { createServer, Server } from 'node:http';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { TestControlPlane, TestResponse } from '../support/control-plane';
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
