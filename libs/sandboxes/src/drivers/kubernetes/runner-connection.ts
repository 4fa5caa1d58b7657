import { connect, type Socket } from 'node:net';
import type { RunnerAnswer, RunnerChunk, RunnerOp, RunnerRequest, RunnerResult } from '../../runner-protocol';
import { RunnerError } from '../driver';
import { readMessages } from '../frames';

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
  /** a streamed request's output */
  sink?: NodeJS.WritableStream;
}

/** A runner in a pod, by address and bearer token. */
export interface RunnerAddress {
  host: string;
  port: number;
  token: string;
}

/**
 * One TCP connection to a runner in listen mode (protocol.ts): the token
 * line, then JSON lines, requests answered by id and possibly out of order.
 * When it closes every request still waiting fails with SANDBOX_STOPPED, as
 * the local runner's do when its process ends.
 */
export class RunnerConnection {
  /** settles with the reason once the connection is closed, by either side */
  readonly closed: Promise<string>;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private gone: string | null = null;
  /** reading paused until a full sink drains */
  private draining = false;
  private markClosed!: (reason: string) => void;

  private constructor(private readonly socket: Socket) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    readMessages<RunnerAnswer | RunnerChunk>(
      socket,
      (message) => this.receive(message),
      (reason) => this.close(reason),
    );
    socket.on('error', (error) => this.close(error.message));
    socket.on('close', () => this.close('the connection closed'));
  }

  /** Connects and presents the token; the runner's answer to it comes with the first request's (a refusal fails them all). */
  static open(address: RunnerAddress, timeoutMs: number): Promise<RunnerConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: address.host, port: address.port, noDelay: true });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(
          new Error(`could not connect to ${address.host}:${address.port} within ${Math.round(timeoutMs / 1000)} s`),
        );
      }, timeoutMs);
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(new Error(`could not connect to ${address.host}:${address.port}: ${error.message}`));
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        // a long exec is silent for minutes: keepalive tells a dead peer from a busy one
        socket.setKeepAlive(true, 30_000);
        socket.write(`${address.token}\n`);
        resolve(new RunnerConnection(socket));
      });
    });
  }

  call<O extends RunnerOp>(request: Extract<RunnerRequest, { op: O }>): Promise<RunnerResult<O>> {
    return this.send(request) as Promise<RunnerResult<O>>;
  }

  /**
   * A streamed `git`: its stdout goes to `sink` as it comes, reading from the
   * runner paused while `sink` is full; resolves with git's exit once all of
   * it was written there.
   */
  stream(request: Extract<RunnerRequest, { op: 'git' }>, sink: NodeJS.WritableStream): Promise<RunnerResult<'git'>> {
    return this.send({ ...request, stream: true }, sink) as Promise<RunnerResult<'git'>>;
  }

  /**
   * A request that takes an input (`unpack`, `receive`): `input`'s bytes
   * follow it as RunnerInput lines, written as fast as the socket takes them,
   * and no more once the runner has answered (it may refuse early).
   */
  async upload<O extends 'unpack' | 'receive'>(
    request: Extract<RunnerRequest, { op: O }>,
    input: NodeJS.ReadableStream,
  ): Promise<RunnerResult<O>> {
    const id = this.nextId;
    const answer = this.send(request) as Promise<RunnerResult<O>>;
    let answered = false;
    answer.then(
      () => (answered = true),
      () => (answered = true),
    );
    for await (const chunk of input) {
      if (answered || this.gone) break;
      const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (!this.socket.write(`${JSON.stringify({ id, chunk: data.toString('base64') })}\n`)) await this.drained();
    }
    if (!answered && !this.gone) this.socket.write(`${JSON.stringify({ id, end: true })}\n`);
    return answer;
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  close(reason = 'closed by the control plane'): void {
    if (this.gone) return;
    this.gone = reason;
    this.socket.destroy();
    for (const waiter of this.pending.values()) waiter.reject(stopped(reason));
    this.pending.clear();
    this.markClosed(reason);
  }

  private send(request: RunnerRequest, sink?: NodeJS.WritableStream): Promise<unknown> {
    if (this.gone) return Promise.reject(stopped(this.gone));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, ...(sink ? { sink } : {}) });
      this.socket.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  private receive(message: RunnerAnswer | RunnerChunk): void {
    if ('chunk' in message) return this.chunk(message);
    if (message.id === -1 && 'error' in message) {
      // the runner refused the token (or could not read a request of ours): nothing on this connection will be answered
      const failure = message.error;
      for (const waiter of this.pending.values()) waiter.reject(new RunnerError(failure));
      this.pending.clear();
      return this.close(`${failure.code}: ${failure.message}`);
    }
    const waiter = this.pending.get(message.id);
    if (!waiter) return;
    this.pending.delete(message.id);
    if ('error' in message) waiter.reject(new RunnerError(message.error));
    else waiter.resolve(message.result);
  }

  private chunk(message: RunnerChunk): void {
    const sink = this.pending.get(message.id)?.sink;
    if (!sink) return;
    if (!sink.write(Buffer.from(message.chunk, 'base64')) && !this.draining) {
      this.draining = true;
      this.socket.pause();
      sink.once('drain', () => {
        this.draining = false;
        this.socket.resume();
      });
    }
  }
}

function stopped(reason: string): RunnerError {
  return new RunnerError({ code: 'SANDBOX_STOPPED', message: `the sandbox stopped (${reason})` });
}
