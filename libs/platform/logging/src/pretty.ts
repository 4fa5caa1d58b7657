import { Writable } from 'node:stream';

const LEVELS: Record<string, string> = {
  trace: 'TRACE',
  debug: 'DEBUG',
  info: 'INFO ',
  warn: 'WARN ',
  error: 'ERROR',
  fatal: 'FATAL',
};
/** fields every line has, or that the message already says */
const QUIET = new Set([
  'level',
  'time',
  'msg',
  'service',
  'pid',
  'hostname',
  'context',
  'reqId',
  'req',
  'res',
  'responseTime',
]);

/** One JSON log line as a person reads it on a terminal: time, level, where, the message, then the other fields. */
export function prettyLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time = typeof entry.time === 'string' ? entry.time.slice(11, 19) : '';
  const level = LEVELS[String(entry.level)] ?? String(entry.level).toUpperCase();
  const context = typeof entry.context === 'string' ? `[${entry.context}] ` : '';
  const req = entry.req as { method?: string; path?: string } | undefined;
  const res = entry.res as { status?: number } | undefined;
  const request = req?.method ? ` ${req.method} ${req.path ?? ''}${res?.status ? ` → ${res.status}` : ''}` : '';
  const rest = Object.entries(entry)
    .filter(([key]) => !QUIET.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  return `${time} ${level} ${context}${String(entry.msg ?? '')}${request}${rest ? `  ${rest}` : ''}`;
}

/** Where log lines go: JSON lines, or on a terminal, one readable line each (the same content). */
export function logDestination(out: NodeJS.WriteStream = process.stdout): NodeJS.WritableStream {
  if (!out.isTTY) return out;
  let pending = '';
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) if (line) out.write(prettyLine(line) + '\n');
      done();
    },
  });
}
