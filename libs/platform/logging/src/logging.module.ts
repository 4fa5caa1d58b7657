import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { loggerOptions, requestSerializer, responseSerializer } from './logging';

/**
 * nestjs-pino binds every log line written while handling a request (through
 * Nest's Logger too) to that request's id, via AsyncLocalStorage.
 */
@Module({})
export class LoggingModule {
  static forRoot(level: string): DynamicModule {
    return {
      module: LoggingModule,
      imports: [
        LoggerModule.forRoot({
          pinoHttp: {
            ...loggerOptions(level),
            // Fastify has already chosen the id (and set X-Request-Id); reuse it.
            genReqId: (req) => (req as { id?: string }).id ?? 'unknown',
            serializers: { req: requestSerializer, res: responseSerializer },
            customLogLevel: (_req, res, error) => (error || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'debug'),
            quietReqLogger: true,
          },
          forRoutes: ['*path'],
        }),
      ],
      exports: [LoggerModule],
    };
  }
}
