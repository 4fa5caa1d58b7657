import { DomainError } from './domain-error';
import { ERROR_CODES, ErrorCode } from './error-codes';

/** RFC 9457 problem document, the body of every JSON error we send. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  request_id?: string;
  [extension: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const TYPE_BASE = 'https://docs.aileron.dev/problems/';

export function problemType(code: ErrorCode): string {
  return TYPE_BASE + code.toLowerCase().replace(/_/g, '-');
}

export function problemFromDomainError(error: DomainError, requestId?: string): Problem {
  return {
    ...error.extensions,
    type: problemType(error.code),
    title: error.title,
    status: error.status,
    detail: error.detail,
    code: error.code,
    ...(requestId ? { request_id: requestId } : {}),
  };
}

/** A problem document for a registered code, with the registry's status and title unless the caller must keep another. */
export function problemOf(
  code: ErrorCode,
  detail: string,
  requestId?: string,
  title: string = ERROR_CODES[code].title,
): Problem {
  return {
    type: problemType(code),
    title,
    status: ERROR_CODES[code].status,
    detail,
    code,
    ...(requestId ? { request_id: requestId } : {}),
  };
}

export function internalProblem(requestId?: string): Problem {
  return problemOf(
    'INTERNAL',
    'The server could not complete the request. Quote the request id when reporting it.',
    requestId,
  );
}
