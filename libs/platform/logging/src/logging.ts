import type { IncomingMessage, ServerResponse } from 'node:http';
import pino, { Logger as PinoLogger, LoggerOptions } from 'pino';

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
  return pino(loggerOptions(level));
}

/** Query strings may carry signed links or codes: log the path only. */
export function requestSerializer(req: IncomingMessage & { id?: unknown }): Record<string, unknown> {
  return { id: req.id, method: req.method, path: (req.url ?? '').split('?')[0] };
}

export function responseSerializer(res: ServerResponse): Record<string, unknown> {
  return { status: res.statusCode };
}
