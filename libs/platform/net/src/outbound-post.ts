import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import {
  checkOutboundUrl,
  guardedLookup,
  OutboundPolicy,
  OutboundUrlRefusedError,
  RefusedAddressError,
} from './ssrf-guard';

/** What one POST to a receiver came to; `error` never holds the URL's path or query (they may carry tokens). */
export interface SendOutcome {
  /** the HTTP status, null when there was no answer */
  status: number | null;
  error: string | null;
  durationMs: number;
}

export interface SendOptions {
  policy: OutboundPolicy;
  timeoutMs: number;
}

/**
 * POSTs one signed body (webhook deliveries, SIEM sink batches). The URL is checked against the SSRF rules first and
 * the socket's resolver applies the same rules to the address it connects to,
 * so a name that resolved to a public address at the check cannot connect to
 * a private one a moment later (DNS rebinding). Redirects are never followed:
 * a 3xx is a failed attempt, or a receiver could bounce us into our network.
 */
export async function postSigned(
  url: string,
  headers: Record<string, string>,
  body: string,
  options: SendOptions,
): Promise<SendOutcome> {
  const started = performance.now();
  const elapsed = (): number => Math.max(0, Math.round(performance.now() - started));
  let target: URL;
  try {
    target = await checkOutboundUrl(url, options.policy);
  } catch (error) {
    if (error instanceof OutboundUrlRefusedError) return { status: null, error: error.message, durationMs: elapsed() };
    throw error;
  }
  const result = await send(target, headers, body, options);
  return { ...result, durationMs: elapsed() };
}

function send(
  target: URL,
  headers: Record<string, string>,
  body: string,
  options: SendOptions,
): Promise<{ status: number | null; error: string | null }> {
  return new Promise((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (outcome: { status: number | null; error: string | null }): void => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        // a fresh connection per delivery: a pooled socket would skip the resolver check
        agent: false,
        lookup: guardedLookup(target.hostname, options.policy),
      },
      (response) => {
        const status = response.statusCode ?? null;
        // the answer's body is not needed, only drained; the timer still bounds a receiver that never ends it
        response.resume();
        response.on('end', () => clearTimeout(timer));
        finish({ status, error: status !== null && status >= 200 && status < 300 ? null : describeStatus(status) });
      },
    );
    timer = setTimeout(() => {
      finish({ status: null, error: `timed out after ${options.timeoutMs / 1000} s` });
      request.destroy();
    }, options.timeoutMs);
    timer.unref();
    request.on('error', (error) => {
      clearTimeout(timer);
      finish({ status: null, error: describeError(error) });
    });
    request.on('close', () => {
      if (settled) clearTimeout(timer);
    });
    request.end(body);
  });
}

function describeStatus(status: number | null): string {
  if (status === null) return 'no status';
  if (status >= 300 && status < 400) return `HTTP ${status}: redirects are not followed`;
  return `HTTP ${status}`;
}

function describeError(error: Error & { code?: string }): string {
  if (error instanceof RefusedAddressError) return error.message;
  switch (error.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host does not resolve';
    case 'ETIMEDOUT':
      return 'connection timed out';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    default:
      if (error.code && /^(ERR_TLS|CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO)/.test(error.code))
        return `TLS failed (${error.code})`;
      // the message of a generic error may quote the request: only the code is kept
      return `connection failed${error.code ? ` (${error.code})` : ''}`;
  }
}
