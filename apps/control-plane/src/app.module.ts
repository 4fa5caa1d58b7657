import { DynamicModule, Module } from '@nestjs/common';
import { AppConfig, ConfigModule } from '@aileron/config';
import { DatabaseHandle, DatabaseModule } from '@aileron/database';
import { HttpModule } from '@aileron/http';
import { LoggingModule } from '@aileron/logging';
import { KeysModule } from '@aileron/keys';
import { OutboxModule } from '@aileron/outbox';
import { QueueModule } from '@aileron/queue';
import { BusModule } from '@aileron/bus';
import { RedisModule } from '@aileron/redis';
import { DOMAIN_MODULES } from '@aileron/domains';

/** Platform first, then one module per domain. */
@Module({})
export class AppModule {
  static forRoot(config: AppConfig, database: DatabaseHandle): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggingModule.forRoot(config.logLevel),
        DatabaseModule.forRoot(database),
        RedisModule.forRoot(config.redisUrl, config.queuePrefix),
        QueueModule,
        BusModule,
        KeysModule,
        OutboxModule,
        HttpModule,
        ...DOMAIN_MODULES,
      ],
    };
  }
}
