import type { IncomingMessage, ServerResponse } from 'node:http';
import pino, { Logger as PinoLogger, LoggerOptions } from 'pino';
import type { Options as PinoHttpOptions } from 'pino-http';
import { logDestination } from './pretty';

/**
 * Paths pino blanks out wherever they appear. Tokens travel in headers; bodies
 * are never logged; this list is the second line of defence for objects someone
 * logs by mistake.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  '*.token',
  '*.password',
  '*.secret',
  '*.value',
  '*.authorization',
  'token',
  'password',
  'secret',
];

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    base: { service: 'aileron-control-plane' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
}

/** A plain logger for code that runs before or outside Nest (CLI, boot). */
export function createLogger(level: string): PinoLogger {
  return pino(loggerOptions(level), logDestination());
}

/** `/v1/workspaces/<ws>/secrets/<path>`: the secret's path is cut from request logs. */
const SECRET_ROUTE = /^(\/v1\/workspaces\/[^/]+\/secrets\/).+$/;

/**
 * Query strings may carry signed links or codes: log the path only. A secret's
 * path is whatever the caller typed, a value pasted by mistake included, so it
 * stays out of the logs (the audit log names the paths that were written).
 */
export function requestSerializer(req: IncomingMessage & { id?: unknown }): Record<string, unknown> {
  const path = (req.url ?? '').split('?')[0]!;
  return { id: req.id, method: req.method, path: path.replace(SECRET_ROUTE, '$1[redacted]') };
}

export function responseSerializer(res: ServerResponse): Record<string, unknown> {
  return { status: res.statusCode };
}

/**
 * The request logger's options: every log line written while handling a
 * request (through Nest's Logger too) carries that request's id. The line
 * each request ends with is RequestLog's (@aileron/http), which the fast paths
 * in front of the framework write too; pino-http writes none itself.
 */
export function requestLoggerOptions(level: string): PinoHttpOptions {
  return {
    ...loggerOptions(level),
    // Fastify has already chosen the id (and set X-Request-Id); reuse it.
    genReqId: (req) => (req as { id?: string }).id ?? 'unknown',
    serializers: { req: requestSerializer, res: responseSerializer },
    autoLogging: false,
    quietReqLogger: true,
  };
}
