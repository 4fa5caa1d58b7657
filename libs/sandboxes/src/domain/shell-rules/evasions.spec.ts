import { describe, expect, it } from 'vitest';
import { decide, shellRule } from './test-builders';

// Each line hides `rm` somewhere bash would run it; each must be forbidden by the
// rule that names rm, and never pass as a command no rule names.

const rm = shellRule('rm', 'forbidden', { justification: 'destructive', source: '.rules line 1' });
const rmRf = shellRule('rm -rf', 'forbidden', { source: '.rules line 2' });
const gitPush = shellRule('git push', 'prompt');

function expectForbiddenByRm(command: string): void {
  const decision = decide(command, [gitPush, rm]);
  expect(decision.decision, decision.reason).toBe('forbidden');
  expect(decision.rule).toBe(rm);
  expect(decision.command[0]).toMatch(/(^|\/)rm$/);
}

const EVASIONS: Record<string, readonly string[]> = {
  'pipelines and lists': [
    'ls | rm -rf /',
    'rm x |& cat',
    'true && rm x',
    'false || rm x',
    'echo hi; rm x',
    'echo hi & rm x',
    'echo hi\nrm x',
    'rm x &',
    '! rm x',
  ],
  'subshells and groups': ['(rm x)', '( (rm x) )', '{ rm x; }', '{ { rm x;}; }', 'if (rm x); then :; fi'],
  'command substitution': [
    'echo $(rm x)',
    'echo `rm x`',
    'echo `echo \\`rm x\\``',
    'echo "$(rm x)"',
    'x=$(rm x)',
    'export A=$(rm x)',
    'a[$(rm x)]=1',
    'echo hi > $(rm x)',
    'echo ${x:-$(rm x)}',
    'echo $(( $(rm x) + 1 ))',
    '(( $(rm x) ))',
    '[[ -n $(rm x) ]]',
    'case $(rm x) in *) ;; esac',
    'for i in $(rm x); do :; done',
    'echo $(echo $(echo $(rm x)))',
    'cat <<EOF\n$(rm x)\nEOF',
    'cat <<EOF\n`rm x`\nEOF',
  ],
  'process substitution': ['diff <(rm a) b', 'echo hi > >(rm x)', 'cat < <(rm x)', 'exec 3< <(rm x)', 'X=<(echo) rm x'],
  functions: [
    'f() { rm -rf /; }; f',
    'function f { rm x; }; f',
    'f() { rm x; }',
    'f() ( rm x ); f',
    'command_not_found_handle() { rm x; }; nope',
  ],
  aliases: ['alias x=rm; x -rf /', "alias x='rm -rf'; x /", 'alias a=b b=rm; a x', 'hash -p /bin/rm ls; ls'],
  'commands that run the command after them': [
    'command rm x',
    'command -p rm x',
    'builtin eval rm x',
    'exec rm x',
    'exec -a name rm x',
    'env rm x',
    'env -i A=1 B=2 rm x',
    'env -u HOME -C / -- rm x',
    "env -S'rm -rf' /",
    'nice rm x',
    'nice -n 5 rm x',
    'nice -10 rm x',
    'nice --adjustment=5 rm x',
    'nohup rm x',
    'time rm x',
    'time -p rm x',
    '/usr/bin/time -f %e -o out rm x',
    'timeout 5 rm x',
    'timeout -s KILL -k 1 5s rm x',
    'timeout --foreground 5 nice nohup rm x',
    'echo a | xargs rm',
    'xargs -0 -n1 -P4 rm < list',
    'xargs -I{} rm {} < list',
    'sudo rm x',
    'sudo -u root -E VAR=1 rm x',
    'sudo -hhost -- rm x',
    'doas -u root rm x',
    'stdbuf -oL rm x',
    'stdbuf -o L -e 0 rm x',
    'setsid -w rm x',
    'ionice -c 3 rm x',
    'taskset -c 0 rm x',
    'chroot / rm x',
    'unshare -r rm x',
    'strace -f -o /dev/null rm x',
    'flock /tmp/lock rm x',
    "flock /tmp/lock -c 'rm x'",
    "watch -n 1 'rm x'",
    "su -c 'rm x' root",
    'runuser -u root -- rm x',
    'busybox rm x',
    'find . -exec rm {} \\;',
    'find . -name a -execdir rm -f {} +',
    'find . -ok rm {} \\;',
    '\\sudo \\rm x',
    "'env' rm x",
    '/usr/bin/env rm x',
    'sudo sudo env nice rm x',
    'chrt 5 rm x',
    'chrt -o 0 rm x',
    'chrt --other rm x',
    'prlimit --nofile=10 rm x',
    'prlimit -n10 --cpu=5 -- rm x',
    'setpriv --nnp rm x',
    'setpriv --reuid 0 --init-groups rm x',
    'setarch x86_64 -R rm x',
    'setarch -R rm x',
    'linux32 rm x',
    'linux64 --addr-no-randomize rm x',
    'nsenter -t 1 -m rm x',
    'nsenter --mount=/proc/1/ns/mnt -S 0 rm x',
    'tini -- rm x',
    'tini -s -p SIGTERM rm x',
    'dumb-init rm x',
    'dumb-init -r 15:9 --single-child rm x',
    'fakeroot rm x',
    'fakeroot -u -- rm x',
    'ltrace -f -o out rm x',
    'strace -E A=1 rm x',
  ],
  'commands that start a shell when given none': [
    "setarch x86_64 <<< 'rm x'",
    "linux64 <<< 'rm x'",
    "unshare <<< 'rm x'",
    "nsenter -t 1 -a <<< 'rm x'",
    "fakeroot <<< 'rm x'",
    "script -q /dev/null <<< 'rm x'",
    "sg staff <<< 'rm x'",
  ],
  'code in strings': [
    "sh -c 'rm x'",
    'bash -c "rm x"',
    "bash -lc 'rm x'",
    "bash -o pipefail -c 'rm x'",
    "bash -c -- 'rm x'",
    "dash -ec 'rm x'",
    "zsh -c 'rm x'",
    "/bin/bash -c 'rm x'",
    'bash -c "sh -c \'rm x\'"',
    'sudo bash -c \'eval "rm x"\'',
    "eval 'rm x'",
    'eval rm x',
    "bash <<< 'rm x'",
    "bash <<'EOF'\nrm x\nEOF",
    'sh <<EOF\nrm x\nEOF',
    "bash -s <<< 'rm x'",
    "bash /dev/stdin <<< 'rm x'",
    "source /dev/stdin <<< 'rm x'",
    "trap 'rm x' EXIT",
    "trap -- 'rm x' INT TERM",
    'mapfile -C rm -c 1 < list',
    "let 'a[$(rm x)]=1'",
    "printf -v 'a[$(rm x)]' %s y",
    'xargs sh -c \'rm "$@"\' _ < list',
    "script -c 'rm x' /dev/null",
    "script -q out.log --command 'rm x'",
    'script -q /dev/null -- rm x',
    "sg staff -c 'rm x'",
    "sg - staff 'rm x'",
    "gdb -batch -ex 'shell rm x'",
    "gdb -batch -ex '!rm x'",
    "gdb -ex 'she rm x'",
    "gdb --eval-command='shell rm x'",
    "gdb -iex 'pipe info frame | rm x'",
    "gdb -batch -ex '|echo|rm x'",
    "gdb -batch -ex 'make; rm x'",
    'gdb -batch -ex run --args rm x',
    'gdb -batch -ex shell <<< "rm x"',
    "compgen -C 'rm x' w",
    "compgen -W '$(rm x)' w",
    'compgen -F rm w',
    "complete -C 'rm x' w",
  ],
  'exported functions': [
    "env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls",
    "env -i 'BASH_FUNC_f%%=() { rm x; }' bash -c f",
    "sudo 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls",
    "strace -E 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls",
    "env 'BASH_FUNC_ls()=() { rm x; }' bash -c ls",
  ],
  'code in text bash evaluates as a subscript or arithmetic': [
    'test -v "a[$(rm x)]"',
    "test -v 'a[$(rm x)]'",
    "[ -v 'a[$(rm x)]' ]",
    "[ ! -v 'a[`rm x`]' ]",
    "test -v x -a -v 'a[$(rm x)]'",
    "[[ -v 'a[$(rm x)]' ]]",
    "[[ ! -v 'a[$(rm x)]' ]]",
    "[[ 'a[$(rm x)]' -eq 1 ]]",
    "[[ 1 -lt 'a[`rm x`]' ]]",
    'test -v "a[\'\\$(rm x)\']"',
    'let "a[\'\\$(rm x)\']=1"',
    "test -v $'a[\\x24(rm x)]'",
    'test -v a\\[\\$\\(rm\\ x\\)\\]',
    "declare -n r='a[$(rm x)]'; echo $r",
    "declare -i n; n='a[$(rm x)]'",
    "n='a[$(rm x)]'; echo $((n))",
    "set -- 'a[$(rm x)]'; echo $(($1))",
    "read 'a[$(rm x)]' <<< x",
    "unset -v 'a[$(rm x)]'",
    "sleep 0 & wait -n -p 'a[$(rm x)]'",
    "(( 'a[$(rm x)]' ))",
    "(( '$(rm x)' ))",
    "echo $(( '$(rm x)' ))",
    "echo $(( 'a[`rm x`]' ))",
    "for (( i='a[$(rm x)]'; 0; )); do :; done",
    "a['$(rm x)']=1",
    "a=(['$(rm x)']=1)",
    "declare -a a=(['$(rm x)']=1)",
    "echo ${a['$(rm x)']}",
    ": ${a['$(rm x)']:=1}",
    "echo ${#a['$(rm x)']}",
    "echo ${a[@]:'$(rm x)'}",
    "echo ${a[0]:0:'a[$(rm x)]'}",
    "exec {a['$(rm x)']}>/dev/null",
    'bash -c "test -v \'a[\\$(rm x)]\'"',
  ],
  'quoting and escapes': [
    'r\\m x',
    "'r'm x",
    '"rm" x',
    "$'\\x72m' x",
    "$'\\162m' x",
    "$'\\u0072m' x",
    '"r"\'m\' x',
    'r\\\nm x',
    '$"rm" x',
    "''rm x",
  ],
  'assignments and redirections': [
    'FOO=1 rm x',
    'A=1 B=$(date) rm x',
    'rm x > /dev/null 2>&1',
    '2>&1 >/dev/null rm x',
    '<in rm x',
    'rm x <<EOF\nhi\nEOF',
    'rm x <<< hi',
  ],
  'compound commands': [
    'if rm x; then :; fi',
    'if true; then rm x; fi',
    'if false; then :; elif rm x; then :; fi',
    'if false; then :; else rm x; fi',
    'while rm x; do break; done',
    'until rm x; do break; done',
    'for i in 1 2; do rm $i; done',
    'for ((i=0; i<1; i++)); do rm x; done',
    'case a in a) rm x;; esac',
    'case a in (a) rm x;; esac',
    'select x in a; do rm x; done',
    'coproc rm x',
    'coproc C { rm x; }',
    'time (rm x)',
  ],
};

