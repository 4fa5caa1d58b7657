export * from './route.decorator';
export * from './route-catalog.service';
export * from './openapi';
export * from './metrics';
export { ProblemFilter, toProblem, sendProblem } from './problem.filter';
export { HttpModule } from './http.module';
export { installBodyParsers } from './body-parsers';
export { FastPaths, fastPathServer } from './fast-paths';
export type { FastPath } from './fast-paths';
