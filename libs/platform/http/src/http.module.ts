import { Global, Module } from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR, DiscoveryModule } from '@nestjs/core';
import { AuthChallenges } from './auth-challenges';
import { ConsoleFastPath } from './console-fast-path';
import { FastPaths } from './fast-paths';
import { HttpMetrics } from './http-metrics';
import { PlatformController } from './platform.controller';
import { ProblemFilter } from './problem.filter';
import { RequestLog } from './request-log';
import { RouteCatalog } from './route-catalog.service';
import { RouteValidationInterceptor } from './route-validation.interceptor';

@Global()
@Module({
  imports: [DiscoveryModule],
  controllers: [PlatformController],
  providers: [
    HttpMetrics,
    RequestLog,
    FastPaths,
    AuthChallenges,
    RouteCatalog,
    // the web console at `/`, in front of the routes
    ConsoleFastPath,
    { provide: APP_FILTER, useClass: ProblemFilter },
    { provide: APP_INTERCEPTOR, useClass: RouteValidationInterceptor },
  ],
  exports: [HttpMetrics, RequestLog, RouteCatalog, FastPaths, AuthChallenges],
})
export class HttpModule {}
