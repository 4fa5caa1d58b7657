/**
 * The bridge program: a Streamable HTTP MCP front for a stdio MCP server (the
 * parts are `@aileron/pool/bridge`).
 *
 *   node main.js [--host 127.0.0.1] [--port 0] [--exit-on-stdin-eof] [--env-fd N] -- <command> <args...>
 *   node main.js --sessions-socket <path> [--env-fd N] -- <command> <args...>
 *
 * The bearer secret comes from AILERON_BRIDGE_TOKEN. With `--env-fd N` it and
 * the server's variables come as JSON (`{"env":{...}}`) on that file
 * descriptor instead: the local driver starts bwrap with a fixed environment
 * of its own, so nothing a catalog entry sets can act on a program that runs
 * on the host, and secrets stay off every command line. Once listening it prints
 * one line `{"ready":{"port":N}}` on stdout. The entrypoint of the Kubernetes
 * runner image; exit code 2 on bad arguments or a missing secret.
 *
 * With `--sessions-socket` it serves no HTTP: the local driver runs it inside
 * an instance's sandbox to start each session's child on a connection to the
 * control plane's socket at that path (`@aileron/pool/bridge`'s session
 * spawner). stdin then carries the driver's commands, a JSON line each
 * (`{"open":tag}`, `{"close":tag}`, `{"ping":n}`), and stdout the answers
 * (`{"ready":{"sessions":path}}` once, `{"ended":{"tag":…,"why":…}}`,
 * `{"pong":n}`); stdin's end stops it. No secret: only the driver can reach
 * the socket.
 */
import { closeSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createBridgeServer, createSessionSpawner, SESSION_TAG, type ServerCommand } from '@aileron/pool/bridge';

const log = (line: string) => process.stderr.write(`bridge: ${line}\n`);

interface Options {
  host: string;
  port: number;
  exitOnStdinEof: boolean;
  envFd: number | undefined;
  sessionsSocket: string | undefined;
  command: string;
  args: string[];
}

function parseArgs(argv: string[]): Options {
  const dash = argv.indexOf('--');
  const [command, ...args] = dash < 0 ? [] : argv.slice(dash + 1);
  const own = dash < 0 ? argv : argv.slice(0, dash);
  let host = '127.0.0.1';
  let port = 0;
  let exitOnStdinEof = false;
  let envFd: number | undefined;
  let sessionsSocket: string | undefined;
  for (let i = 0; i < own.length; i++) {
    if (own[i] === '--host') host = own[++i] ?? host;
    else if (own[i] === '--port') port = Number(own[++i]);
    else if (own[i] === '--exit-on-stdin-eof') exitOnStdinEof = true;
    else if (own[i] === '--env-fd') envFd = Number(own[++i]);
    else if (own[i] === '--sessions-socket') sessionsSocket = own[++i];
    else throw new Error(`unknown option ${own[i]}`);
  }
  if (
    !command ||
    !Number.isInteger(port) ||
    port < 0 ||
    port > 65535 ||
    (envFd !== undefined && !(Number.isInteger(envFd) && envFd > 2)) ||
    sessionsSocket === ''
  ) {
    throw new Error(
      'usage: main.js [--host H] [--port N] [--exit-on-stdin-eof] [--env-fd N] [--sessions-socket PATH] -- <command> <args...>',
    );
  }
  return { host, port, exitOnStdinEof, envFd, sessionsSocket, command, args };
}

/** The variables the driver handed over on a file descriptor (read to its end: the driver closes it at once). */
function environmentFrom(fd: number): Record<string, string> {
  const parsed = JSON.parse(readFileSync(fd, 'utf8')) as { env?: unknown };
  closeSync(fd);
  const env = parsed.env;
  if (typeof env !== 'object' || env === null || Object.values(env).some((v) => typeof v !== 'string'))
    throw new Error(`file descriptor ${fd} holds no environment`);
  return env as Record<string, string>;
}

/** One line of JSON on stdout: what the driver reads. */
function say(message: unknown): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function main(): void {
  const options = parseArgs(process.argv.slice(2));
  const handed = options.envFd !== undefined ? environmentFrom(options.envFd) : {};
  const token = handed.AILERON_BRIDGE_TOKEN ?? process.env.AILERON_BRIDGE_TOKEN;
  delete handed.AILERON_BRIDGE_TOKEN;
  // The servers we spawn inherit our environment and the handed variables; the secret must not reach them.
  delete process.env.AILERON_BRIDGE_TOKEN;
  const server = {
    command: options.command,
    args: options.args,
    env: { ...process.env, ...handed },
    // our own HOME (the instance's, the pod's), not one the entry sets for its server
    packageCache: join(process.env.HOME ?? homedir(), '.cache', 'aileron', 'packages'),
  };
  if (options.sessionsSocket !== undefined) return serveSessions(options.sessionsSocket, server);
  if (!token) throw new Error('AILERON_BRIDGE_TOKEN is not set');
  const bridge = createBridgeServer({ ...server, token, log });

  const shutdown = stopOnce(() => bridge.close());
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  if (options.exitOnStdinEof) {
    // The local driver holds our stdin: when it closes (stop, or the control plane died) we go too.
    process.stdin
      .on('end', () => shutdown('stdin closed'))
      .on('error', () => shutdown('stdin closed'))
      .resume();
  }

  bridge.server.listen(options.port, options.host, () => {
    const address = bridge.server.address();
    const port = typeof address === 'object' && address ? address.port : options.port;
    say({ ready: { port } });
    log(`listening on ${options.host}:${port}`);
  });
}

/** `stop` once, whatever asks first, then exit. */
function stopOnce(stop: () => Promise<void>): (why: string) => void {
  let stopping = false;
  return (why) => {
    if (stopping) return;
    stopping = true;
    log(`stopping (${why})`);
    void stop().then(() => process.exit(0));
  };
}

function serveSessions(socketPath: string, server: ServerCommand): void {
  const spawner = createSessionSpawner({
    ...server,
    socketPath,
    log,
    ended: (tag, why) => say({ ended: { tag, why } }),
  });
  const shutdown = stopOnce(() => spawner.stop());
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // the driver's commands; their end (stop, or the control plane died) is ours
  createInterface({ input: process.stdin, crlfDelay: Infinity })
    .on('line', (line) => {
      let command: { open?: unknown; close?: unknown; ping?: unknown };
      try {
        command = JSON.parse(line) as typeof command;
      } catch {
        return log('a command that is not JSON was ignored');
      }
      if (typeof command.open === 'string' && SESSION_TAG.test(command.open)) spawner.open(command.open);
      else if (typeof command.close === 'string') spawner.close(command.close);
      else if (typeof command.ping === 'number') say({ pong: command.ping });
      else log('an unknown command was ignored');
    })
    .on('close', () => shutdown('stdin closed'));
  process.stdin.on('error', () => shutdown('stdin closed'));
  say({ ready: { sessions: socketPath } });
  log(`starting sessions on ${socketPath}`);
}

try {
  main();
} catch (error) {
  log((error as Error).message);
  process.exit(2);
}
