import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decide, shellRule } from './test-builders';

// Real bash is the oracle: each line below really runs the program `danger` (a
// probe script that only records that it ran), and the analysis must decide it by the
// rule that forbids danger. A line that stopped running danger would fail here
// rather than pass without proving anything.

const danger = shellRule('danger', 'forbidden');

const RUN_STATICALLY = [
  'danger',
  'echo a | danger',
  'true && danger',
  '(danger)',
  '{ danger; }',
  'echo $(danger)',
  'echo `danger`',
  'cat <(danger)',
  'f() { danger; }; f',
  'command danger',
  'builtin eval danger',
  'exec danger',
  'env A=1 danger',
  'env -u HOME -- danger',
  "env -S'danger x'",
  'nice -n 5 danger',
  'nice -5 danger',
  'nohup danger',
  'time -p danger',
  'timeout -s KILL 5 danger',
  'echo a | xargs -n1 danger',
  'echo a | xargs -I{} danger {}',
  'stdbuf -oL danger',
  'setsid -w danger',
  'ionice -c 3 danger',
  'taskset 1 danger',
  'flock ./lock danger',
  'flock ./lock -c danger',
  'find . -maxdepth 0 -exec danger {} \\;',
  'find . -maxdepth 0 -exec danger {} +',
  'sh -c danger',
  "bash -o pipefail -c 'danger'",
  'sh -c \'bash -c "eval danger"\'',
  "eval 'danger x'",
  'bash <<< danger',
  "bash <<'EOF'\ndanger\nEOF",
  'bash /dev/stdin <<< danger',
  'trap danger EXIT',
  'mapfile -C danger -c 1 <<< x',
  "let 'a[$(danger)]=1'",
  "printf -v 'a[$(danger)]' x",
  'X=<(echo) danger',
  'd\\anger',
  "d'an'ger",
  '"danger"',
  "$'\\x64anger'",
  'dan\\\nger',
  'FOO=1 danger 2>&1 >/dev/null',
  'cat <<EOF\n$(danger)\nEOF',
  'if false; then :; elif danger; then :; fi',
  'for i in 1; do danger; done',
  'case a in a) danger;; esac',
  'x=$(danger)',
  'echo ${x:-$(danger)}',
  '[[ $(danger) ]]',
  'echo $(( $(danger) + 1 ))',
  'coproc danger; wait',
  "test -v 'a[$(danger)]'",
  "[ -v 'a[`danger`]' ]",
  "[[ -v 'a[$(danger)]' ]]",
  "[[ 'a[$(danger)]' -eq 1 ]]",
  'test -v "a[\'\\$(danger)\']"',
  "(( '$(danger)' ))",
  "a['$(danger)']=1",
  "a=(['$(danger)']=1)",
  "x=1; echo ${x['$(danger)']}",
  "declare -n r='a[$(danger)]'; echo $r",
  "n='a[$(danger)]'; echo $((n))",
  'compgen -C danger x',
  "compgen -W '$(danger)' x",
  "env 'BASH_FUNC_ls%%=() { danger; }' bash -c ls",
  'chrt -o 0 danger',
  'prlimit --nofile=100 danger',
  'prlimit -n100 danger',
  'setpriv --nnp danger',
  'nsenter danger',
  'setarch x86_64 -R danger',
  'setarch -R danger',
  'linux64 danger',
  'linux32 --addr-no-randomize danger',
  'prlimit -n100 -- danger',
  'script -qc danger /dev/null',
  'script -q /dev/null -c danger',
  'script -q /dev/null <<< danger',
  // these start a login shell, which sets PATH again
  'setarch x86_64 <<< ../bin/danger',
  'unshare <<< ../bin/danger',
  'nsenter <<< ../bin/danger',
  // the value is written on the line, so it is read as a subscript where it is written
  "x='a[$(danger)]'; echo ${!x}",
];

const RUN_AT_RUN_TIME = [
  'x=$(printf "a[%s(danger)]" "\\$"); echo ${!x}',
  'wrap danger',
  'wrap -q ./../bin/danger',
  '$(echo danger)',
  'r=danger; $r',
  '${X:-danger}',
  'd{anger,}',
  'set -- danger; "$@"',
  'echo danger | bash',
  'source <(echo danger)',
  'x=\'$(danger)\'; echo "${x@P}"',
  'eval "$(echo danger)"',
  'hash -p "$PWD/../bin/danger" ls; ls',
];

describe('bash runs it, and the rule that forbids it decides', () => {
  let root = '';
  const ranDanger = (command: string): boolean => {
    const log = join(root, 'log');
    rmSync(log, { force: true });
    spawnSync('bash', ['-c', command], {
      cwd: join(root, 'work'),
      env: { PATH: `${join(root, 'bin')}:/usr/bin:/bin`, DANGER_LOG: log, HOME: root },
      input: '',
      timeout: 5_000,
    });
    return existsSync(log);
  };

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'shell-rules-'));
    mkdirSync(join(root, 'bin'));
    mkdirSync(join(root, 'work'));
    writeFileSync(join(root, 'bin', 'danger'), '#!/bin/sh\necho "$0 $*" >> "$DANGER_LOG"\n');
    chmodSync(join(root, 'bin', 'danger'), 0o755);
    // a wrapper the analysis has never heard of, as a new tool would be
    writeFileSync(join(root, 'bin', 'wrap'), '#!/bin/sh\n[ "$1" = -q ] && shift\nexec "$@"\n');
    chmodSync(join(root, 'bin', 'wrap'), 0o755);
  });

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it.each(RUN_STATICALLY)('%j is forbidden', (command) => {
    expect(ranDanger(command)).toBe(true);
    expect(decide(command, [danger])).toMatchObject({ decision: 'forbidden', rule: danger });
  });

  it.each(RUN_AT_RUN_TIME)('%j, known only at run time, is decided by a person', (command) => {
    expect(ranDanger(command)).toBe(true);
    expect(decide(command, [danger]).decision).toBe('prompt');
  });
});
