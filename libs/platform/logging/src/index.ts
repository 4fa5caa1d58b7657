export * from './logging';
export * from './logging.module';
export { logDestination, prettyLine } from './pretty';
export { QuietStartLogger } from './quiet-start-logger';
export { Logger as AppLogger, PinoLogger } from 'nestjs-pino';
