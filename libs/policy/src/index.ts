export * from './domain/policy-document';
export * from './domain/policy-engine';
export * from './domain/policy-diff';
export { PolicyModule } from './policy.module';
export { PolicyService, PolicyInvalidError } from './policy.service';
export type { CurrentPolicy } from './policy.service';
export { REPLAY_MAX_DAYS, REPLAY_SCAN_LIMIT } from './domain/policy-replay';
