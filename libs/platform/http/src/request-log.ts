import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Injectable } from '@nestjs/common';
import type { FastifyInstance } from 'fastify';
import type { Logger as Pino } from 'pino';
import { PinoLogger } from '@aileron/logging';
import { HttpMetrics } from './http-metrics';

type Level = 'error' | 'info' | 'debug';

/**
 * How every request ends up in the log and the metrics, whichever front
 * answered it: the routes (Fastify, through `install`) or a fast path in
 * front of them. One line per request, quiet below 400 unless debugging,
 * with the request id the answer carried.
 */
@Injectable()
export class RequestLog {
  constructor(private readonly metrics: HttpMetrics) {}

  /** Every request Fastify routes, hijacked answers (MCP streams) included. */
  install(fastify: FastifyInstance): void {
    fastify.addHook('onRequest', (request, reply, done) => {
      this.follow(request.raw, reply.raw, request.routeOptions.url ?? 'unmatched', request.id);
      done();
    });
  }

  /**
   * From the start of a request: its answer carries the request id, and it is
   * counted (under the route template, never the raw URL: ids and secrets
   * would be labels) and logged when the response ends.
   */
  follow(request: IncomingMessage, response: ServerResponse, route: string, requestId: string): void {
    const started = performance.now();
    response.setHeader('x-request-id', requestId);
    response.once('close', () => {
      const ms = performance.now() - started;
      const finished = response.writableFinished;
      if (finished) this.metrics.observe(request.method ?? '', route, response.statusCode, ms / 1000);
      this.write(request, response.statusCode, requestId, ms, finished && !request.readableAborted);
    });
  }

  /**
   * For a fast path answering thousands of requests a second at once, from
   * memory, always with `status`: counted without timing (microseconds would
   * only blur the route's histogram) and without hashing labels per request.
   */
  atOnce(method: string, route: string, status: number): (request: IncomingMessage, requestId: string) => void {
    const tally = this.metrics.tally(method, route, status);
    return (request, requestId) => {
      tally.add();
      this.write(request, status, requestId, 0, true);
    };
  }

  private write(request: IncomingMessage, status: number, requestId: string, ms: number, completed: boolean): void {
    const level: Level = status >= 500 ? 'error' : status >= 400 ? 'info' : 'debug';
    // the request logger's own (its redaction and serializers); absent where the app runs without it (the CLI's commands)
    const log = PinoLogger.root as Pino | undefined;
    if (!log?.isLevelEnabled(level)) return;
    const message = status >= 500 ? 'request errored' : completed ? 'request completed' : 'request aborted';
    // shaped as the serializers read a request and a response (logging.ts): the path without its query, the status
    const req = { id: requestId, method: request.method, url: request.url };
    const res = { statusCode: status, headersSent: true };
    log[level]({ reqId: requestId, req, res, responseTime: Math.round(ms) }, message);
  }
}
