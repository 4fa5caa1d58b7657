export { VaultModule } from './vault.module';
export { VaultService, SecretUnavailableError } from './vault.service';
export type { ReadReason } from './vault.service';
export { parseVaultRef, isVaultRef, pathProblem } from './domain/envelope';
