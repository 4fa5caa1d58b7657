import { gdbCommands } from './gdb-commands';
import { SHELL_READING_INPUT, type InnerCommand, type Invocation } from './inner-command';
import { INERT_PROGRAMS, SUBCOMMAND_PROGRAMS } from './known-programs';
import { readOptions, type OptionGrammar, type OptionReading } from './option-scan';
import {
  ARGV_RUNNERS,
  COMPLETION_GRAMMAR,
  MAPFILE_GRAMMAR,
  MULTI_CALL,
  PERSONALITIES,
  PERSONALITY_GRAMMAR,
  SCRIPT_GRAMMAR,
  SHELL_WITHOUT_COMMAND,
  SHELLS,
  STDIN_PATHS,
  SU_GRAMMAR,
} from './runner-grammars';
import { basename, dynamicWord, renderWords, shellQuote, staticValue, staticWord, type ShellWord } from './shell-word';
import { splitShellWords } from './shlex';

export type { InnerCommand, Invocation } from './inner-command';

const STDIN_ARGUMENTS = dynamicWord('(arguments from standard input)');

type Reader = (args: readonly ShellWord[], invocation: Invocation, name: string) => InnerCommand[];

/** Programs and builtins read by rules of their own; ARGV_RUNNERS, SHELLS and MULTI_CALL are read in innerCommands. */
const READERS: Readonly<Record<string, Reader>> = {
  eval: (args) => (args.length ? [{ kind: 'code', code: joined(args), via: 'eval' }] : []),
  alias: aliases,
  trap: trapAction,
  source: (args, { stdin }) => sourced(args, stdin),
  '.': (args, { stdin }) => sourced(args, stdin),
  hash: hashedPaths,
  mapfile: (args, _, name) => optionCode(args, MAPFILE_GRAMMAR, ['C'], name),
  readarray: (args, _, name) => optionCode(args, MAPFILE_GRAMMAR, ['C'], name),
  su: (args) => optionCode(args, SU_GRAMMAR, ['c', 'command', 'session-command'], 'su -c'),
  runuser: (args) => [
    ...optionCode(args, SU_GRAMMAR, ['c', 'command', 'session-command'], 'runuser -c'),
    ...runners('runuser', args),
  ],
  find: findExec,
  compgen: completion,
  complete: completion,
  script: scriptCommands,
  sg: switchGroup,
  // setarch ARCH [options] [program]: the architecture comes before the options
  setarch: (args) =>
    runners('setarch', staticValue(args[0])?.startsWith('-') === false ? args.slice(1) : args, PERSONALITY_GRAMMAR),
  gdb: gdbCommands,
};

export function innerCommands(invocation: Invocation): InnerCommand[] {
  const [program, ...args] = invocation.words;
  if (program?.kind !== 'static') return [];
  const name = basename(program.value);
  return [...exportedFunctions(args), ...programCommands(name, args, invocation)];
}

function programCommands(name: string, args: readonly ShellWord[], invocation: Invocation): InnerCommand[] {
  if (Object.hasOwn(READERS, name)) return READERS[name]!(args, invocation, name);
  if (SHELLS.has(name)) return shellCode(name, args, invocation.stdin);
  if (MULTI_CALL.has(name))
    return args.length && !staticValue(args[0])?.startsWith('-') ? [{ kind: 'argv', words: args, via: name }] : [];
  if (PERSONALITIES.has(name)) return runners(name, args, PERSONALITY_GRAMMAR);
  return Object.hasOwn(ARGV_RUNNERS, name) ? runners(name, args, ARGV_RUNNERS[name]!) : [];
}

/** Whether the analysis knows what the program runs: it reads it as a runner, or it runs none of its arguments. */
export function knowsProgram(name: string): boolean {
  return (
    Object.hasOwn(READERS, name) ||
    Object.hasOwn(ARGV_RUNNERS, name) ||
    SHELLS.has(name) ||
    MULTI_CALL.has(name) ||
    PERSONALITIES.has(name) ||
    INERT_PROGRAMS.has(name)
  );
}

