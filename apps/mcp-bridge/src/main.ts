/**
 * The bridge program: a Streamable HTTP MCP front for a stdio MCP server (the
 * parts are `@aileron/pool/bridge`).
 *
 *   node main.js [--host 127.0.0.1] [--port 0] [--exit-on-stdin-eof] [--env-fd N] -- <command> <args...>
 *
 * The bearer secret comes from AILERON_BRIDGE_TOKEN. With `--env-fd N` it and
 * the server's variables come as JSON (`{"env":{...}}`) on that file
 * descriptor instead: the local driver starts bwrap with a fixed environment
 * of its own, so nothing a catalog entry sets can act on a program that runs
 * on the host, and secrets stay off every command line. Once listening it prints
 * one line `{"ready":{"port":N}}` on stdout. Runs inside the local sandbox and
 * as the entrypoint of the Kubernetes runner image; exit code 2 on bad
 * arguments or a missing secret.
 */
import { closeSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createBridgeServer } from '@aileron/pool/bridge';

const log = (line: string) => process.stderr.write(`bridge: ${line}\n`);

function parseArgs(argv: string[]): {
  host: string;
  port: number;
  exitOnStdinEof: boolean;
  envFd: number | undefined;
  command: string;
  args: string[];
} {
  const dash = argv.indexOf('--');
  const [command, ...args] = dash < 0 ? [] : argv.slice(dash + 1);
  const own = dash < 0 ? argv : argv.slice(0, dash);
  let host = '127.0.0.1';
  let port = 0;
  let exitOnStdinEof = false;
  let envFd: number | undefined;
  for (let i = 0; i < own.length; i++) {
    if (own[i] === '--host') host = own[++i] ?? host;
    else if (own[i] === '--port') port = Number(own[++i]);
    else if (own[i] === '--exit-on-stdin-eof') exitOnStdinEof = true;
    else if (own[i] === '--env-fd') envFd = Number(own[++i]);
    else throw new Error(`unknown option ${own[i]}`);
  }
  if (
    !command ||
    !Number.isInteger(port) ||
    port < 0 ||
    port > 65535 ||
    (envFd !== undefined && !(Number.isInteger(envFd) && envFd > 2))
  ) {
    throw new Error('usage: main.js [--host H] [--port N] [--exit-on-stdin-eof] [--env-fd N] -- <command> <args...>');
  }
  return { host, port, exitOnStdinEof, envFd, command, args };
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

function main(): void {
  const options = parseArgs(process.argv.slice(2));
  const handed = options.envFd !== undefined ? environmentFrom(options.envFd) : {};
  const token = handed.AILERON_BRIDGE_TOKEN ?? process.env.AILERON_BRIDGE_TOKEN;
  delete handed.AILERON_BRIDGE_TOKEN;
  // The servers we spawn inherit our environment and the handed variables; the secret must not reach them.
  delete process.env.AILERON_BRIDGE_TOKEN;
  if (!token) throw new Error('AILERON_BRIDGE_TOKEN is not set');
  const bridge = createBridgeServer({
    command: options.command,
    args: options.args,
    env: { ...process.env, ...handed },
    // our own HOME (the instance's, the pod's), not one the entry sets for its server
    packageCache: join(process.env.HOME ?? homedir(), '.cache', 'aileron', 'packages'),
    token,
    log,
  });

  let stopping = false;
  function shutdown(why: string): void {
    if (stopping) return;
    stopping = true;
    log(`stopping (${why})`);
    void bridge.close().then(() => process.exit(0));
  }
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
    process.stdout.write(`${JSON.stringify({ ready: { port } })}\n`);
    log(`listening on ${options.host}:${port}`);
  });
}

try {
  main();
} catch (error) {
  log((error as Error).message);
  process.exit(2);
}
