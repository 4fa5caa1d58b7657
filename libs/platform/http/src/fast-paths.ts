import { Injectable } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Answers the request itself and returns true, or returns false to let the app handle it. */
export type FastPath = (request: FastifyRequest, reply: FastifyReply) => boolean;

/**
 * Requests so frequent and so cheap to answer that the framework's pipeline
 * would cost more than the answer (a gateway's 304 poll). Domains register
 * synchronous handlers that answer only from memory and only when they are
 * sure. Metrics still count them (onResponse hooks run for every reply).
 */
@Injectable()
export class FastPaths {
  readonly handlers: FastPath[] = [];

  add(handler: FastPath): void {
    this.handlers.push(handler);
  }
}

/**
 * Fastify runs onRequest hooks in the order they were added, and Nest adds its
 * middleware hook (request logging among it) while the app is created. So the
 * entry point installs this on the bare Fastify instance first, and binds the
 * app's FastPaths once the app exists.
 */
export function installFastPaths(fastify: FastifyInstance): { bind(paths: FastPaths): void } {
  let handlers: readonly FastPath[] = [];
  fastify.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    for (const handler of handlers) if (handler(request, reply)) return;
    done();
  });
  return { bind: (paths) => void (handlers = paths.handlers) };
}
