import { type ServerResponse, STATUS_CODES as STATUS_CODES_TEXT } from 'node:http';
import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AuthChallenges } from './auth-challenges';
import {
  databaseUnavailableReason,
  isForeignKeyViolation,
  isRecordNotFound,
  isUniqueViolation,
  isUnstorableText,
  UNSTORABLE_TEXT_DETAIL,
} from '@aileron/database';
import {
  DomainError,
  ErrorCode,
  internalProblem,
  Problem,
  PROBLEM_CONTENT_TYPE,
  problemFromDomainError,
  problemOf,
} from '@aileron/errors';

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'ROUTE_NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  408: 'REQUEST_TIMEOUT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
};

/** Fastify's own errors (body parsing, limits) carry a code and a status. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'MALFORMED_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'MALFORMED_JSON',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BAD_REQUEST',
};

/** Errors of Nest and Fastify keep the status and title they come with; the code is still a registered one. */
function simple(status: number, code: ErrorCode, title: string, detail: string, requestId?: string): Problem {
  return { ...problemOf(code, detail, requestId, title), status };
}

/** How long a client is told to wait before retrying while the database cannot serve. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

export interface ProblemOf {
  problem: Problem;
  /** a stack for the log: nothing the code knows about */
  unexpected: boolean;
  /** why the database could not serve, for one log line (never sent) */
  databaseUnavailable?: string;
}

/**
 * Turns anything thrown into a problem document. Unknown errors become a 500
 * that says only the request id: the stack goes to the log, never the client.
 */
export function toProblem(error: unknown, requestId?: string): ProblemOf {
  if (error instanceof DomainError) return { problem: problemFromDomainError(error, requestId), unexpected: false };
  // before the Prisma mappings: a lost connection is nobody's conflict or missing row
  const unavailable = databaseUnavailableReason(error);
  if (unavailable) {
    return {
      // the extension becomes the Retry-After header, as a DomainError's does
      problem: {
        ...problemOf(
          'DATABASE_UNAVAILABLE',
          'The database cannot be reached right now; nothing was changed. Retry shortly.',
          requestId,
        ),
        retry_after_seconds: DATABASE_RETRY_AFTER_SECONDS,
      },
      unexpected: false,
      databaseUnavailable: unavailable,
    };
  }
  if (isUniqueViolation(error)) {
    return {
      problem: problemOf('CONFLICT', 'A resource with these identifying fields already exists', requestId),
      unexpected: false,
    };
  }
  if (isUnstorableText(error)) {
    return {
      problem: problemOf('TEXT_NOT_STORABLE', UNSTORABLE_TEXT_DETAIL, requestId),
      unexpected: false,
    };
  }
  if (isRecordNotFound(error))
    return { problem: problemOf('NOT_FOUND', 'The resource does not exist', requestId), unexpected: false };
  if (isForeignKeyViolation(error)) {
    return {
      problem: problemOf('REFERENCE_NOT_FOUND', 'A referenced resource does not exist', requestId),
      unexpected: false,
    };
  }
  if (error instanceof HttpException) {
    // Nest re-wraps Fastify's own errors (body parsing, limits) as a bare
    // HttpException with Fastify's message, so the message is all we have.
    const status = error.getStatus();
    if (status < 500) {
      const malformed = status === 400 && /JSON/.test(error.message);
      const code = malformed ? 'MALFORMED_JSON' : (STATUS_CODES[status] ?? 'BAD_REQUEST');
      const detail = malformed
        ? 'The request body is not valid JSON'
        : status === 404
          ? 'No such route'
          : error.message;
      return {
        problem: simple(status, code, STATUS_CODES_TEXT[status] ?? 'Bad request', detail, requestId),
        unexpected: false,
      };
    }
  }
  const fastify = error as { code?: unknown; statusCode?: unknown; message?: unknown };
  if (typeof fastify.statusCode === 'number' && fastify.statusCode >= 400 && fastify.statusCode < 500) {
    const code =
      (typeof fastify.code === 'string' && FASTIFY_CODES[fastify.code]) ||
      STATUS_CODES[fastify.statusCode] ||
      'BAD_REQUEST';
    const detail =
      code === 'MALFORMED_JSON' ? 'The request body is not valid JSON' : String(fastify.message ?? 'Bad request');
    return { problem: simple(fastify.statusCode, code, 'Bad request', detail, requestId), unexpected: false };
  }
  return { problem: internalProblem(requestId), unexpected: true };
}

/** What a problem answer is made of, whoever sends it. */
interface ProblemAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The media type with its charset, as Fastify would complete it: the fast paths send exactly what the routes do. */
const PROBLEM_HEADER = `${PROBLEM_CONTENT_TYPE}; charset=utf-8`;
const logger = new Logger('ProblemFilter');

/**
 * The one rendering of an error, for the exception filter behind the routes
 * and for everything answering in front of them (the fast paths, a request
 * passed between replicas). An unexpected error is logged with its request id
 * here, since the client hears only that id.
 */
export function problemAnswer(error: unknown, requestId?: string, challenge?: string): ProblemAnswer {
  const rendered = toProblem(error, requestId);
  const { problem } = rendered;
  if (rendered.unexpected) logger.error({ err: error, requestId }, 'unhandled error');
  else if (rendered.databaseUnavailable)
    logger.warn(
      { requestId, reason: rendered.databaseUnavailable },
      `database unavailable: ${rendered.databaseUnavailable}; answered 503`,
    );
  const headers: Record<string, string> = { 'content-type': PROBLEM_HEADER };
  // refusals that say when to try again (rate limits, a dependency away) carry it as retry_after_seconds
  if (typeof problem.retry_after_seconds === 'number') headers['retry-after'] = String(problem.retry_after_seconds);
  // the rest of a body that could not be read may still be on its way: it must not be read as the next request
  if ((error as { closesConnection?: unknown } | null)?.closesConnection === true) headers.connection = 'close';
  if (problem.status === 401 && challenge !== undefined) headers['www-authenticate'] = challenge;
  return { status: problem.status, headers, body: JSON.stringify(problem) };
}

/** A problem on a raw response; one whose answer has begun can only be cut off. */
/** `challenge`: the `WWW-Authenticate` of a 401 (AuthChallenges), for a path that names one. */
export function writeProblem(response: ServerResponse, error: unknown, requestId?: string, challenge?: string): void {
  const answer = problemAnswer(error, requestId, challenge);
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response
    .writeHead(answer.status, { ...answer.headers, 'content-length': String(Buffer.byteLength(answer.body)) })
    .end(answer.body);
}

@Catch()
export class ProblemFilter implements ExceptionFilter {
  constructor(private readonly challenges: AuthChallenges) {}

  catch(error: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw error;
    const http = host.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    const reply = http.getResponse<FastifyReply>();
    const answer = problemAnswer(
      error,
      request.id,
      this.challenges.for(request.url, request.headers.authorization !== undefined),
    );
    if (reply.sent) return;
    void reply.status(answer.status).headers(answer.headers).send(answer.body);
  }
}
