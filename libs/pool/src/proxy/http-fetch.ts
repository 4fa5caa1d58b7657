import { Agent as HttpAgent, IncomingMessage, request as httpRequest, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { urlToHttpOptions } from 'node:url';
import { guardedLookup, type OutboundPolicy } from '@aileron/net';

// Instances are few and close: connections stay open between calls.
const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 256 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 256 });

/**
 * Servers elsewhere get agents whose sockets resolve through the SSRF rules:
 * each new connection is checked on the address it is about to use, so a name
 * that resolved to a public address when the instance started cannot lead to
 * a private one later. Kept sockets were checked when they opened.
 */
const guardedAgents = new WeakMap<OutboundPolicy, { http: HttpAgent; https: HttpsAgent }>();
function agentsFor(policy: OutboundPolicy | undefined): { http: HttpAgent; https: HttpsAgent } {
  if (!policy) return { http: httpAgent, https: httpsAgent };
  let agents = guardedAgents.get(policy);
  if (!agents) {
    const lookup = guardedLookup('the upstream server', policy);
    agents = {
      http: new HttpAgent({ keepAlive: true, maxSockets: 256, lookup }),
      https: new HttpsAgent({ keepAlive: true, maxSockets: 256, lookup }),
    };
    guardedAgents.set(policy, agents);
  }
  return agents;
}

const NULL_BODY = new Set([101, 204, 205, 304]);

export interface BodyWatch {
  /** the response body ended normally */
  end(): void;
  /** the response body broke off (connection reset, process killed) */
  broke(error: Error): void;
}

/** An answer's head, its body still unread: `release` once the body is done with. */
export interface Exchange {
  response: IncomingMessage;
  release(): void;
}

/**
 * One request to an instance on node:http with a keep-alive agent, resolved
 * with the answer's head. `init` is what the SDK gives its fetch: JSON text
 * as the body, its headers, its abort signal.
 */
export function httpExchange(
  url: string | URL,
  init: RequestInit & { body?: string },
  outbound?: OutboundPolicy,
): Promise<Exchange> {
  const target = typeof url === 'string' ? new URL(url) : url;
  const headers: Record<string, string> = {};
  // the SDK hands a Headers already: read it, not a copy of it
  (init.headers instanceof Headers ? init.headers : new Headers(init.headers)).forEach((value, name) => {
    headers[name] = value;
  });
  const body = init.body;
  if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
  const secure = target.protocol === 'https:';
  return new Promise<Exchange>((resolve, reject) => {
    const signal = init.signal ?? undefined;
    if (signal?.aborted) {
      reject(signal.reason ?? new Error('aborted'));
      return;
    }
    const agents = agentsFor(outbound);
    const request = (secure ? httpsRequest : httpRequest)({
      ...requestTarget(target),
      method: init.method ?? 'GET',
      headers,
      agent: secure ? agents.https : agents.http,
    });
    const onAbort = (): void => {
      request.destroy(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const release = (): void => signal?.removeEventListener('abort', onAbort);
    // `on`, not `once`: a socket can fail again after the first error, and an unheard error ends the process
    request.on('error', (error) => {
      release();
      reject(error);
    });
    request.once('response', (response: IncomingMessage) => {
      // errors reach the reader (a body stream, or whoever reads it); heard here too so that an unread body cannot crash us
      response.on('error', () => undefined);
      resolve({ response, release });
    });
    request.end(body);
  });
}

const requestTargets = new WeakMap<URL, RequestOptions>();

/**
 * Where a request goes, as node:http takes it: worked out once per URL
 * object (the SDK's transport sends every request to the same one), not on
 * every request of a call's path.
 */
function requestTarget(url: URL): RequestOptions {
  let target = requestTargets.get(url);
  if (!target) {
    target = urlToHttpOptions(url);
    requestTargets.set(url, target);
  }
  return target;
}

/**
 * The `fetch` the SDK's client transport is given for calls to an instance:
 * on the proxy's hot path undici's fetch (Request and Headers objects, its
 * dispatcher, a web stream per body copied into another) cost more than the
 * hop itself. The answer is a standard Response, and `watch` hears how the
 * body ended without wrapping it in a second stream.
 */
export async function httpFetch(
  url: string | URL,
  init: RequestInit = {},
  watch?: BodyWatch,
  outbound?: OutboundPolicy,
): Promise<Response> {
  // the SDK sends JSON text; anything else (never seen) is refused rather than sent past the guarded agents
  if (init.body !== undefined && init.body !== null && typeof init.body !== 'string')
    throw new TypeError('only JSON text bodies are sent to an MCP server');
  return asResponse(await httpExchange(url, { ...init, body: init.body ?? undefined }, outbound), init.method, watch);
}

/** The exchange as fetch answers it. */
export function asResponse({ response, release }: Exchange, method: string | undefined, watch?: BodyWatch): Response {
  const responseHeaders = new Headers();
  for (let i = 0; i < response.rawHeaders.length; i += 2)
    responseHeaders.append(response.rawHeaders[i]!, response.rawHeaders[i + 1]!);
  // statuses that cannot have a body: no stream at all, as fetch gives
  const empty = NULL_BODY.has(response.statusCode ?? 0) || method === 'HEAD';
  if (empty) {
    response.resume();
    response.once('end', release);
  }
  return new Response(empty ? null : bodyOf(response, release, watch), {
    status: response.statusCode ?? 502,
    statusText: response.statusMessage ?? '',
    headers: responseHeaders,
  });
}

/**
 * The body as a web stream that asks the socket for a chunk only when its
 * reader wants one: its end (or break) is seen once the reader has taken
 * everything before it, which is when `watch` may judge what was answered.
 */
function bodyOf(
  response: IncomingMessage,
  release: () => void,
  watch: BodyWatch | undefined,
): ReadableStream<Uint8Array> {
  const chunks = response[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await chunks.next();
        if (done) {
          release();
          controller.close();
          watch?.end();
        } else {
          controller.enqueue(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
        }
      } catch (error) {
        release();
        const broke = error instanceof Error ? error : new Error(String(error));
        controller.error(broke);
        watch?.broke(broke);
      }
    },
    cancel() {
      release();
      response.destroy();
    },
  });
}
