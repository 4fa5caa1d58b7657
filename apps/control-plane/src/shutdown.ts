import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { INestApplicationContext } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import type { Logger } from 'pino';
import { requestSerializer } from '@aileron/logging';

const HOOKS = ['onModuleDestroy', 'beforeApplicationShutdown', 'onApplicationShutdown'] as const;

/**
 * Nest's close waits for each module's shutdown hooks and for every HTTP
 * answer under way, for as long as they take: one stuck hook or one client
 * holding a request open would hold a replica's stop (a rolling update, a
 * Ctrl-C) until it is killed, and say nothing of why. This closes the app
 * with a deadline: after `graceMs` the connections still open are closed,
 * and after twice that the wait ends, naming the hooks that had not finished.
 * Resolves `'closed'`, or `'overran'` when it stopped waiting.
 */
export async function closeWithin(
  app: INestApplicationContext,
  http: { server: Server; activity: ServerActivity } | undefined,
  graceMs: number,
  log: Logger,
): Promise<'closed' | 'overran'> {
  const running = hooksUnderWay(app);
  const waitingOn = (): { hooks: string[]; connections?: number; requests?: string[] } => ({
    hooks: [...running],
    ...(http ? { connections: http.activity.connections(), requests: http.activity.requests() } : {}),
  });
  const grace = setTimeout(() => {
    log.warn(waitingOn(), `shutdown: work still under way after ${graceMs / 1000} s; closing the open connections`);
    http?.server.closeAllConnections();
  }, graceMs);
  let overran: NodeJS.Timeout | undefined;
  const deadline = new Promise<'overran'>((resolve) => {
    overran = setTimeout(() => resolve('overran'), 2 * graceMs);
  });
  try {
    const outcome = await Promise.race([app.close().then(() => 'closed' as const), deadline]);
    if (outcome === 'overran')
      log.error(waitingOn(), `shutdown: stopped waiting after ${(2 * graceMs) / 1000} s for work that did not end`);
    return outcome;
  } finally {
    clearTimeout(grace);
    clearTimeout(overran);
  }
}

/** The lifecycle hooks that have begun and not yet ended, by `Class.hook`, kept up to date from now on. */
function hooksUnderWay(app: INestApplicationContext): Set<string> {
  const running = new Set<string>();
  const seen = new WeakSet<object>();
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of [...module.providers.values(), ...module.controllers.values()]) {
      const instance: unknown = wrapper.instance;
      // one instance can be listed in several modules (exported, aliased): wrap its hooks once
      if (!instance || typeof instance !== 'object' || seen.has(instance)) continue;
      seen.add(instance);
      const hooks = instance as Record<string, unknown>;
      for (const hook of HOOKS) {
        const original = hooks[hook];
        if (typeof original !== 'function') continue;
        const name = `${instance.constructor.name}.${hook}`;
        hooks[hook] = async (...args: unknown[]): Promise<unknown> => {
          running.add(name);
          try {
            return (await (original as (...a: unknown[]) => unknown).apply(instance, args)) as unknown;
          } finally {
            running.delete(name);
          }
        };
      }
    }
  }
  return running;
}

/** What a server is doing, for a shutdown that waits on it to say what, and to let go of what holds it for nothing. */
export interface ServerActivity {
  /** the connections open now */
  connections(): number;
  /** the requests not yet answered, by method and path (a secret's path and the query left out) */
  requests(): string[];
  /**
   * The server is closing: lets go of each connection as soon as it carries no
   * request, now or once its answer is sent. Node's close ends the connections
   * idle at that moment, but not one that has sent nothing yet (a client that
   * connected, a load balancer's spare), which it waits on for its headers for
   * a minute (`headersTimeout`), nor one whose answer ends afterwards, kept
   * alive for the next request for `keepAliveTimeout`: the server's close waited
   * on each.
   */
  closing(): void;
}

/** Follows `server`'s connections and requests from now on. */
export function followActivity(server: Server): ServerActivity {
  const inFlight = new Map<Socket, Set<IncomingMessage>>();
  let closing = false;
  server.on('connection', (socket: Socket) => {
    inFlight.set(socket, new Set());
    socket.once('close', () => inFlight.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: NodeJS.EventEmitter) => {
    const requests = inFlight.get(req.socket);
    requests?.add(req);
    res.once('close', () => {
      requests?.delete(req);
      // after the answer: no further request comes on it
      if (closing && requests?.size === 0) req.socket.end();
    });
  });
  return {
    connections: () => inFlight.size,
    requests: () =>
      [...inFlight.values()].flatMap((requests) =>
        [...requests].map((req) => {
          const { method, path } = requestSerializer(req);
          return `${String(method)} ${String(path)}`;
        }),
      ),
    closing() {
      closing = true;
      for (const [socket, requests] of inFlight) if (requests.size === 0) socket.destroy();
    },
  };
}
