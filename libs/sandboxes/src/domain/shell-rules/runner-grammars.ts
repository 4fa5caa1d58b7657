import type { OptionGrammar } from './option-scan';

// The options of programs that run the command written after them, as GNU
// coreutils, util-linux, findutils, sudo and bash read them. An option missing
// here is read both ways (with and without a value), so a gap costs a stricter
// decision, never a missed command.

export const ARGV_RUNNERS: Readonly<Record<string, OptionGrammar>> = {
  command: { flags: 'p', noCommand: 'vV' },
  builtin: {},
  exec: { flags: 'cl', valued: 'a' },
  nohup: {},
  env: {
    valued: 'uCS',
    flags: 'i0v',
    longValued: ['unset', 'chdir', 'split-string'],
    longFlags: ['ignore-environment', 'null', 'debug'],
    longNoCommand: ['list-signal-handling', 'help', 'version'],
    assignments: true,
  },
  nice: { valued: 'n', longValued: ['adjustment'], numericFlags: true },
  time: { valued: 'fo', flags: 'apqv', longValued: ['format', 'output'], longFlags: ['append', 'portability', 'verbose', 'quiet'] },
  timeout: {
    valued: 'sk',
    flags: 'v',
    longValued: ['signal', 'kill-after'],
    longFlags: ['foreground', 'preserve-status', 'verbose'],
    operands: 1,
  },
  stdbuf: { valued: 'ioe', longValued: ['input', 'output', 'error'] },
  setsid: { flags: 'cfw', longFlags: ['ctty', 'fork', 'wait'] },
  sudo: {
    valued: 'aCcDgpRrTtUu',
    attachedOnly: 'h',
    flags: 'AbBEHiKklnNPSsVv',
    noCommand: 'e',
    longValued: ['chdir', 'close-from', 'group', 'host', 'prompt', 'chroot', 'role', 'type', 'command-timeout', 'other-user', 'user'],
    longFlags: ['askpass', 'background', 'bell', 'preserve-env', 'set-home', 'login', 'remove-timestamp', 'reset-timestamp', 'list', 'non-interactive', 'preserve-groups', 'stdin', 'shell', 'validate'],
    longNoCommand: ['edit', 'help', 'version'],
    assignments: true,
  },
  doas: { valued: 'aCu', flags: 'Lns' },
  runuser: {
    valued: 'cgGswu',
    flags: 'flmpP',
    longValued: ['command', 'session-command', 'group', 'supp-group', 'shell', 'whitelist-environment', 'user'],
    longFlags: ['login', 'fast', 'preserve-environment', 'pty'],
  },
  unshare: {
    valued: 'RwSG',
    flags: 'fmuinpCTUrc',
    longValued: ['root', 'wd', 'setuid', 'setgid', 'propagation', 'setgroups', 'map-user', 'map-group', 'map-users', 'map-groups'],
    longFlags: ['fork', 'mount', 'uts', 'ipc', 'net', 'pid', 'cgroup', 'time', 'user', 'map-root-user', 'map-current-user', 'map-auto', 'mount-proc', 'kill-child', 'keep-caps'],
  },
  ionice: { valued: 'cn', flags: 't', noCommand: 'pPu', longValued: ['class', 'classdata'], longFlags: ['ignore'], longNoCommand: ['pid', 'pgid', 'uid'] },
  taskset: { flags: 'ac', noCommand: 'p', longFlags: ['all-tasks', 'cpu-list'], longNoCommand: ['pid'], operands: 1 },
  chroot: { longValued: ['userspec', 'groups'], longFlags: ['skip-chdir'], operands: 1 },
  strace: { valued: 'abeEIoOpPsSuUX', flags: 'cCdDfFhiknqrtTvVwxyYzZ' },
  xargs: {
    valued: 'adEILnPs',
    attachedOnly: 'eil',
    flags: '0oprtx',
    longValued: ['arg-file', 'delimiter', 'max-args', 'max-procs', 'max-chars', 'process-slot-var'],
    longFlags: ['null', 'no-run-if-empty', 'interactive', 'verbose', 'exit', 'open-tty', 'show-limits', 'eof', 'replace', 'max-lines'],
  },
  flock: {
    valued: 'wE',
    flags: 'sxenoFuv',
    longValued: ['timeout', 'wait', 'conflict-exit-code'],
    longFlags: ['shared', 'exclusive', 'unlock', 'nonblock', 'nb', 'close', 'no-fork', 'verbose'],
    operands: 1,
  },
  watch: {
    valued: 'nq',
    flags: 'bcCdegprtwx',
    longValued: ['interval', 'equexit'],
    longFlags: ['beep', 'color', 'no-color', 'differences', 'errexit', 'chgexit', 'precise', 'no-rerun', 'no-title', 'no-wrap', 'exec'],
  },
};

/** su and runuser: `-c` runs a string of code, wherever it stands. */
export const SU_GRAMMAR: OptionGrammar = {
  valued: 'cCgGswu',
  flags: 'flmpP',
  longValued: ['command', 'session-command', 'group', 'supp-group', 'shell', 'whitelist-environment', 'user'],
  longFlags: ['login', 'fast', 'preserve-environment', 'pty'],
  permute: true,
};

/** Paths through which a script operand is the standard input. */
export const STDIN_PATHS: ReadonlySet<string> = new Set(['/dev/stdin', '/dev/fd/0', '/proc/self/fd/0']);

export const MAPFILE_GRAMMAR: OptionGrammar = { valued: 'dnOsuCc', flags: 't', permute: true };

/** Shells whose `-c` string we parse as bash: a string bash cannot parse is decided as unknown. */
export const SHELLS: ReadonlySet<string> = new Set(['sh', 'bash', 'rbash', 'dash', 'ash', 'zsh', 'ksh', 'mksh', 'lksh', 'pdksh', 'posh', 'yash', 'fish', 'csh', 'tcsh']);

/** Multi-call binaries: the first argument names the program they act as. */
export const MULTI_CALL: ReadonlySet<string> = new Set(['busybox', 'toybox']);
