/**
 * The bridge's other face, for the local driver: no HTTP at all. The control
 * plane listens on a unix socket it made for the instance (bound into the
 * sandbox). For each MCP session it asks the spawner to `open` one, with a
 * tag of its own; the spawner connects to that socket, says the tag, and
 * starts a child of the server whose stdin and stdout are that connection.
 * From then on the control plane and the child speak stdio's
 * newline-delimited JSON-RPC to each other with no process between them,
 * while the child runs inside the instance's sandbox like any other, as its
 * user, with its environment. The spawner never reads the connection: it
 * only starts, stops and reports on the children.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { allExited, kill, launchOf, type ServerCommand } from './server-process';
import { socketAddress } from './unix-socket';

/** a session's tag: what the control plane matches a connection to its request by */
export const SESSION_TAG = /^[0-9a-f]{32}$/;

export interface SessionSpawnerOptions extends ServerCommand {
  /** the control plane's socket for the instance's sessions */
  socketPath: string;
  /** one line per event worth a note (stderr in the program) */
  log: (line: string) => void;
  /** a session's child is gone, or never started: "exited (code 1)", "could not be started (ENOENT)" */
  ended: (tag: string, why: string) => void;
}

export interface SessionSpawner {
  /** starts the session's child on a connection of its own; `ended` says when it fails or goes */
  open(tag: string): void;
  /** ends the session's child: SIGTERM, SIGKILL after a grace period */
  close(tag: string): void;
  /** ends every child; resolves once they are gone (or after the grace period and a little more) */
  stop(): Promise<void>;
}

export function createSessionSpawner(options: SessionSpawnerOptions): SessionSpawner {
  const { log } = options;
  const children = new Map<string, ChildProcess>();
  const stopped = new AbortController();
  const launch = launchOf(options, log, stopped.signal);

  /** A connection to the control plane that says the tag first, and is never read here. */
  function connection(tag: string): Promise<Socket> {
    const { address, release } = socketAddress(options.socketPath);
    return new Promise((resolve, reject) => {
      const socket = connect(address);
      // paused before it connects: the control plane's first message is the child's to read
      socket.pause();
      socket.once('error', (error) => {
        release();
        reject(error);
      });
      socket.once('connect', () => {
        release();
        socket.write(`${tag}\n`, (error) => (error ? reject(error) : resolve(socket)));
      });
    });
  }

  async function open(tag: string): Promise<void> {
    const { command, args } = await launch;
    if (stopped.signal.aborted) return options.ended(tag, 'could not be started (the instance is stopping)');
    let socket: Socket;
    try {
      socket = await connection(tag);
    } catch (error) {
      log(`could not reach the control plane for a session: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
      return options.ended(tag, 'could not be started (the control plane could not be reached)');
    }
    let child: ChildProcess;
    try {
      child = spawn(command, args, { env: options.env, stdio: [socket, socket, 'inherit'] });
    } catch (error) {
      socket.destroy();
      return options.ended(tag, `could not be started (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    // the child holds the connection now; ours would keep it open after the child is gone
    socket.destroy();
    children.set(tag, child);
    let done = false;
    const end = (why: string) => {
      if (done) return;
      done = true;
      children.delete(tag);
      options.ended(tag, why);
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      log(`could not start the MCP server: ${error.code ?? error.message}`);
      end(`could not be started (${error.code ?? 'error'})`);
    });
    child.once('exit', (code, signal) => {
      log(`MCP server process ${child.pid ?? '?'} exited (${signal ?? `code ${code}`})`);
      end(`exited (${signal ?? `code ${code}`})`);
    });
  }

  return {
    open(tag) {
      void open(tag);
    },
    close(tag) {
      const child = children.get(tag);
      if (child) kill(child);
    },
    stop() {
      stopped.abort();
      const running = [...children.values()];
      for (const child of running) kill(child);
      return allExited(running);
    },
  };
}
