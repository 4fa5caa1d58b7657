import { join } from 'node:path';
import { projectRoot } from '@aileron/config';

/**
 * The programs `npm run build` bundles from apps/sandbox-runner and
 * apps/git-helper, one file each with nothing beside it to load, taken from
 * dist even when the control plane runs from source (as in tests). The
 * runner's directory holds the runner alone: the local driver binds it into
 * every sandbox.
 */
export function compiledRunnerPath(): string {
  return join(projectRoot(), 'dist', 'sandbox-runner', 'runner.cjs');
}

export function compiledGitHelperPath(): string {
  return join(projectRoot(), 'dist', 'git-helper.cjs');
}
