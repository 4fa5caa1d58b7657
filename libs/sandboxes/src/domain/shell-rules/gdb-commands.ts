import type { InnerCommand } from './inner-command';
import { SHELL_READING_INPUT } from './inner-command';
import { staticWord, type ShellWord } from './shell-word';

// gdb runs a shell for some of its own commands (`shell`, `!`, `pipe`, `make`),
// given with -ex and its kin, and runs the program named after --args (or as its
// first operand) when told to. Its other commands (python, call, define …) are a
// language of their own, as `python -c` is: the sandbox bounds them.

const COMMAND_OPTIONS: ReadonlySet<string> = new Set(['ex', 'eval-command', 'iex', 'init-eval-command']);
const VALUED_OPTIONS: ReadonlySet<string> = new Set([
  'x',
  'command',
  'ix',
  'init-command',
  'p',
  'pid',
  'c',
  'core',
  's',
  'symbols',
  'e',
  'exec',
  'se',
  'd',
  'directory',
  'cd',
  'data-directory',
  'D',
  'tty',
  't',
  'i',
  'interpreter',
  'b',
  'l',
]);

export function gdbCommands(args: readonly ShellWord[]): InnerCommand[] {
  const commands: InnerCommand[] = [];
  let program = false;
  for (let index = 0; index < args.length; index++) {
    const word = args[index]!;
    // a word known only at run time may be -ex and a command as well as anything else
    if (word.kind === 'dynamic') {
      commands.push({ kind: 'code', code: word, via: 'gdb' });
      continue;
    }
    if (!word.value.startsWith('-') || word.value === '-') {
      // gdb [options] PROGRAM [CORE | PID]: the program runs on `run`
      if (!program) commands.push({ kind: 'argv', words: [word], via: 'gdb' });
      program = true;
      continue;
    }
    // getopt_long_only: -ex and --ex are one option, and a value may follow `=`
    const option = word.value.replace(/^--?/, '');
    const equals = option.indexOf('=');
    const name = equals < 0 ? option : option.slice(0, equals);
    const attached = equals < 0 ? null : staticWord(option.slice(equals + 1));
    if (name === 'args') {
      const argv = args.slice(index + 1);
      if (argv.length) commands.push({ kind: 'argv', words: argv, via: 'gdb --args' });
      break;
    }
    if (COMMAND_OPTIONS.has(name)) {
      const command = attached ?? args[++index];
      if (command) commands.push(...gdbCommand(command));
    } else if (VALUED_OPTIONS.has(name) && !attached) {
      index++;
    }
  }
  return commands;
}

/** One gdb command line: what it hands to a shell. */
function gdbCommand(command: ShellWord): InnerCommand[] {
  if (command.kind === 'dynamic') return [{ kind: 'code', code: command, via: 'gdb -ex' }];
  const text = command.value.trimStart();
  if (text.startsWith('!')) return shell(text.slice(1));
  if (text.startsWith('|')) return piped(text.slice(1));
  const [, name = '', rest = ''] = /^([A-Za-z-]+)\s*([^]*)$/.exec(text) ?? [];
  // gdb accepts any unambiguous prefix of a command's name
  if (name.length >= 2 && 'shell'.startsWith(name)) return shell(rest);
  if (name.length >= 3 && 'pipe'.startsWith(name)) return piped(rest);
  if (name.length >= 3 && 'make'.startsWith(name))
    return [{ kind: 'code', code: staticWord(`make ${rest}`), via: 'gdb make' }];
  return [];
}

function shell(code: string): InnerCommand[] {
  // `shell` alone starts an interactive shell on gdb's standard input
  if (!code.trim()) return [{ kind: 'argv', words: [SHELL_READING_INPUT], via: 'gdb shell' }];
  return [{ kind: 'code', code: staticWord(code), via: 'gdb shell' }];
}

/** `pipe [-d DELIM] COMMAND DELIM SHELL_COMMAND`, `| COMMAND | SHELL_COMMAND`. */
function piped(rest: string): InnerCommand[] {
  const custom = /^\s*-d\s+(\S+)\s*([^]*)$/.exec(rest);
  const delimiter = custom ? custom[1]! : '|';
  const body = custom ? custom[2]! : rest;
  const at = body.indexOf(delimiter);
  const code = at < 0 ? '' : body.slice(at + delimiter.length);
  return code.trim() ? shell(code) : [];
}
