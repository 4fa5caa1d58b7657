import { DynamicModule, Module } from '@nestjs/common';
import { AppConfig, ConfigModule } from '@aileron/config';
import { DatabaseHandle, DatabaseModule } from '@aileron/database';
import { LoggingModule } from '@aileron/logging';
import { KeysModule } from '@aileron/keys';
import { OutboxModule } from '@aileron/outbox';
import { QueueModule } from '@aileron/queue';
import { BusModule } from '@aileron/bus';
import { RedisModule } from '@aileron/redis';
import { JOB_MODULES } from '@aileron/domains';
import { DiscoveryModule } from '@nestjs/core';
import { HttpModule } from '@aileron/http';

/**
 * The domains that register job processors and outbox consumers (and what
 * their jobs call), so every job is known here; no HTTP server is started, and
 * nothing of the pool (it serves MCP only).
 */
@Module({})
export class WorkerModule {
  static forRoot(config: AppConfig, database: DatabaseHandle): DynamicModule {
    return {
      module: WorkerModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggingModule.forRoot(config.logLevel),
        DatabaseModule.forRoot(database),
        RedisModule.forRoot(config.redisUrl, config.queuePrefix),
        QueueModule,
        BusModule,
        DiscoveryModule,
        HttpModule,
        KeysModule,
        OutboxModule,
        ...JOB_MODULES,
      ],
    };
  }
}