/**
 * The positions in an argv of the arguments that may name a program it runs,
 * when the analysis does not know the program: every static operand but a
 * subcommand's name. None for a program it knows.
 */
export function possibleProgramArguments(words: readonly ShellWord[]): number[] {
  const program = staticValue(words[0]);
  const name = program === null ? null : basename(program);
  if (name === null || knowsProgram(name)) return [];
  const subcommand = Object.hasOwn(SUBCOMMAND_PROGRAMS, name) ? subcommandAt(words, SUBCOMMAND_PROGRAMS[name]!) : -1;
  return words.flatMap((word, index) =>
    index > 0 && index !== subcommand && word.kind === 'static' && word.value && !word.value.startsWith('-')
      ? [index]
      : [],
  );
}

function subcommandAt(words: readonly ShellWord[], valued: readonly string[]): number {
  for (let index = 1; index < words.length; index++) {
    const value = staticValue(words[index]);
    // past a word known only at run time, where the subcommand is cannot be told
    if (value === null) return -1;
    if (!value.startsWith('-')) return index;
    if (valued.includes(value)) index++;
  }
  return -1;
}

/**
 * `BASH_FUNC_NAME%%=() { …; }` in the environment of a bash makes it define
 * NAME (`env 'BASH_FUNC_ls%%=…' bash -c ls`): read wherever it is written as
 * that definition, whose body is decided as any function's is.
 */
function exportedFunctions(args: readonly ShellWord[]): InnerCommand[] {
  return args.flatMap((arg): InnerCommand[] => {
    if (arg.kind === 'dynamic')
      return arg.text.includes('BASH_FUNC_') ? [{ kind: 'code', code: arg, via: 'exported function' }] : [];
    const start = arg.value.indexOf('BASH_FUNC_');
    const equals = start < 0 ? -1 : arg.value.indexOf('=', start);
    if (equals < 0) return [];
    const name = arg.value.slice(start + 'BASH_FUNC_'.length, equals).replace(/(%%|\(\))$/, '');
    // a definition that does not parse is decided as unknown code
    return [
      { kind: 'code', code: staticWord(`${name} ${arg.value.slice(equals + 1)}`), via: `exported function ${name}` },
    ];
  });
}

function runners(
  name: string,
  args: readonly ShellWord[],
  grammar: OptionGrammar = ARGV_RUNNERS[name]!,
): InnerCommand[] {
  return readOptions(args, grammar).flatMap((reading) => runnerCommands(name, args, reading));
}

function runnerCommands(name: string, args: readonly ShellWord[], reading: OptionReading): InnerCommand[] {
  const rest = args.slice(reading.start);
  const option = (...names: string[]) => reading.options.find(([key]) => names.includes(key));
  if (name === 'env') {
    const split = option('S', 'split-string');
    // env -S splits one string into the words that follow; they are read as env's own again
    if (split)
      return [{ kind: 'argv', words: [staticWord('env'), ...splitArgument(split[1]), ...rest], via: 'env -S' }];
  }
  if (name === 'xargs') return [{ kind: 'argv', words: xargsCommand(rest, reading), via: 'xargs' }];
  if (name === 'flock' && ['-c', '--command'].includes(staticValue(rest[0]) ?? '')) {
    return rest[1] ? [{ kind: 'code', code: rest[1], via: 'flock -c' }] : [];
  }
  if (name === 'watch' && !option('x', 'exec'))
    return rest.length ? [{ kind: 'code', code: joined(rest), via: 'watch' }] : [];
  if (rest.length) return [{ kind: 'argv', words: rest, via: name }];
  return SHELL_WITHOUT_COMMAND.has(name) ? [{ kind: 'argv', words: [SHELL_READING_INPUT], via: name }] : [];
}

