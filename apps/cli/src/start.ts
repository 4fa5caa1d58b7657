import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '@aileron/config';
import { CliError } from './cli-error';

/**
 * Runs the very entry point `npm start` runs, in this process: same banner,
 * signals and exit codes by construction, with no copy to drift. It is loaded
 * by path at run time because one app must not import another (apps share
 * code through libs only), and startControlPlane lives in apps/control-plane.
 */
export function runStart(): void {
  const entry = join(projectRoot(), 'dist', 'apps', 'control-plane', 'src', 'main.js');
  if (!existsSync(entry)) throw new CliError(`${entry} is missing: run \`npm run build\` first`);
  require(entry);
}
