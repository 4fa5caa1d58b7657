import { DomainError } from './domain-error';

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

export function problemType(code: string): string {
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

export function internalProblem(requestId?: string): Problem {
  return {
    type: problemType('INTERNAL'),
    title: 'Internal error',
    status: 500,
    detail: 'The server could not complete the request. Quote the request id when reporting it.',
    code: 'INTERNAL',
    ...(requestId ? { request_id: requestId } : {}),
  };
}
