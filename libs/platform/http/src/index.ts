export * from './route.decorator';
export * from './route-catalog.service';
export { routesDeclaredIn } from './route-scan';
export { CONSOLE_CSP, consoleCsp, consoleTarget } from './console-files';
export * from './openapi';
export * from './http-metrics';
export { ProblemFilter, writeProblem } from './problem.filter';
export { HttpModule } from './http.module';
export { BODY_LIMIT_BYTES, installBodyParsers, readJsonBody, STREAMED_BODY_TYPES } from './body-parsers';
export { FastPaths, fastPathServer } from './fast-paths';
export { AuthChallenges } from './auth-challenges';
export type { Challenge } from './auth-challenges';
export type { FastPath } from './fast-paths';
export { requestIdFor } from './request-ids';
export { bounded } from './bounded';
export { RequestLog } from './request-log';
export {
  createdAtKey,
  InvalidCursorError,
  LEGACY_REMOVAL,
  legacyPageView,
  ListCursor,
  MAX_PAGE_SIZE,
  numberKey,
  PAGE_SIZE,
  pageQuery,
  pageView,
  textKey,
  textPairKey,
  compareTextPairs,
  compareText,
  withLegacyKey,
} from './pagination';
export type { CursorKey, Page, PageQuery } from './pagination';
