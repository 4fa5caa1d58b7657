import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { HISTORY_DIR } from './protocol';

/**
 * How every git of the history runs, on the host (local driver) and in the
 * history container (Kubernetes): over the history's bare repository and
 * the data it is given, never over the agent's files. No configuration but
 * the repository's own (which only we write), no hooks, no fsmonitor, no
 * protocol that reads another repository of the machine, no automatic gc.
 */
export const GIT_SAFETY: readonly string[] = [
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.fsmonitor=false',
  '-c',
  'core.symlinks=true',
  '-c',
  'protocol.file.allow=never',
  '-c',
  'core.quotePath=false',
  '-c',
  'gc.auto=0',
];

/** git's environment: no system or user configuration, no prompt; `home` is where git may look for nothing. */
export function gitEnv(home: string): Record<string, string> {
  return {
    PATH: '/usr/bin:/bin',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    HOME: home,
    GIT_TERMINAL_PROMPT: '0',
    LANG: 'C.UTF-8',
  };
}

/**
 * git's arguments (after the program) for `args` over the history at
 * HISTORY_DIR, with no work tree: git reads the history and the data it is
 * given, never the agent's files. `init` names its directory, or runs in it.
 */
export function historyGitArgs(args: readonly string[]): string[] {
  return [...GIT_SAFETY, ...(args[0] === 'init' ? [] : [`--git-dir=${HISTORY_DIR}`]), ...args];
}

/**
 * The history's `info/attributes`: the work tree of an imported bundle is
 * written from `git archive`, which would leave out `export-ignore` files
 * and expand `export-subst` ones (attributes of the bundle's own
 * `.gitattributes`); these take precedence over it, so /src gets the
 * commit's files exactly. Nothing else reads them.
 */
export const HISTORY_ATTRIBUTES =
  '# written by Aileron: a work tree written by git archive is the commit as it is\n* -export-ignore -export-subst\n';

/**
 * Writes the history's info files into the git directory `gitDir`, at every
 * start of a sandbox (local driver) and every init (the Kubernetes history
 * runner): they are ours, never the agent's, and a history made before them
 * gets them too.
 */
export async function writeHistoryInfo(gitDir: string): Promise<void> {
  await fs.mkdir(join(gitDir, 'info'), { recursive: true });
  await fs.writeFile(join(gitDir, 'info', 'attributes'), HISTORY_ATTRIBUTES);
}
