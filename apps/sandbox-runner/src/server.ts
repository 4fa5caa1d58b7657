/**
 * How the runner is reached: JSON lines on stdin and stdout (the local
 * driver's bubblewrap), or over TCP to each connection that first presents
 * the bearer token (`--listen`, a pod's containers). Framing of answers and
 * inputs is the same on both (protocol.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { PassThrough, type Readable } from 'node:stream';
import {
  BINARY_FIELDS,
  type RawFields,
  type RunnerAnswer,
  type RunnerChunk,
  type RunnerInput,
  type RunnerRequest,
  RUNNER_TOKEN_ENV,
} from '@aileron/sandboxes/runner-protocol';
import { failureOf } from './failure';
import { type Handler, TAKES_INPUT } from './requests';

/** a result's strings this long or longer, and its Buffers, follow its line as raw bytes (protocol.ts RawFields) */
const RAW_MIN_CHARS = 4096;
/** listen mode: how long a connection may take to present its token, and how long that line may be */
const AUTH_TIMEOUT_MS = 10_000;
const MAX_TOKEN_LINE = 1024;

export function fatal(message: string): never {
  process.stderr.write(`runner: ${message}\n`);
  process.exit(2);
}

/**
 * The inputs of the requests on one connection that take one, by id. A full
 * input holds back reading from the connection until it drains; an input
 * whose request has ended swallows what is still on its way. What was kept
 * of them as files is removed when the connection closes.
 */
class Inputs {
  private readonly streams = new Map<number, PassThrough>();
  private readonly kept: string[] = [];

  constructor(private readonly source: { pause(): unknown; resume(): unknown }) {}

  open(id: number): Readable {
    const input = new PassThrough();
    this.streams.set(id, input);
    return input;
  }

  feed(message: RunnerInput): void {
    const input = this.streams.get(message.id);
    if (!input) return;
    if ('end' in message) return void input.end();
    if (!input.write(Buffer.from(message.chunk, 'base64'))) {
      this.source.pause();
      input.once('drain', () => this.source.resume());
    }
  }

  discard(id: number): void {
    const input = this.streams.get(id);
    if (!input) return;
    this.streams.delete(id);
    input.destroy();
    this.source.resume();
  }

  /** a path of this connection's, removed with it */
  keep(path: string): void {
    this.kept.push(path);
  }

