import { STATUS_CODES } from 'node:http';
import { ApiException, Observable, type ConfigurationOptions } from '@kubernetes/client-node';

// What every driver that talks to the Kubernetes API needs of a call: a bound
// on it, and its failure in words for people.

/**
 * An API failure for people: status code and Kubernetes' reason; the Status
 * message too unless the call was about a Secret (`about: 'secret'`), whose
 * refusal an admission webhook may fill with the Secret's data.
 */
export function describeApiError(error: unknown, about: 'secret' | 'other'): string {
  if (error instanceof ApiException) {
    const status = parseStatus(error.body);
    // the generated client drops the body of some answers (401 among them)
    const reason = status?.reason ?? STATUS_CODES[error.code];
    const head = `Kubernetes answered ${error.code}${reason ? ` ${reason}` : ''}`;
    return about === 'other' && status?.message ? `${head}: ${status.message}` : head;
  }
  // the watch's own refusals: a status code, no body
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof statusCode === 'number')
    return `Kubernetes answered ${statusCode}${STATUS_CODES[statusCode] ? ` ${STATUS_CODES[statusCode]}` : ''}`;
  if (error instanceof Error && error.name === 'AbortError') return 'the Kubernetes API did not answer in time';
  if (error instanceof Error) return `could not reach the Kubernetes API (${error.message})`;
  return 'could not reach the Kubernetes API';
}

/** The API answered this status code (404 for an absent object, 409 for one that exists). */
export function isApiStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** Runs a delete; an object already absent (404) is fine, any other failure is thrown in words naming what and where. */
export async function deleteIgnoringAbsent(
  what: string,
  namespace: string,
  about: 'secret' | 'other',
  call: () => Promise<unknown>,
): Promise<void> {
  try {
    await call();
  } catch (error) {
    if (isApiStatus(error, 404)) return;
    throw new Error(`could not ${what} in namespace "${namespace}": ${describeApiError(error, about)}`);
  }
}

function parseStatus(body: unknown): { reason?: string; message?: string } | undefined {
  try {
    const status: unknown = typeof body === 'string' ? JSON.parse(body) : body;
    if (typeof status !== 'object' || status === null) return undefined;
    const { reason, message } = status as { reason?: unknown; message?: unknown };
    return {
      ...(typeof reason === 'string' ? { reason } : {}),
      ...(typeof message === 'string' ? { message } : {}),
    };
  } catch {
    return undefined;
  }
}

/** Per-request options: a timeout on every call, and an abort (a start's) when given. */
export function apiRequestOptions(timeoutMs: number, signal?: AbortSignal): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (context) => {
          const timeout = AbortSignal.timeout(timeoutMs);
          context.setSignal(signal ? AbortSignal.any([timeout, signal]) : timeout);
          return new Observable(Promise.resolve(context));
        },
        post: (context) => new Observable(Promise.resolve(context)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}
