import { KeyObject, randomBytes, randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { sign } from 'jsonwebtoken';
import { expect } from 'vitest';
import type { TestControlPlane, TestResponse } from '../support/control-plane';
import { rsaKeyPair } from '../support/rsa-keys';

/** What an endpoint of the local IdP answers instead of its normal answer. */
export type Override = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * A local identity provider on node:http: an RSA key served as a JWKS, a
 * discovery document, an authorization endpoint that consents at once and a
 * token endpoint that issues an ID token. Each endpoint can be made to
 * misbehave, and every request it gets is counted.
 */
export class LocalIdp {
  readonly key: KeyObject;
  readonly kid = 'local-idp-key';
  readonly clientId = 'aileron-test-client';
  readonly publicJwk: Record<string, unknown>;
  /** `METHOD /path` of every request, in order */
  readonly requests: string[] = [];
  /** replaces an endpoint's answer, by path (`/jwks`, `/.well-known/openid-configuration`, `/token`) */
  readonly overrides = new Map<string, Override>();
  /** the claims of the person the authorization endpoint signs in */
  person: Record<string, unknown> = { sub: 'idp-person', email: 'person@example.com' };
  private server: Server | undefined;
  private base = '';
  private readonly nonces = new Map<string, string>();

  constructor(private readonly path = '') {
    const { privateKey, publicKey } = rsaKeyPair();
    this.key = privateKey;
    this.publicJwk = publicKey.export({ format: 'jwk' }) as Record<string, unknown>;
  }

  get issuer(): string {
    return `${this.base}${this.path}`;
  }

  get jwksUrl(): string {
    return `${this.issuer}/jwks`;
  }

  /** The JWKS document the IdP serves. */
  jwks(): { keys: Record<string, unknown>[] } {
    return { keys: [{ ...this.publicJwk, kid: this.kid, use: 'sig', alg: 'RS256' }] };
  }

  count(path: string): number {
    return this.requests.filter((r) => r.endsWith(` ${this.path}${path}`)).length;
  }

  async start(host = '127.0.0.1'): Promise<void> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, host, resolve));
    const address = this.server.address();
    this.base = `http://${host}:${typeof address === 'object' && address ? address.port : 0}`;
  }

  stop(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /**
   * Makes this the organisation's IdP, as an owner sets it: its issuer and
   * JWKS, the audience `aileron`, and whatever `settings` add or replace.
   */
  async trustedBy(cp: TestControlPlane, settings: Record<string, unknown> = {}): Promise<void> {
    const body = Object.fromEntries(
      Object.entries({ issuer: this.issuer, jwks_url: this.jwksUrl, audience: 'aileron', ...settings }).filter(
        ([, v]) => v !== undefined,
      ),
    );
    const put = await cp.request('PUT', '/v1/organization/identity-provider', { body });
    expect(put.status, put.text).toBe(200);
  }

  /** A bearer JWT the IdP issued, as the organisation's other tools would get one. */
  token(claims: Record<string, unknown>, options: { audience?: string | null; kid?: string } = {}): string {
    return sign(claims, this.key, {
      algorithm: 'RS256',
      keyid: options.kid ?? this.kid,
      issuer: this.issuer,
      ...(options.audience === null ? {} : { audience: options.audience ?? 'aileron' }),
      expiresIn: 300,
    });
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', this.base);
    this.requests.push(`${req.method} ${url.pathname}`);
    const path = url.pathname.slice(this.path.length);
    const override = this.overrides.get(path);
    if (override) return override(req, res);
    const json = (status: number, value: unknown): void =>
      void res
        .writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
        .end(JSON.stringify(value));
    switch (`${req.method} ${path}`) {
      case 'GET /jwks':
        return json(200, this.jwks());
      case 'GET /.well-known/openid-configuration':
        return json(200, {
          issuer: this.issuer,
          authorization_endpoint: `${this.issuer}/authorize`,
          token_endpoint: `${this.issuer}/token`,
          jwks_uri: this.jwksUrl,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['none'],
        });
      case 'GET /authorize': {
        const code = randomBytes(16).toString('base64url');
        this.nonces.set(code, url.searchParams.get('nonce') ?? '');
        const back = new URL(url.searchParams.get('redirect_uri') ?? '');
        back.searchParams.set('code', code);
        back.searchParams.set('state', url.searchParams.get('state') ?? '');
        return void res.writeHead(302, { location: back.href }).end();
      }
      case 'POST /token': {
        req.resume();
        return void req.on('end', () => {
          const nonce = [...this.nonces.values()].pop() ?? '';
          const idToken = sign({ ...this.person, nonce }, this.key, {
            algorithm: 'RS256',
            keyid: this.kid,
            issuer: this.issuer,
            audience: this.clientId,
            expiresIn: 300,
          });
          json(200, {
            access_token: randomBytes(16).toString('hex'),
            token_type: 'Bearer',
            expires_in: 300,
            id_token: idToken,
          });
        });
      }
      default:
        return void res.writeHead(404).end();
    }
  }
}

export function expectProblem(res: TestResponse, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.code, res.text).toBe(code);
  expect(res.headers.get('content-type')).toContain('application/problem+json');
}

/** Raw SQL on the control plane's own database, as an operator with psql would run it. */
export function sql<T = Record<string, unknown>>(
  cp: TestControlPlane,
  query: string,
  ...params: unknown[]
): Promise<T[]> {
  return cp.cp.database.client.$queryRawUnsafe<T[]>(query, ...params);
}

/**
 * A browser sign-in through the organisation's IdP, without a browser: the
 * login redirect, the IdP's consent, and the callback with the sign-in cookie.
 * Answers with the first step that did not redirect as expected.
 * `beforeCallback` runs while the browser is away at the IdP (a test moves the clock there).
 */
export async function browserSignIn(
  cp: TestControlPlane,
  organization = 'default',
  beforeCallback?: () => void,
): Promise<TestResponse & { step: 'login' | 'callback' }> {
  const login = await get(
    `${cp.url}/v1/auth/oidc/login?organization=${organization}&return_to=/review/${randomUUID()}`,
  );
  if (login.status !== 302) return { ...login, step: 'login' };
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
  const consent = await get(login.headers.get('location')!);
  const callback = new URL(consent.headers.get('location')!);
  beforeCallback?.();
  return { ...(await get(`${cp.url}${callback.pathname}${callback.search}`, { cookie })), step: 'callback' };
}

/** Redirects are the protocol here: each one is looked at, none followed. */
async function get(url: string, headers: Record<string, string> = {}): Promise<TestResponse> {
  const response = await fetch(url, { headers, redirect: 'manual' });
  const text = await response.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, body, text };
}
