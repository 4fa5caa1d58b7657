export { VaultModule } from './vault.module';
export {
  VaultService,
  SecretUnavailableError,
  SecretNotDeliverableError,
  AuditUnavailableError,
} from './vault.service';
export type { ReadReason, GatewayRead } from './vault.service';
export { SecretChanges } from './secret-changes';
export type { SecretChange } from './secret-changes';
export { parseVaultRef, isVaultRef, pathProblem } from './domain/envelope';
