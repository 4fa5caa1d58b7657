import { readOptions, type OptionReading } from './option-scan';
import { ARGV_RUNNERS, MAPFILE_GRAMMAR, MULTI_CALL, SHELLS, STDIN_PATHS, SU_GRAMMAR } from './runner-grammars';
import { basename, dynamicWord, renderWords, shellQuote, staticValue, staticWord, type ShellWord } from './shell-word';
import { splitShellWords } from './shlex';

/** A simple command as the shell will run it, and what its standard input holds. */
export interface Invocation {
  readonly words: readonly ShellWord[];
  /** a here-string or here-document, input only known at run time, or null when it is a file */
  readonly stdin: ShellWord | null;
}

/** What a command runs besides itself: another argv, a string of shell code, or an alias it defines. */
export type InnerCommand =
  | { readonly kind: 'argv'; readonly words: readonly ShellWord[]; readonly via: string }
  | { readonly kind: 'code'; readonly code: ShellWord; readonly via: string }
  | { readonly kind: 'alias'; readonly name: string; readonly value: ShellWord; readonly via: string };

const STDIN_ARGUMENTS = dynamicWord('(arguments from standard input)');

export function innerCommands(invocation: Invocation): InnerCommand[] {
  const [program, ...args] = invocation.words;
  if (program?.kind !== 'static') return [];
  const name = basename(program.value);
  if (name === 'eval') return args.length ? [{ kind: 'code', code: joined(args), via: 'eval' }] : [];
  if (name === 'alias') return aliases(args);
  if (name === 'trap') return trapAction(args);
  if (name === 'source' || name === '.') return sourced(args, invocation.stdin);
  if (name === 'hash') return hashedPaths(args);
  if (name === 'mapfile' || name === 'readarray') return optionCode(args, MAPFILE_GRAMMAR, ['C'], name);
  if (name === 'su' || name === 'runuser') {
    const code = optionCode(args, SU_GRAMMAR, ['c', 'command', 'session-command'], `${name} -c`);
    return name === 'su' ? code : [...code, ...runners(name, args)];
  }
  if (name === 'find') return findExec(args);
  if (SHELLS.has(name)) return shellCode(name, args, invocation.stdin);
  if (MULTI_CALL.has(name)) return args.length && !staticValue(args[0])?.startsWith('-') ? [{ kind: 'argv', words: args, via: name }] : [];
  return runners(name, args);
}

function runners(name: string, args: readonly ShellWord[]): InnerCommand[] {
  const grammar = ARGV_RUNNERS[name];
  return grammar ? readOptions(args, grammar).flatMap((reading) => runnerCommands(name, args, reading)) : [];
}

function runnerCommands(name: string, args: readonly ShellWord[], reading: OptionReading): InnerCommand[] {
  const rest = args.slice(reading.start);
  const option = (...names: string[]) => reading.options.find(([key]) => names.includes(key));
  if (name === 'env') {
    const split = option('S', 'split-string');
    // env -S splits one string into the words that follow; they are read as env's own again
    if (split) return [{ kind: 'argv', words: [staticWord('env'), ...splitArgument(split[1]), ...rest], via: 'env -S' }];
  }
  if (name === 'xargs') return [{ kind: 'argv', words: xargsCommand(rest, reading), via: 'xargs' }];
  if (name === 'flock' && ['-c', '--command'].includes(staticValue(rest[0]) ?? '')) {
    return rest[1] ? [{ kind: 'code', code: rest[1], via: 'flock -c' }] : [];
  }
  if (name === 'watch' && !option('x', 'exec')) return rest.length ? [{ kind: 'code', code: joined(rest), via: 'watch' }] : [];
  return rest.length ? [{ kind: 'argv', words: rest, via: name }] : [];
}

/** The words xargs runs: its command (echo by default), with arguments it reads at run time. */
function xargsCommand(rest: readonly ShellWord[], reading: OptionReading): ShellWord[] {
  const replace = reading.options.find(([key]) => ['I', 'i', 'replace'].includes(key));
  const command = rest.length ? rest : [staticWord('echo')];
  if (!replace) return [...command, STDIN_ARGUMENTS];
  const marker = replace[1]?.kind === 'static' ? replace[1].value : '{}';
  return command.map((word) => (word.kind === 'static' && marker && word.value.includes(marker) ? dynamicWord(word.value) : word));
}

function splitArgument(value: ShellWord | null): ShellWord[] {
  if (!value) return [];
  const words = value.kind === 'static' && !value.value.includes('$') ? splitShellWords(value.value) : null;
  return words ? words.map(staticWord) : [dynamicWord(value.kind === 'static' ? value.value : value.text)];
}