describe('every command bash would run is decided', () => {
  for (const [group, commands] of Object.entries(EVASIONS)) {
    describe(group, () => {
      it.each(commands)('%j is forbidden by the rm rule', expectForbiddenByRm);
    });
  }

  it('reads an alias value and the arguments after it together', () => {
    expect(decide('alias x=rm; x -rf /', [rmRf]).rule).toBe(rmRf);
    expect(decide('alias x=rm; x -f /', [rmRf]).decision).toBe('allow');
  });

  it('decides the wrapper itself too', () => {
    const sudo = shellRule('sudo', 'prompt');
    expect(decide('sudo ls', [sudo, rm])).toMatchObject({ decision: 'prompt', rule: sudo });
    expect(decide('sudo rm x', [sudo, rm])).toMatchObject({ decision: 'forbidden', rule: rm });
  });

  it('names the program that runs the command in the reason', () => {
    expect(decide("sudo bash -c 'rm x'", [rm]).reason).toBe(
      'rm x (run by sudo → bash -c): forbidden by rule "rm" (.rules line 1): destructive',
    );
  });
});

describe('what the analysis cannot know is decided by a person', () => {
  it.each([
    'echo ${!x}',
    'x=HOME; echo "${!x:-none}"',
    'echo ${!x[0]}',
    'echo ${!1}',
    "[[ -v 'a[${x@P}]' ]]",
    "test -v 'a[${!x}]'",
    "test -v 'a[$(rm x'",
    'env "BASH_FUNC_ls%%=() { $X; }" bash -c ls',
    "env 'BASH_FUNC_ls%%=() { rm x' bash -c ls",
    'gdb -ex "$CMD"',
  ])('%j is decided by a person', (command) => {
    expect(decide(command, [gitPush, rm])).toMatchObject({ decision: 'prompt', rule: null });
  });

  it.each([
    'wrap rm x',
    'wrap -q /usr/bin/rm x',
    './bin/launch --retries 3 rm -rf /',
    'catchsegv rm x',
    'sudo wrap rm x',
    'ssh host rm x',
    'docker run image rm x',
    'git bisect run rm x',
  ])(
    '%j, a program the analysis does not know given the name of a forbidden program, is decided by a person',
    (command) => {
      const decision = decide(command, [gitPush, rm]);
      expect(decision).toMatchObject({ decision: 'prompt', rule: rm });
      expect(decision.reason).toContain('is not a program this analysis knows');
    },
  );
});

describe('what bash would not run is not decided', () => {
  it.each([
    'echo rm -rf /',
    "echo '$(rm x)'",
    'echo "\\$(rm x)"',
    "cat <<'EOF'\n$(rm x)\nEOF",
    'cat <<"EOF"\n`rm x`\nEOF',
    '# rm -rf /',
    'echo hi # $(rm x)',
    'command -v rm',
    'rmdir x',
    'grep -r rm .',
    'bash script.sh',
    'timeout -s rm 5 ls',
    'env -u rm ls',
    'nice -n rm ls',
    'echo ${!prefix*} ${!a[@]} ${!#}',
    "echo '$(rm x)' '[ok]'",
    'git rm x',
    'git -C repo rm --cached x',
    'npm rm left-pad',
    'docker rm container',
    'ls -l /usr/bin/rm',
    'which rm',
    'type rm',
    'chrt -p 1',
    'setpriv --dump',
    'compgen -A command r',
    "gdb -batch -ex 'info functions' ./a.out",
    "env 'BASH_FUNC_ls%%=() { ls -l; }' bash -c ls",
  ])('%j is allowed', (command) => {
    expect(decide(command, [rm])).toMatchObject({ decision: 'allow', rule: null });
  });
});
