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
  return { PATH: '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: home, GIT_TERMINAL_PROMPT: '0', LANG: 'C.UTF-8' };
}
