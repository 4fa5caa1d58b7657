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
  // the priority comes before the command; newer releases let it be left out
  chrt: {
    valued: 'TPD',
    flags: 'abdfiorRv',
    noCommand: 'pmhV',
    longValued: ['sched-runtime', 'sched-period', 'sched-deadline'],
    longFlags: ['all-tasks', 'batch', 'deadline', 'fifo', 'idle', 'other', 'rr', 'reset-on-fork', 'verbose'],
    longNoCommand: ['pid', 'max', 'help', 'version'],
    operands: 1,
    optionalOperands: true,
  },
  // a limit's value is optional, so only attached (-n100, --nofile=100)
  prlimit: {
    valued: 'po',
    attachedOnly: 'cdefilmnqrstuvxy',
    noCommand: 'hV',
    longValued: ['pid', 'output'],
    longFlags: ['noheadings', 'raw', 'verbose', 'core', 'data', 'nice', 'fsize', 'sigpending', 'memlock', 'rss', 'nofile', 'msgqueue', 'rtprio', 'stack', 'cpu', 'nproc', 'as', 'locks', 'rttime'],
    longNoCommand: ['help', 'version'],
  },
  setpriv: {
    noCommand: 'dLhV',
    longValued: ['ambient-caps', 'inh-caps', 'bounding-set', 'ruid', 'euid', 'rgid', 'egid', 'reuid', 'regid', 'groups', 'securebits', 'pdeathsig', 'selinux-label', 'apparmor-profile', 'landlock-access', 'landlock-rule'],
    longFlags: ['nnp', 'no-new-privs', 'clear-groups', 'keep-groups', 'init-groups', 'reset-env'],
    longNoCommand: ['dump', 'list-caps', 'help', 'version'],
  },
  nsenter: {
    valued: 'tSGW',
    attachedOnly: 'muinpCUTrw',
    flags: 'aFZce',
    noCommand: 'hV',
    longValued: ['target', 'setuid', 'setgid', 'wdns'],
    longFlags: ['all', 'mount', 'uts', 'ipc', 'net', 'pid', 'cgroup', 'user', 'time', 'root', 'wd', 'preserve-credentials', 'no-fork', 'follow-context', 'join-cgroup', 'env', 'keep-caps', 'user-parent'],
    longNoCommand: ['help', 'version'],
  },
  tini: { valued: 'pe', flags: 'svwg', noCommand: 'hl', longNoCommand: ['version'] },
  'dumb-init': { valued: 'r', flags: 'cv', noCommand: 'hV', longValued: ['rewrite'], longFlags: ['single-child', 'verbose'], longNoCommand: ['help', 'version'] },
  fakeroot: { valued: 'lfisb', flags: 'u', noCommand: 'hv', longValued: ['lib', 'faked', 'fd-base'], longFlags: ['unknown-is-real'], longNoCommand: ['help', 'version'] },
  ltrace: {
    valued: 'aADeFlnopsuwx',
    flags: 'bcCfiLrStT',
    noCommand: 'hV',
    longValued: ['align', 'config', 'indent', 'library', 'output'],
    longFlags: ['demangle', 'no-signals'],
    longNoCommand: ['help', 'version'],
  },
};

/** setarch after its optional architecture, and the names it is installed under for one. */
export const PERSONALITY_GRAMMAR: OptionGrammar = {
  flags: 'BFILRSTXZ3v',
  noCommand: 'hV',
  longFlags: ['32bit', 'fdpic-funcptrs', 'short-inode', 'addr-compat-layout', 'addr-no-randomize', 'whole-seconds', 'sticky-timeouts', 'read-implies-exec', 'mmap-page-zero', '3gb', '4gb', 'uname-2.6', 'verbose'],
  longNoCommand: ['list', 'help', 'version'],
};

export const PERSONALITIES: ReadonlySet<string> = new Set(['linux32', 'linux64', 'i386', 'x86_64', 'uname26']);

/** Runners that start a shell when given no command: it reads their standard input. */
export const SHELL_WITHOUT_COMMAND: ReadonlySet<string> = new Set(['setarch', ...PERSONALITIES, 'unshare', 'nsenter', 'fakeroot']);

/** script: `-c` runs a string of code, `--` the argv after it, and without either a shell. */
export const SCRIPT_GRAMMAR: OptionGrammar = {
  valued: 'cEBIOTmo',
  attachedOnly: 't',
  flags: 'aefqF',
  noCommand: 'hV',
  longValued: ['command', 'echo', 'log-io', 'log-in', 'log-out', 'log-timing', 'logging-format', 'output-limit'],
  longFlags: ['append', 'return', 'flush', 'force', 'quiet', 'timing'],
  longNoCommand: ['help', 'version'],
  permute: true,
};

/** compgen and complete: `-C` runs code, `-F` a function, `-W` expands a word list. */
export const COMPLETION_GRAMMAR: OptionGrammar = { valued: 'oAGWFCXPSV', flags: 'abcdefgjksuvDEIpr' };

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
