export {
  LocalKeyProvider,
  RootKeyError,
  parseRootKeys,
  loadOrCreateKeyFile,
  prependKeyToFile,
  rootKeyId,
} from './root-keyring';
export type { KeyProvider } from './root-keyring';
export { ROOT_KEYS, ROOT_KEY_FILE_NAME, rootKeysFromConfig } from './root-keys';
export { SigningKeysService } from './signing-keys.service';
export { InstallationKeys } from './installation-keys.service';
export type { SigningKeyRing, SigningPurpose, PublishedSigningKey } from './signing-keys.service';
export { KeysModule } from './keys.module';
