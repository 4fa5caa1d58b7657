import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

/** One registry per app instance, so tests that start several apps do not collide. */
export class HttpMetrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'aileron_http_requests_total',
    help: 'HTTP requests by route template, method and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'aileron_http_request_duration_seconds',
    help: 'HTTP request latency by route template and method',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'aileron_' });
  }

  /**
   * Labels use the route template (`/v1/workspaces/:ws`), never the raw URL:
   * raw URLs would carry ids (unbounded cardinality) and maybe secrets.
   */
  install(fastify: FastifyInstance): void {
    fastify.addHook('onResponse', async (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched';
      const labels = { method: request.method, route };
      this.requests.inc({ ...labels, status: String(reply.statusCode) });
      this.duration.observe(labels, reply.elapsedTime / 1000);
    });
  }
}
