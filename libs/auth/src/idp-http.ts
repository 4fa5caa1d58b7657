import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { CustomFetch, FetchBody } from 'openid-client';
import {
  checkOutboundUrl,
  guardedLookup,
  OutboundPolicy,
  OutboundUrlRefusedError,
  RefusedAddressError,
} from '@aileron/net';
import { plainHttpProblem } from './domain/identity-provider';

/**
 * A JWKS, a discovery document or a token answer is a few kilobytes; the
 * bounds keep a slow or huge answer (possibly provoked by an unauthenticated
 * token naming the IdP) from holding memory or a request for long.
 */
export const IDP_FETCH_LIMITS: IdpFetchLimits = { timeoutMs: 5_000, maxBytes: 1024 * 1024 };

export interface IdpFetchLimits {
  /** the whole exchange: connection, request and the full answer */
  timeoutMs: number;
  maxBytes: number;
}

export interface IdpRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal | null;
}

export interface IdpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * Talking to the identity provider failed. `reason` is ours: it names the
 * host and what went wrong, never the URL's path or query and never anything
 * the remote sent.
 */
export class IdpFetchError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'IdpFetchError';
  }
}

/**
 * One HTTP exchange with an organisation's identity provider. The organisation
 * chose the URLs, so they pass the same SSRF rules as webhooks: https (plain
 * http only to loopback), every address the name resolves to checked when the
 * URL is checked and again by the socket's resolver (DNS rebinding), a fresh
 * connection each time (a pooled socket would skip the resolver), redirects
 * never followed, the answer bounded in size and time.
 */
export async function idpFetch(
  url: string,
  request: IdpRequest,
  policy: OutboundPolicy,
  limits: IdpFetchLimits = IDP_FETCH_LIMITS,
): Promise<IdpAnswer> {
  return exchange(await checkIdpUrl(url, policy), request, policy, limits);
}

/**
 * Whether the control plane may fetch from this URL of an identity provider,
 * as the URL is checked before connecting: when a setting is saved, and
 * before every fetch.
 */
export async function checkIdpUrl(url: string, policy: OutboundPolicy): Promise<URL> {
  const insecure = plainHttpProblem(url);
  if (insecure)
    throw new IdpFetchError(`${URL.canParse(url) ? new URL(url).host : '(not a URL)'} refused: ${insecure}`);
  try {
    return await checkOutboundUrl(url, policy);
  } catch (error) {
    if (error instanceof OutboundUrlRefusedError) throw new IdpFetchError(error.message);
    throw error;
  }
}

function exchange(
  target: URL,
  request: IdpRequest,
  policy: OutboundPolicy,
  limits: IdpFetchLimits,
): Promise<IdpAnswer> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (outcome: IdpAnswer | IdpFetchError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.signal?.removeEventListener('abort', onAbort);
      if (outcome instanceof IdpFetchError) {
        outgoing.destroy();
        reject(outcome);
      } else {
        resolve(outcome);
      }
    };
    const outgoing = (target.protocol === 'https:' ? httpsRequest : httpRequest)(
      target,
      {
        method: request.method ?? 'GET',
        headers: {
          ...request.headers,
          ...(request.body !== undefined ? { 'content-length': String(Buffer.byteLength(request.body)) } : {}),
        },
        agent: false,
        lookup: guardedLookup(target.hostname, policy),
      },
      (answer) => readBounded(answer, target.host, limits.maxBytes, settle),
    );
    const timer = setTimeout(
      () => settle(new IdpFetchError(`${target.host} did not answer within ${limits.timeoutMs / 1000} s`)),
      limits.timeoutMs,
    );
    timer.unref();
    const onAbort = (): void => settle(new IdpFetchError(`the request to ${target.host} was cancelled`));
    if (request.signal?.aborted) return onAbort();
    request.signal?.addEventListener('abort', onAbort);
    outgoing.on('error', (error: Error & { code?: string }) =>
      settle(new IdpFetchError(describeFailure(target.host, error))),
    );
    outgoing.end(request.body);
  });
}

