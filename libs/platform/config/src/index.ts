export * from './config';
export { describeSettings, SETTINGS } from './config.schema';
export type { SettingName } from './config.schema';
export * from './config.module';
export * from './paths';
