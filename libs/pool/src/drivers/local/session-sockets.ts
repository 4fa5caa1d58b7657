import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { HostUser } from '@aileron/bubblewrap';
import { RelatedRequests } from '../../bridge/related-requests';
import { SESSION_TAG } from '../../bridge/session-spawner';
import { socketAddress } from '../../bridge/unix-socket';
import { parseMessage } from '../../proxy/jsonrpc';

/** a connection that has not said a tag within this many bytes is not the spawner's */
const MAX_TAG_LINE = 64;
/** what a child may write before its first line ends: a server is not a stream of one endless line */
const MAX_LINE_BYTES = 64 * 1024 * 1024;

/**
 * The control plane's end of a local instance's MCP sessions: a unix socket
 * that the instance's session spawner (inside its sandbox) connects to once
 * per session, each connection being that session's child's stdin and
 * stdout. The control plane speaks stdio to the child itself: no HTTP and no
 * process in between, where the bridge's Streamable HTTP hop (a POST, an
 * event stream, and a Node process parsing both) cost more than the
 * server's own work. The socket's directory is the instance's alone, owned
 * by its user and reached only through its sandbox's bind.
 */
export class SessionSockets {
  private readonly waiting = new Map<string, (socket: Socket, head: Buffer) => void>();
  private readonly endings = new Map<string, (why: string) => void>();

  private constructor(
    private readonly server: Server,
    readonly path: string,
  ) {}

  /** Listens at `path` (its directory must exist), the socket given to `owner` when there is one. */
  static async listen(path: string, owner: HostUser | undefined): Promise<SessionSockets> {
    const server = createServer({ pauseOnConnect: true });
    const sockets = new SessionSockets(server, path);
    server.on('connection', (socket) => sockets.accept(socket));
    const { address, release } = socketAddress(path);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(address, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } finally {
      release();
    }
    if (owner) chownSync(path, owner.uid, owner.gid);
    chmodSync(path, 0o600);
    return sockets;
  }

  /**
   * One MCP session's stdio, on `theirs`: the other end of the in-process
   * connection the proxy's upstream session holds. `open` asks the spawner
   * for the child (with the tag it must say), `close` to end it. Messages the
   * proxy sends before the child is connected wait; requests still
   * unanswered when the child goes are answered with why.
   */
  attach(
    theirs: Transport,
    control: { open(tag: string): void; close(tag: string): void },
    openTimeoutMs: number,
  ): void {
    const tag = randomBytes(16).toString('hex');
    const related = new RelatedRequests();
    const queued: JSONRPCMessage[] = [];
    let socket: Socket | undefined;
    let done = false;
    // What the proxy sends in one turn of the event loop goes to the child as one write, after the turn's I/O:
    // each write wakes the child, which on a busy machine takes the core from the thread while it still has
    // requests to read, and a shared child woken once reads them all at once (docs/pool.md § Performance)
    let unsent: string[] = [];
    const sendUnsent = () => {
      const lines = unsent;
      unsent = [];
      if (!done) socket!.write(lines.length === 1 ? lines[0]! : lines.join(''));
    };
    const write = (message: JSONRPCMessage) => {
      if (unsent.push(`${JSON.stringify(message)}\n`) === 1) setImmediate(sendUnsent);
    };

    const end = (why: string | undefined) => {
      if (done) return;
      done = true;
      this.waiting.delete(tag);
      this.endings.delete(tag);
      clearTimeout(timer);
      socket?.destroy();
      control.close(tag);
      if (why !== undefined) {
        const message = `the MCP server process ${why}`;
        // answer what is still waiting at once instead of letting the client time out
        for (const id of related.inFlight)
          void theirs.send({ jsonrpc: '2.0', id, error: { code: -32603, message } }).catch(() => undefined);
      }
      void theirs.close();
    };
    theirs.onmessage = (message) => {
      if (done) return;
      related.sent(message);
      if (socket) write(message);
      else queued.push(message);
    };
    theirs.onclose = () => end(undefined);

    // the spawner's word on how the child ended comes apart from the connection's end; either may come first
    let ended: string | undefined;
    this.endings.set(tag, (why) => {
      ended = why;
      if (!socket) end(why);
    });
    const timer = setTimeout(
      () => end(`could not be started (no connection within ${openTimeoutMs} ms)`),
      openTimeoutMs,
    );
    this.waiting.set(tag, (connected, head) => {
      clearTimeout(timer);
      socket = connected;
      for (const message of queued.splice(0)) write(message);
      readLines(connected, head, (line) => {
        const message = parseMessage(line);
        if (!message) return;
        const relatedRequestId = related.received(message);
        void theirs
          .send(message, relatedRequestId === undefined ? undefined : { relatedRequestId })
          .catch(() => undefined);
      });
      connected.on('error', () => undefined);
      connected.once('close', () => {
        // the process's exit and its connection's end race: give the spawner's report a moment
        if (ended !== undefined) return end(ended);
        this.endings.set(tag, (why) => end(why));
        setTimeout(() => end(ended ?? 'ended its connection'), 250).unref();
      });
      connected.resume();
    });
    control.open(tag);
  }

  /** The spawner's report that a session's child ended (or never started). */
  ended(tag: string, why: string): void {
    this.endings.get(tag)?.(why);
  }

  close(): void {
    this.server.close();
    rmSync(this.path, { force: true });
  }

  /** A connection says its session's tag first, then is the child's stdio; anything else is dropped. */
  private accept(socket: Socket): void {
    let head = Buffer.alloc(0);
    const refuse = () => socket.destroy();
    socket.on('error', refuse);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const newline = head.indexOf(0x0a);
      if (newline < 0) {
        if (head.length > MAX_TAG_LINE) refuse();
        return;
      }
      socket.off('data', onData);
      socket.off('error', refuse);
      socket.pause();
      const tag = head.subarray(0, newline).toString('latin1');
      const take = SESSION_TAG.test(tag) ? this.waiting.get(tag) : undefined;
      if (!take) return refuse();
      this.waiting.delete(tag);
      take(socket, head.subarray(newline + 1));
    };
    socket.on('data', onData);
    socket.resume();
  }
}

/** Newline-delimited lines of a stream (after `head`, what came with the tag), as stdio's MCP framing has them. */
function readLines(socket: Socket, head: Buffer, line: (text: string) => void): void {
  // a long answer comes in many chunks: keep them apart until its line ends, and look for the end in each new one only
  let pieces: Buffer[] = [];
  let size = 0;
  const take = (chunk: Buffer) => {
    let start = 0;
    for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, start)) {
      pieces.push(chunk.subarray(start, newline));
      const text = (pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces)).toString('utf8').replace(/\r$/, '');
      pieces = [];
      size = 0;
      start = newline + 1;
      if (text.trim() !== '') line(text);
    }
    if (start < chunk.length) {
      pieces.push(chunk.subarray(start));
      size += chunk.length - start;
      if (size > MAX_LINE_BYTES) socket.destroy(new Error('a line longer than the limit'));
    }
  };
  if (head.length > 0) take(head);
  socket.on('data', take);
}
