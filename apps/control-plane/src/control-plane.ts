import type { IncomingMessage } from 'node:http';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { AppConfig } from '@aileron/config';
import { DatabaseHandle, openDatabase } from '@aileron/database';
import {
  BODY_LIMIT_BYTES,
  FastPaths,
  fastPathServer,
  installBodyParsers,
  RequestLog,
  requestIdFor,
} from '@aileron/http';
import { AppLogger, createLogger, QuietStartLogger } from '@aileron/logging';
import { SignInLinks } from '@aileron/auth';
import { OutboxService } from '@aileron/outbox';
import { QueueService } from '@aileron/queue';
import { BootstrapResult, BootstrapService } from '@aileron/tenancy';
import { AppModule } from './app.module';
import { closeWithin, followActivity } from './shutdown';

export interface ControlPlane {
  app: NestFastifyApplication;
  config: AppConfig;
  database: DatabaseHandle;
  /** where it listens, e.g. http://127.0.0.1:8080 */
  url: string;
  bootstrap: BootstrapResult | undefined;
  /** embedded mode: a one-time link that signs the machine's owner in to the web console */
  signInLink: string | undefined;
  close(): Promise<void>;
}

export interface StartOptions {
  /** listen on the configured port (default true); tests use port 0 */
  listen?: boolean;
}

/**
 * Boots the control plane: database (migrated), Nest on Fastify, the
 * embedded-mode defaults, the outbox dispatcher and, where configured, the job
 * processors. The same path serves `npm start`, the CLI and the tests.
 */
export async function startControlPlane(config: AppConfig, options: StartOptions = {}): Promise<ControlPlane> {
  const log = createLogger(config.logLevel);
  const database = await openDatabase(config.database, { log: (line) => log.info(line) });
  let app: NestFastifyApplication | undefined;
  try {
    // in front of Fastify: a gateway's 304 polls never reach routing, hooks or middleware
    const fastPaths = fastPathServer({ keepAliveTimeoutMs: 72_000 });
    const adapter = new FastifyAdapter({
      serverFactory: fastPaths.serverFactory,
      // honour a caller's request id so logs correlate across services
      genReqId: (req: IncomingMessage) => {
        const id = requestIdFor(req.headers['x-request-id']);
        (req as IncomingMessage & { id?: string }).id = id;
        return id;
      },
      bodyLimit: BODY_LIMIT_BYTES,
      return503OnClosing: true,
    });
    app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, database), adapter, {
      bufferLogs: true,
      abortOnError: false,
      bodyParser: false,
    });
    app.useLogger(new QuietStartLogger(app.get(AppLogger)));
    const fastify = app.getHttpAdapter().getInstance();
    const activity = followActivity(fastify.server);
    // as the server stops taking connections: the ones that carry no request are of no use
    fastify.addHook('preClose', (done) => {
      activity.closing();
      done();
    });
    fastPaths.bind(app.get(FastPaths));
    app.get(RequestLog).install(fastify);
    // every body is read by @aileron/http's parsers, which the fast paths use too
    installBodyParsers(fastify);
    await app.init();

    const bootstrap =
      config.mode === 'embedded' ? await app.get(BootstrapService).ensureEmbeddedDefaults(config.dataDir) : undefined;
    if (config.runWorkers) await app.get(QueueService).startWorkers();
    app.get(OutboxService).start(config.outboxPollMs);

    let url = '';
    if (options.listen !== false) {
      await app.listen({ port: config.port, host: config.host });
      const address = fastify.server.address();
      const port = typeof address === 'object' && address ? address.port : config.port;
      url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;
    }
    const signInLink =
      bootstrap && url ? (await app.get(SignInLinks).mintForOrganization('default', url)).url : undefined;
    const started = app;
    let closing: Promise<void> | undefined;
    return {
      app: started,
      config,
      database,
      url,
      bootstrap,
      signInLink,
      close: () =>
        (closing ??= (async () => {
          await closeWithin(started, { server: fastify.server, activity }, config.shutdownGraceSeconds * 1000, log);
          await database.close();
        })()),
    };
  } catch (error) {
    await app?.close().catch(() => undefined);
    await database.close();
    throw error;
  }
}
