import type { Server } from 'node:http';
import type { INestApplicationContext } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import type { Logger } from 'pino';

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
  server: Server | undefined,
  graceMs: number,
  log: Logger,
): Promise<'closed' | 'overran'> {
  const running = hooksUnderWay(app);
  const waitingOn = async (): Promise<{ hooks: string[]; connections: number | undefined }> => ({
    hooks: [...running],
    connections: server ? await countConnections(server) : undefined,
  });
  const grace = setTimeout(() => {
    void waitingOn().then((what) => {
      log.warn(what, `shutdown: work still under way after ${graceMs / 1000} s; closing the open connections`);
      server?.closeAllConnections();
    });
  }, graceMs);
  let overran: NodeJS.Timeout | undefined;
  const deadline = new Promise<'overran'>((resolve) => {
    overran = setTimeout(() => resolve('overran'), 2 * graceMs);
  });
  try {
    const outcome = await Promise.race([app.close().then(() => 'closed' as const), deadline]);
    if (outcome === 'overran')
      log.error(
        await waitingOn(),
        `shutdown: stopped waiting after ${(2 * graceMs) / 1000} s for work that did not end`,
      );
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

/** The server's open connections now. */
function countConnections(server: Server): Promise<number | undefined> {
  return new Promise((resolve) => server.getConnections((error, count) => resolve(error ? undefined : count)));
}
