import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { requestLoggerOptions } from './logging';
import { logDestination } from './pretty';

/** nestjs-pino keeps each request's logger in AsyncLocalStorage, for every line written while handling it. */
@Module({})
export class LoggingModule {
  static forRoot(level: string): DynamicModule {
    return {
      module: LoggingModule,
      imports: [
        LoggerModule.forRoot({ pinoHttp: [requestLoggerOptions(level), logDestination()], forRoutes: ['*path'] }),
      ],
      exports: [LoggerModule],
    };
  }
}
