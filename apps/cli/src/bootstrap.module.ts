import { DynamicModule, Module } from '@nestjs/common';
import { AppConfig, ConfigModule } from '@aileron/config';
import { DatabaseHandle, DatabaseModule } from '@aileron/database';
import { HttpModule } from '@aileron/http';
import { KeysModule } from '@aileron/keys';
import { OutboxModule } from '@aileron/outbox';
import { QueueModule } from '@aileron/queue';
import { BusModule } from '@aileron/bus';
import { RedisModule } from '@aileron/redis';
import { JOB_MODULES } from '@aileron/domains';

/**
 * The control plane's modules (apps/control-plane/src/app.module.ts), enough
 * to run BootstrapService outside a server. HttpModule stays because the auth
 * guard reads its route catalog. LoggingModule is left out: its pino logger
 * writes to stdout, which belongs to the token.
 */
@Module({})
export class BootstrapModule {
  static forRoot(config: AppConfig, database: DatabaseHandle): DynamicModule {
    return {
      module: BootstrapModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot(database),
        // No Redis even where configured: nothing is enqueued here. The outbox
        // rows this writes wait in the database for the control plane's dispatcher.
        RedisModule.forRoot(undefined),
        QueueModule,
        BusModule,
        KeysModule,
        OutboxModule,
        HttpModule,
        ...JOB_MODULES,
      ],
    };
  }
}
