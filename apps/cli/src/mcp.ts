import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { CliError } from './cli-error';

/**
 * `aileron-cp mcp`: the bundled aileron-mcp, run in this process. The bundle,
 * not the source: it is the one file containers get, so this runs what they run.
 */
export async function runMcp(args: string[]): Promise<number> {
  // dist/apps/cli/src → dist/aileron-mcp.cjs
  const bundle = resolve(__dirname, '..', '..', '..', 'aileron-mcp.cjs');
  if (!existsSync(bundle)) throw new CliError(`aileron-mcp is not built (${bundle} is missing): run \`npm run build\``);
  const { run } = require(bundle) as { run(args: string[]): Promise<number> };
  return run(args);
}
