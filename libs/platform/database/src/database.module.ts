import { DynamicModule, Global, Module } from '@nestjs/common';
import type { DatabaseHandle } from './database';
import { DATABASE_HANDLE, DatabaseService } from './database.service';

/** The handle is opened (and migrated) before Nest starts, so boot order is explicit. */
@Global()
@Module({})
export class DatabaseModule {
  static forRoot(handle: DatabaseHandle): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [{ provide: DATABASE_HANDLE, useValue: handle }, DatabaseService],
      exports: [DatabaseService],
    };
  }
}
