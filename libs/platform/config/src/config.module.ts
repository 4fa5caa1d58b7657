import { DynamicModule, Global, Module } from '@nestjs/common';
import type { AppConfig } from './config';

export const APP_CONFIG = Symbol('APP_CONFIG');

/** The configuration is parsed before Nest starts; this only makes it injectable. */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: ConfigModule, providers: [{ provide: APP_CONFIG, useValue: config }], exports: [APP_CONFIG] };
  }
}
