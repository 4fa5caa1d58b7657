import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Controller, Inject, Param, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { APP_CONFIG, AppConfig, projectRoot } from '@aileron/config';
import { DatabaseService } from '@aileron/database';
import { DomainError, NotFoundError } from '@aileron/errors';
import { QueueService } from '@aileron/queue';
import { RedisService } from '@aileron/redis';
import { bounded } from './bounded';
import { HttpMetrics } from './http-metrics';
import { buildOpenApi } from './openapi';
import { RouteCatalog } from './route-catalog.service';
import { Route } from './route.decorator';

/** a database that has not answered SELECT 1 by then is not ready */
const DATABASE_CHECK_MS = 800;

const health = z.object({ status: z.enum(['ok']) });
const readiness = z.object({ status: z.enum(['ok']), database: z.boolean(), queue: z.boolean() });

const DOCS_ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'application/javascript; charset=utf-8',
};

function docsPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Aileron control plane API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="api"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/docs-init.js"></script>
</body></html>`;
}

// a separate file, not inline, so the page works under a strict Content-Security-Policy
const DOCS_INIT = `window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#api', deepLinking: true, persistAuthorization: false });`;

@Controller()
export class PlatformController {
  private openApi: string | undefined;
  private readonly assets = new Map<string, Buffer>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly db: DatabaseService,
    private readonly queue: QueueService,
    private readonly redis: RedisService,
    private readonly metrics: HttpMetrics,
    private readonly routes: RouteCatalog,
  ) {}

  @Route({
    method: 'GET',
    path: '/healthz',
    summary: 'The process is alive',
    tag: 'platform',
    auth: 'public',
    tenancy: 'none',
    response: health,
  })
  healthz(): z.infer<typeof health> {
    return { status: 'ok' };
  }

  @Route({
    method: 'GET',
    path: '/readyz',
    summary: 'The database (and Redis, when configured) answer',
    tag: 'platform',
    auth: 'public',
    tenancy: 'none',
    response: readiness,
  })
  async readyz(): Promise<z.infer<typeof readiness>> {
    // each check bounded: the probe answers within a second whatever is down (the Redis checks bound themselves at half a second)
    const [database, queue, redis] = await Promise.all([
      bounded(() => this.db.ping(), DATABASE_CHECK_MS),
      this.queue.ping(),
      this.redis.ping(),
    ]);
    if (!database || !queue || !redis) {
      const state = (up: boolean): string => (up ? 'ok' : 'down');
      throw new DomainError(
        'NOT_READY',
        `not ready: database ${state(database)}, queue ${state(queue)}, redis ${state(redis)}`,
        {
          extensions: { database, queue, redis },
        },
      );
    }
    return { status: 'ok', database, queue };
  }

  @Route({
    method: 'GET',
    path: '/metrics',
    summary: 'Prometheus metrics',
    tag: 'platform',
    auth: 'public',
    tenancy: 'none',
    produces: 'text/plain',
  })
  async metricsText(@Res() reply: FastifyReply): Promise<void> {
    const text = await this.metrics.registry.metrics();
    void reply.header('content-type', this.metrics.registry.contentType).send(text);
  }

  @Route({
    method: 'GET',
    path: '/v1/openapi.json',
    summary: 'This OpenAPI document',
    tag: 'platform',
    auth: 'public',
    tenancy: 'none',
  })
  openapi(@Res() reply: FastifyReply): void {
    this.openApi ??= JSON.stringify(
      buildOpenApi(this.routes.all(), {
        title: 'Aileron control plane',
        version: 'v1',
        serverUrl: this.config.publicUrl,
      }),
    );
    void reply.header('content-type', 'application/json; charset=utf-8').send(this.openApi);
  }

  @Route({
    method: 'GET',
    path: '/docs',
    summary: 'Human-readable API documentation',
    tag: 'platform',
    auth: 'public',
    tenancy: 'none',
    produces: 'text/html',
  })
  docs(@Res() reply: FastifyReply): void {
    void reply.header('content-type', 'text/html; charset=utf-8').send(docsPage());
  }

  @Route({
    method: 'GET',
    path: '/docs/assets/:file',
    summary: 'Static files of the docs page',
    tag: 'platform',
    auth: 'public',
    tenancy: 'none',
    params: z.object({ file: z.string() }),
    produces: 'application/octet-stream',
  })
  docsAsset(@Param('file') file: string, @Res() reply: FastifyReply): void {
    if (file === 'docs-init.js') {
      void reply.header('content-type', 'application/javascript; charset=utf-8').send(DOCS_INIT);
      return;
    }
    const type = DOCS_ASSETS[file];
    if (!type) throw new NotFoundError('asset', file, 'ASSET_NOT_FOUND');
    let body = this.assets.get(file);
    if (!body) {
      body = readFileSync(join(projectRoot(), 'node_modules', 'swagger-ui-dist', file));
      this.assets.set(file, body);
    }
    void reply.header('content-type', type).header('cache-control', 'public, max-age=86400').send(body);
  }
}