/** `bash -c CODE`, `bash` reading standard input; `bash FILE` runs a script, which the sandbox bounds. */
function shellCode(name: string, args: readonly ShellWord[], stdin: ShellWord | null): InnerCommand[] {
  let command = false;
  let fromStdin = false;
  let index = 0;
  for (; index < args.length; index++) {
    const word = args[index]!;
    if (word.kind === 'dynamic') return [{ kind: 'code', code: word, via: name }];
    const arg = word.value;
    if (arg === '--' || arg === '-') {
      index++;
      break;
    }
    if (arg.startsWith('--command=')) return [{ kind: 'code', code: staticWord(arg.slice('--command='.length)), via: `${name} -c` }];
    if (arg === '--command') {
      command = true;
      index++;
      break;
    }
    if (arg.startsWith('--')) {
      if (['--rcfile', '--init-file'].includes(arg)) index++;
      continue;
    }
    if (!/^[-+]./.test(arg)) break;
    if (arg.startsWith('-') && arg.includes('c')) command = true;
    if (arg.startsWith('-') && arg.includes('s')) fromStdin = true;
    // -o OPTION and -O SHOPT take the next word
    index += [...arg.slice(1)].filter((letter) => letter === 'o' || letter === 'O').length;
  }
  if (command) return args[index] ? [{ kind: 'code', code: args[index]!, via: `${name} -c` }] : [];
  if (index < args.length && !fromStdin && !STDIN_PATHS.has(staticValue(args[index]) ?? '')) return [];
  return stdin ? [{ kind: 'code', code: stdin, via: `${name} reading standard input` }] : [];
}

function aliases(args: readonly ShellWord[]): InnerCommand[] {
  return args.flatMap((arg): InnerCommand[] => {
    if (arg.kind === 'dynamic') return [{ kind: 'code', code: arg, via: 'alias' }];
    const equals = arg.value.indexOf('=');
    if (equals <= 0) return [];
    const name = arg.value.slice(0, equals);
    return [{ kind: 'alias', name, value: staticWord(arg.value.slice(equals + 1)), via: `alias ${name}` }];
  });
}

/** `hash -p PATH NAME` makes NAME run PATH: read like an alias. */
function hashedPaths(args: readonly ShellWord[]): InnerCommand[] {
  const at = args.findIndex((arg) => staticValue(arg)?.startsWith('-') && staticValue(arg)!.includes('p'));
  const [path, ...names] = at < 0 ? [] : args.slice(at + 1);
  if (!path) return [];
  if (path.kind === 'dynamic') return [{ kind: 'code', code: path, via: 'hash -p' }];
  return names.flatMap((name): InnerCommand[] => (name.kind === 'static' ? [{ kind: 'alias', name: name.value, value: staticWord(shellQuote(path.value)), via: `hash -p ${name.value}` }] : []));
}

/** `trap ACTION SIGNAL…`: the action is shell code run later in the same shell. */
function trapAction(args: readonly ShellWord[]): InnerCommand[] {
  const first = staticValue(args[0]);
  if (first !== null && /^-[lp]+$/.test(first)) return [];
  const index = first === '--' ? 1 : 0;
  const action = args[index];
  // one word is a signal whose trap is reset; `-` and '' reset or ignore
  if (!action || args.length - index < 2 || ['-', ''].includes(staticValue(action) ?? 'dynamic')) return [];
  return [{ kind: 'code', code: action, via: 'trap' }];
}

/** A script file runs code the sandbox bounds; one only known at run time (`source <(…)`) is unknown code. */
function sourced(args: readonly ShellWord[], stdin: ShellWord | null): InnerCommand[] {
  const file = staticValue(args[0]) === '--' ? args[1] : args[0];
  if (file?.kind === 'dynamic') return [{ kind: 'code', code: file, via: 'source' }];
  return file && STDIN_PATHS.has(file.value) && stdin ? [{ kind: 'code', code: stdin, via: 'source reading standard input' }] : [];
}

function optionCode(args: readonly ShellWord[], grammar: Parameters<typeof readOptions>[1], names: string[], via: string): InnerCommand[] {
  return readOptions(args, grammar).flatMap((reading) =>
    reading.options.filter(([key, value]) => names.includes(key) && value).map(([, value]): InnerCommand => ({ kind: 'code', code: value!, via })),
  );
}

/** `find … -exec COMMAND… ;` (and -execdir, -ok, -okdir): `{}` is a file name found at run time. */
function findExec(args: readonly ShellWord[]): InnerCommand[] {
  const commands: InnerCommand[] = [];
  for (let index = 0; index < args.length; index++) {
    const word = args[index]!;
    if (word.kind !== 'static' || !['-exec', '-execdir', '-ok', '-okdir'].includes(word.value)) continue;
    const command: ShellWord[] = [];
    for (index++; index < args.length; index++) {
      const value = staticValue(args[index]);
      // `+` ends the command only right after `{}`
      if (value === ';' || (value === '+' && staticValue(args[index - 1]) === '{}')) break;
      command.push(value !== null && value.includes('{}') ? dynamicWord(value) : args[index]!);
    }
    if (command.length) commands.push({ kind: 'argv', words: command, via: `find ${word.value}` });
  }
  return commands;
}

/** Arguments an eval-like builtin joins with spaces into one string of code. */
function joined(args: readonly ShellWord[]): ShellWord {
  const text = renderWords(args).join(' ');
  return args.every((arg) => arg.kind === 'static') ? staticWord(text) : dynamicWord(text);
}