/** The words xargs runs: its command (echo by default), with arguments it reads at run time. */
function xargsCommand(rest: readonly ShellWord[], reading: OptionReading): ShellWord[] {
  const replace = reading.options.find(([key]) => ['I', 'i', 'replace'].includes(key));
  const command = rest.length ? rest : [staticWord('echo')];
  if (!replace) return [...command, STDIN_ARGUMENTS];
  const marker = replace[1]?.kind === 'static' ? replace[1].value : '{}';
  return command.map((word) =>
    word.kind === 'static' && marker && word.value.includes(marker) ? dynamicWord(word.value) : word,
  );
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
    if (arg.startsWith('--command='))
      return [{ kind: 'code', code: staticWord(arg.slice('--command='.length)), via: `${name} -c` }];
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
  return names.flatMap((name): InnerCommand[] =>
    name.kind === 'static'
      ? [{ kind: 'alias', name: name.value, value: staticWord(shellQuote(path.value)), via: `hash -p ${name.value}` }]
      : [],
  );
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
  return file && STDIN_PATHS.has(file.value) && stdin
    ? [{ kind: 'code', code: stdin, via: 'source reading standard input' }]
    : [];
}

function optionCode(args: readonly ShellWord[], grammar: OptionGrammar, names: string[], via: string): InnerCommand[] {
  return readOptions(args, grammar).flatMap((reading) =>
    reading.options
      .filter(([key, value]) => names.includes(key) && value)
      .map(([, value]): InnerCommand => ({ kind: 'code', code: value!, via })),
  );
}

/** compgen and complete: `-C` runs code, `-F` calls a function, `-W` expands its word list as the shell expands words. */
function completion(args: readonly ShellWord[], _: Invocation, name: string): InnerCommand[] {
  return readOptions(args, COMPLETION_GRAMMAR).flatMap((reading) =>
    reading.options.flatMap(([key, value]): InnerCommand[] => {
      if (!value) return [];
      if (key === 'C') return [{ kind: 'code', code: value, via: `${name} -C` }];
      if (key === 'F') return [{ kind: 'argv', words: [value], via: `${name} -F` }];
      if (key === 'W')
        return [
          { kind: 'code', code: value.kind === 'static' ? staticWord(`: ${value.value}`) : value, via: `${name} -W` },
        ];
      return [];
    }),
  );
}

/** script: `-c` runs a string of code, `--` the argv after it (newer releases), and neither a shell on its input. */
function scriptCommands(args: readonly ShellWord[]): InnerCommand[] {
  // a word known only at run time may be -c and its code
  const unknown = args.flatMap((arg): InnerCommand[] =>
    arg.kind === 'dynamic' ? [{ kind: 'code', code: arg, via: 'script' }] : [],
  );
  const code = optionCode(args, SCRIPT_GRAMMAR, ['c', 'command'], 'script -c');
  const end = args.findIndex((arg) => staticValue(arg) === '--');
  const argv: InnerCommand[] =
    end >= 0 && end + 1 < args.length ? [{ kind: 'argv', words: args.slice(end + 1), via: 'script' }] : [];
  if (unknown.length || code.length || argv.length) return [...unknown, ...code, ...argv];
  return readOptions(args, SCRIPT_GRAMMAR).length
    ? [{ kind: 'argv', words: [SHELL_READING_INPUT], via: 'script' }]
    : [];
}

/** `sg [-] GROUP [[-c] COMMAND]`: the command is one string of code; without it, a shell. */
function switchGroup(args: readonly ShellWord[]): InnerCommand[] {
  let index = staticValue(args[0]) === '-' ? 1 : 0;
  if (!args[index]) return [];
  index++;
  if (staticValue(args[index]) === '-c') index++;
  const command = args[index];
  return [
    command ? { kind: 'code', code: command, via: 'sg' } : { kind: 'argv', words: [SHELL_READING_INPUT], via: 'sg' },
  ];
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