  close(): void {
    for (const id of [...this.streams.keys()]) this.discard(id);
    for (const path of this.kept.splice(0)) void fs.rm(path, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** One request line in, its answer out through `answer`; a streamed git's stdout through `stream`; an input line to its request. */
function receive(
  handle: Handler,
  line: string,
  answer: (message: RunnerAnswer) => void,
  inputs: Inputs,
  stream?: (id: number, chunk: Buffer) => Promise<void>,
): void {
  let id = -1;
  try {
    const message = JSON.parse(line) as (RunnerRequest & { id: number }) | RunnerInput;
    if (!('op' in message)) return inputs.feed(message);
    const request = message;
    id = request.id;
    const path = 'path' in request ? request.path : undefined;
    const input = TAKES_INPUT.has(request.op) ? inputs.open(id) : undefined;
    handle(request, {
      ...(stream ? { stream: (chunk: Buffer) => stream(id, chunk) } : {}),
      ...(input ? { input } : {}),
      keep: (kept) => inputs.keep(kept),
    })
      .then(
        (result) => answer({ id, result }),
        (error: unknown) => answer({ id, error: failureOf(error, path) }),
      )
      .finally(() => inputs.discard(id));
  } catch (error) {
    answer({ id, error: failureOf(error) });
  }
}

/** Compares through digests, so neither the time taken nor a length mismatch says anything of the token. */
function sameSecret(presented: string, expected: string): boolean {
  const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(presented), digest(expected));
}

/**
 * A message as it goes out: its line, then the result's long strings and its
 * Buffers as raw bytes, listed in the line's `raw`. The parts are written in
 * one go, so answers to concurrent requests never interleave.
 */
function framed(message: RunnerAnswer | RunnerChunk): (string | Buffer)[] {
  const line = (value: unknown): string => `${JSON.stringify(value)}\n`;
  if (!('result' in message) || message.result === null || typeof message.result !== 'object') return [line(message)];
  const result: Record<string, unknown> = {};
  const raw: RawFields = [];
  const bytes: Buffer[] = [];
  for (const [field, value] of Object.entries(message.result)) {
    const long = Buffer.isBuffer(value)
      ? value
      : typeof value === 'string' && value.length >= RAW_MIN_CHARS
        ? Buffer.from(value)
        : null;
    if (!long) {
      result[field] = value;
      continue;
    }
    raw.push(Buffer.isBuffer(value) && BINARY_FIELDS.has(field) ? [field, long.length, 1] : [field, long.length]);
    bytes.push(long);
  }
  return raw.length === 0 ? [line(message)] : [line({ id: message.id, result, raw }), ...bytes];
}

/** Stdio mode: requests on stdin, answers on stdout, until the control plane closes our stdin (it is gone or stopping us). */
export function serveStdio(handle: Handler): void {
  const answer = (message: RunnerAnswer): void => {
    for (const part of framed(message)) process.stdout.write(part);
  };
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const inputs = new Inputs(process.stdin);
  lines.on('line', (line) => receive(handle, line, answer, inputs));
  lines.on('close', () => process.exit(0));
}

/**
 * Listen mode: every connection presents the token on its first line, then
 * speaks JSON lines as stdin and stdout do. A connection that ends leaves the
 * runner (and what it started) running: the control plane reconnects.
 * `name` says which runner listens, in the line that says it does.
 */
export function listen(at: string, token: string, handle: Handler, name: string): void {
  // without a token anyone who reaches the port would run commands here
  if (token.length < 16) fatal(`${RUNNER_TOKEN_ENV} is unset or shorter than 16 characters; not listening`);
  const colon = at.lastIndexOf(':');
  const host = colon >= 0 ? at.slice(0, colon).replace(/^\[(.*)\]$/, '$1') : undefined;
  const port = Number(colon >= 0 ? at.slice(colon + 1) : at);
  if (!Number.isInteger(port) || port < 1 || port > 65535) fatal(`--listen ${at}: [host:]port`);
  const server = createServer((socket) => accept(socket, token, handle));
  server.on('error', (error) => fatal(`cannot listen on ${at}: ${error.message}`));
  server.listen({ port, ...(host ? { host } : {}) }, () =>
    process.stderr.write(`runner: ${name} runner listening on ${host ?? '*'}:${port}\n`),
  );
}

function accept(socket: Socket, token: string, handle: Handler): void {
  socket.setNoDelay(true);
  socket.setEncoding('utf8');
  socket.on('error', () => undefined);
  /** false when the socket's buffer is full (a streamed git waits for its drain) */
  const write = (message: RunnerAnswer | RunnerChunk): boolean => {
    if (!socket.writable) return false;
    let room = true;
    for (const part of framed(message)) room = socket.write(part);
    return room;
  };
  let authenticated = false;
  let refused = false;
  const refuse = (message: string): void => {
    refused = true;
    clearTimeout(timer);
    write({ id: -1, error: { code: 'UNAUTHORIZED', message } });
    socket.destroySoon();
  };
  const timer = setTimeout(() => refuse('no token in time'), AUTH_TIMEOUT_MS);
  timer.unref();
  const stream = (id: number, chunk: Buffer): Promise<void> =>
    new Promise((resolveWritten) => {
      if (write({ id, chunk: chunk.toString('base64') }) || !socket.writable) return resolveWritten();
      // the control plane reads slower than git writes: git waits
      const done = (): void => {
        socket.off('drain', done);
        socket.off('close', done);
        resolveWritten();
      };
      socket.on('drain', done);
      socket.on('close', done);
    });
  const inputs = new Inputs(socket);
  socket.on('close', () => inputs.close());
  // lines by hand: the first one is bounded until the token is checked, the later ones (a git input) may be large
  let partial: string[] = [];
  let partialLength = 0;
  socket.on('data', (data: string) => {
    if (refused) return;
    let from = 0;
    for (let end = data.indexOf('\n'); end >= 0; end = data.indexOf('\n', from)) {
      const line = partial.join('') + data.slice(from, end);
      partial = [];
      partialLength = 0;
      from = end + 1;
      if (authenticated) {
        if (line.trim() !== '') receive(handle, line, write, inputs, stream);
        continue;
      }
      if (!sameSecret(line.replace(/\r$/, ''), token)) return refuse('wrong token');
      authenticated = true;
      clearTimeout(timer);
    }
    partial.push(data.slice(from));
    partialLength += data.length - from;
    if (!authenticated && partialLength > MAX_TOKEN_LINE) refuse('token line too long');
  });
}