function readBounded(
  answer: IncomingMessage,
  host: string,
  maxBytes: number,
  settle: (outcome: IdpAnswer | IdpFetchError) => void,
): void {
  const tooLarge = (): void =>
    settle(new IdpFetchError(`${host} answered with more than ${Math.round(maxBytes / 1024)} KiB`));
  if (Number(answer.headers['content-length'] ?? 0) > maxBytes) return tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  answer.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxBytes) return tooLarge();
    chunks.push(chunk);
  });
  answer.on('end', () =>
    settle({ status: answer.statusCode ?? 0, headers: answer.headers, body: Buffer.concat(chunks) }),
  );
  answer.on('error', () => settle(new IdpFetchError(`${host} broke off its answer`)));
}

function describeFailure(host: string, error: Error & { code?: string }): string {
  if (error instanceof RefusedAddressError) return error.message;
  if (error.code === 'ENOTFOUND' || error.code === 'EAI_AGAIN') return `${host} does not resolve`;
  if (error.code && /^(ERR_TLS|CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO)/.test(error.code))
    return `${host}: TLS failed (${error.code})`;
  // a generic error's message may quote the request: only its code is kept
  return `${host}: connection failed${error.code ? ` (${error.code})` : ''}`;
}

/**
 * What the remote sent, fit for a log line: printable, short, and with
 * anything long enough to be a code, a token or a secret cut out.
 */
export function scrubRemoteText(body: Buffer | string, max = 300): string {
  const text = (typeof body === 'string' ? body : body.subarray(0, max * 4).toString('utf8'))
    .replace(/[^\x20-\x7E]+/g, ' ')
    .replace(/[A-Za-z0-9._~+/=-]{24,}/g, '[redacted]')
    .trim();
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/**
 * A WHATWG-style fetch through idpFetch, for libraries that take one
 * (openid-client here, the MCP SDK's OAuth client helpers for the pool's
 * upstreams). An answer that is an error is handed to `onErrorAnswer` for the
 * log; what the caller of ours sees is decided elsewhere, never from the
 * remote's text.
 */
export function guardedWebFetch(
  policy: OutboundPolicy,
  onErrorAnswer: (answer: IdpAnswer, url: URL) => void = () => undefined,
): (url: string | URL, init?: RequestInit) => Promise<Response> {
  return async (url, init = {}) => {
    const answer = await idpFetch(
      String(url),
      {
        ...(init.method !== undefined ? { method: init.method } : {}),
        headers: headerRecord(init.headers),
        body: bodyText(init.body as FetchBody),
        signal: init.signal ?? null,
      },
      policy,
    );
    if (answer.status >= 300) onErrorAnswer(answer, new URL(url));
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, one);
    }
    const empty = answer.status === 204 || answer.status === 304;
    return new Response(empty ? null : new Uint8Array(answer.body), { status: answer.status, headers });
  };
}

/** openid-client's fetch (discovery, the token endpoint, the JWKS of ID tokens), through idpFetch. */
export function openIdClientFetch(
  policy: OutboundPolicy,
  onErrorAnswer: (answer: IdpAnswer, url: URL) => void,
): CustomFetch {
  const fetch = guardedWebFetch(policy, onErrorAnswer);
  return (url, options) =>
    fetch(url, {
      method: options.method,
      headers: options.headers,
      body: options.body as RequestInit['body'],
      signal: options.signal ?? null,
    });
}

function headerRecord(headers: RequestInit['headers']): Record<string, string> {
  const record: Record<string, string> = {};
  new Headers(headers).forEach((value, name) => (record[name] = value));
  return record;
}

function bodyText(body: FetchBody): string | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return body;
  if (body instanceof URLSearchParams) return body.toString();
  if (body instanceof Uint8Array) return Buffer.from(body).toString('utf8');
  throw new IdpFetchError('unsupported request body');
}
