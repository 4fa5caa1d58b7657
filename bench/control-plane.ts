import type { ControlPlane } from '../apps/control-plane/src/control-plane';
import { note } from './figures';

/** Every request still passes the rate limiter, with a budget sized for a load test. */
export const LOAD_TEST_RATE_LIMITS = {
  AILERON_RATE_LIMIT_WORKSPACE_PER_MINUTE: '100000000',
  AILERON_RATE_LIMIT_PRINCIPAL_PER_MINUTE: '100000000',
};

/**
 * The control plane a bench measures, in this process: embedded mode in
 * `dataDir` unless `env` says otherwise, logging errors only, on a free port.
 * Loaded only when called: the benches' child processes and load threads load
 * their files too, and need none of it.
 */
export async function startBenchControlPlane(dataDir: string, env: Record<string, string> = {}): Promise<ControlPlane> {
  const { startControlPlane } =
    require('../apps/control-plane/src/control-plane') as typeof import('../apps/control-plane/src/control-plane');
  const { loadConfig } = require('../libs/platform/config/src') as typeof import('../libs/platform/config/src');
  const started = Date.now();
  // PORT must be 1..65535 in the environment; a free port is only for in-process starts, as the tests do
  const config = { ...loadConfig({ AILERON_DATA_DIR: dataDir, PORT: '1', LOG_LEVEL: 'error', ...env }), port: 0 };
  const controlPlane = await startControlPlane(config);
  note(
    `  control plane (${config.mode} mode) up at ${controlPlane.url} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return controlPlane;
}
