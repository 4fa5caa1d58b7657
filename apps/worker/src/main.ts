import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { loadConfigOrExit } from '@aileron/config';
import { openDatabase } from '@aileron/database';
import { AppLogger, createLogger } from '@aileron/logging';
import { QueueService } from '@aileron/queue';
import { WorkerModule } from './worker.module';

/**
 * Server mode's job processors (BullMQ on REDIS_URL) as their own process.
 * Scale it out freely: BullMQ hands each job to one worker.
 */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel);
  if (!config.redisUrl || config.database.kind !== 'postgres') {
    process.stderr.write(
      'aileron-worker: needs DATABASE_URL and REDIS_URL (server mode); in embedded mode the control plane runs the jobs itself\n',
    );
    process.exit(78);
  }
  const database = await openDatabase(config.database, { log: (line) => log.info(line) });
  const app = await NestFactory.createApplicationContext(WorkerModule.forRoot(config, database), { bufferLogs: true });
  app.useLogger(app.get(AppLogger));
  await app.init();
  await app.get(QueueService).startWorkers();
  log.info('worker started');

  const stop = (signal: string): void => {
    log.info(`${signal}: draining and stopping`);
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    app
      .close()
      .then(() => database.close())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  process.stderr.write(`aileron-worker: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
