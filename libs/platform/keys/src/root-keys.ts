import { join } from 'node:path';
import type { AppConfig } from '@aileron/config';
import { KeyProvider, loadOrCreateKeyFile, LocalKeyProvider, parseRootKeys } from './root-keyring';

export const ROOT_KEYS = Symbol('ROOT_KEYS');
export const ROOT_KEY_FILE_NAME = 'root-keys';

/**
 * The root keyring from the configuration: AILERON_ROOT_KEY (keys inline),
 * else AILERON_ROOT_KEY_FILE, else a file in the data folder that the first
 * start creates. Several server-mode replicas must share one of the first two.
 */
export function rootKeysFromConfig(
  config: Pick<AppConfig, 'rootKey' | 'rootKeyFile' | 'dataDir'>,
  log: (line: string) => void,
): LocalKeyProvider {
  if (config.rootKey) return new LocalKeyProvider(parseRootKeys(config.rootKey, 'AILERON_ROOT_KEY'));
  const path = config.rootKeyFile ?? join(config.dataDir, ROOT_KEY_FILE_NAME);
  const { keys, created } = loadOrCreateKeyFile(path);
  if (created) log(`generated a root key in ${path} (mode 0600); back it up: without it no secret can be read`);
  return new LocalKeyProvider(keys);
}

export type { KeyProvider };
