// Programs the analysis knows run none of their arguments as a program. Any
// other program it does not read as a runner, given the name of a program a
// strict rule names, may be a wrapper it has never heard of: a person decides
// (command-decision.ts). A program that can run one of its arguments
// (sort --compress-program, tar -I, rsync -e, man -P, less, git's aliases) is
// deliberately left out of this list.

/** bash builtins and common tools that never run an argument as a program. */
export const INERT_PROGRAMS: ReadonlySet<string> = new Set([
  // bash builtins; those that run code (eval, source, trap, command, exec, …) are read as runners
  ':', 'true', 'false', 'echo', 'printf', 'cd', 'pwd', 'pushd', 'popd', 'dirs', 'export', 'declare', 'typeset', 'local',
  'readonly', 'unset', 'let', 'read', 'shift', 'set', 'shopt', 'test', '[', 'type', 'help', 'jobs', 'kill', 'wait', 'disown',
  'suspend', 'logout', 'exit', 'return', 'break', 'continue', 'getopts', 'umask', 'ulimit', 'times', 'history', 'bind', 'caller',
  'enable', 'unalias', 'compopt', 'fg', 'bg',
  // files and text
  'ls', 'cat', 'tac', 'cp', 'mv', 'ln', 'rm', 'unlink', 'shred', 'truncate', 'mkdir', 'rmdir', 'touch', 'chmod', 'chown', 'chgrp', 'stat', 'file', 'du', 'df',
  'head', 'tail', 'wc', 'cut', 'paste', 'join', 'comm', 'tr', 'uniq', 'nl', 'fold', 'fmt', 'rev', 'expand', 'unexpand', 'column',
  'tee', 'grep', 'egrep', 'fgrep', 'diff', 'cmp', 'od', 'xxd', 'hexdump', 'base64', 'md5sum', 'sha1sum', 'sha256sum', 'sha512sum',
  'cksum', 'basename', 'dirname', 'realpath', 'readlink', 'mktemp', 'jq', 'tree', 'gzip', 'gunzip', 'zcat', 'bzip2', 'xz', 'zstd',
  // about programs and the system
  'which', 'whereis', 'whatis', 'date', 'sleep', 'seq', 'yes', 'id', 'whoami', 'groups', 'uname', 'hostname', 'printenv',
  'ps', 'pgrep', 'pkill', 'killall', 'uptime', 'free', 'nproc',
]);

/**
 * Programs whose first operand is one of their own subcommands (`git rm`,
 * `docker rm`), with the global options that take a value before it. Their
 * other arguments are read as any program's are (`git bisect run rm`).
 */
export const SUBCOMMAND_PROGRAMS: Readonly<Record<string, readonly string[]>> = {
  git: ['-C', '-c', '--git-dir', '--work-tree', '--namespace', '--super-prefix', '--config-env'],
  docker: ['-H', '--host', '-c', '--context', '--config', '-l', '--log-level'],
  podman: ['-c', '--connection', '--root', '--runroot', '--url', '--log-level'],
  kubectl: ['-n', '--namespace', '--context', '--kubeconfig', '--cluster', '--user', '-s', '--server'],
  npm: ['-w', '--workspace', '--prefix', '-C'],
  pnpm: ['-C', '--dir', '-F', '--filter', '-w'],
  yarn: ['--cwd'],
  cargo: ['-C', '--config', '-Z', '--color'],
  go: ['-C'],
  apt: ['-o', '-c', '-t'],
  'apt-get': ['-o', '-c', '-t'],
  systemctl: ['-H', '--host', '-M', '--machine', '-t', '--type', '-p', '--property'],
  gh: ['-R', '--repo'],
};
