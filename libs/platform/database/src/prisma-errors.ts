import { Prisma } from './generated/prisma/client';

/** Unique-constraint violation, with the columns Prisma reports, if any. */
export function isUniqueViolation(error: unknown): error is Prisma.PrismaClientKnownRequestError {
  if (!(error instanceof Prisma.PrismaClientKnownRequestError)) return false;
  if (error.code === 'P2002') return true;
  // a raw query reports it as P2010, with the driver's own classification
  const cause = (error.meta as { driverAdapterError?: { cause?: { kind?: string } } } | undefined)?.driverAdapterError
    ?.cause;
  return error.code === 'P2010' && cause?.kind === 'UniqueConstraintViolation';
}

export function isRecordNotFound(error: unknown): error is Prisma.PrismaClientKnownRequestError {
  return error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2025';
}

export function isForeignKeyViolation(error: unknown): error is Prisma.PrismaClientKnownRequestError {
  return error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2003';
}

/**
 * SQLSTATEs of text PostgreSQL cannot hold: 22021 (a NUL in `text`: "invalid
 * byte sequence for encoding UTF8: 0x00") and 22P05 (a NUL or a lone
 * surrogate in `jsonb`: "unsupported Unicode escape sequence").
 */
const UNSTORABLE_STATES = new Set(['22021', '22P05']);
const UNSTORABLE_MESSAGES = /invalid byte sequence for encoding "UTF8": 0x00|unsupported Unicode escape sequence/;

/** What a caller is told when `isUnstorableText`: over HTTP and MCP alike. */
export const UNSTORABLE_TEXT_DETAIL =
  'A text in the request holds a NUL character (\\u0000), which cannot be stored; nothing was changed';

/**
 * Whether the request's own text could not be stored (a NUL, which no
 * PostgreSQL text holds): the caller's input, not the server's fault. Looks
 * through the causes Prisma and the driver adapters wrap around it.
 */
export function isUnstorableText(error: unknown): boolean {
  for (const e of wrappedErrors(error)) {
    for (const code of [e.code, e.originalCode])
      if (typeof code === 'string' && UNSTORABLE_STATES.has(code)) return true;
    if (typeof e.message === 'string' && UNSTORABLE_MESSAGES.test(e.message)) return true;
  }
  return false;
}

/** What a driver's error may carry, as Prisma and the driver adapters wrap it. */
interface WrappedError {
  code?: unknown;
  originalCode?: unknown;
  kind?: unknown;
  message?: unknown;
  cause?: unknown;
  meta?: { driverAdapterError?: unknown };
}

/** The error and each one it wraps (the driver adapter's, then causes), once each. */
function* wrappedErrors(error: unknown): Generator<WrappedError> {
  const seen = new Set<unknown>();
  for (let current = error; current && typeof current === 'object' && !seen.has(current); ) {
    seen.add(current);
    const e = current as WrappedError;
    yield e;
    current = e.meta?.driverAdapterError ?? e.cause;
  }
}

/** node-postgres and socket codes that mean the server is gone, not that the query was wrong. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
/** the driver adapter's own kinds for the same */
const ADAPTER_KINDS = new Set([
  'DatabaseNotReachable',
  'ConnectionClosed',
  'SocketTimeout',
  'TooManyConnections',
  'TlsConnectionError',
]);
/**
 * SQLSTATEs of a server that cannot serve now: 08 connection exceptions, 53
 * insufficient resources (disk full, out of memory), 57P01–57P03 shut down
 * or starting, 58 system errors (I/O), XX001/XX002 a corrupted page or index.
 */
const UNAVAILABLE_STATES = /^(08|53|57P0[1-3]|58|XX00[12])/;
/** Prisma's own codes for an unreachable server, a lost connection, or no connection to be had */
const PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
/** messages node-postgres and PGlite use without a code (a full disk or a bad page has its SQLSTATE) */
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|PGlite is closed/i;

/**
 * Why the database cannot serve this request (the server is down, shutting
 * down, out of disk, or a page is corrupt), or null when the error is about
 * the request itself. Looks through the causes Prisma and the driver adapters
 * wrap around the driver's error. Never includes connection strings.
 */
export function databaseUnavailableReason(error: unknown): string | null {
  for (const e of wrappedErrors(error)) {
    const code = typeof e.code === 'string' ? e.code : typeof e.originalCode === 'string' ? e.originalCode : undefined;
    const kind = typeof e.kind === 'string' ? e.kind : undefined;
    if (code && SOCKET_CODES.has(code)) return `connection failed (${code})`;
    if (kind && ADAPTER_KINDS.has(kind)) return `connection failed (${kind})`;
    if (code && UNAVAILABLE_STATES.test(code)) return `the database refused to serve (SQLSTATE ${code})`;
    if (code && PRISMA_CODES.has(code)) return `the database cannot be reached (${code})`;
    if (error instanceof Prisma.PrismaClientInitializationError) return 'the database client could not start';
    if (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.test(e.message))
      return e.message.split('\n')[0]!.slice(0, 200);
  }
  return null;
}

/** Whether the database could not serve, as opposed to refusing the request (see databaseUnavailableReason). */
export function isDatabaseUnavailable(error: unknown): boolean {
  return databaseUnavailableReason(error) !== null;
}
