export * from './logging';
export * from './logging.module';
export { Logger as AppLogger, PinoLogger } from 'nestjs-pino';
