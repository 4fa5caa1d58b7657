import { DynamicModule, Global, Module } from '@nestjs/common';
import { REDIS_SETTINGS, RedisService } from './redis.service';

/**
 * Redis for every domain of the process, under the installation's prefix.
 * Without a URL (embedded mode, the CLI) `configured` is false and users
 * take their in-process paths.
 */
@Global()
@Module({})
export class RedisModule {
  static forRoot(url: string | undefined, prefix = 'aileron'): DynamicModule {
    return {
      module: RedisModule,
      providers: [{ provide: REDIS_SETTINGS, useValue: { url, prefix } }, RedisService],
      exports: [RedisService],
    };
  }
}
