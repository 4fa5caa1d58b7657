export * from './domain/policy-document';
export * from './domain/policy-engine';
export * from './domain/policy-diff';
export { PolicyModule } from './policy.module';
export { PolicyService, PolicyInvalidError } from './policy.service';
export type { CurrentPolicy } from './policy.service';
