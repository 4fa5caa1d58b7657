import type { ShellWord } from './shell-word';

/** How a program that runs another reads its own options (getopt style). */
export interface OptionGrammar {
  /** short options that take a value, attached (`-n5`) or as the next word */
  readonly valued?: string;
  /** short options whose value can only be attached (xargs `-i{}`) */
  readonly attachedOnly?: string;
  readonly flags?: string;
  readonly longValued?: readonly string[];
  readonly longFlags?: readonly string[];
  /** options after which the program runs nothing (`command -v`, `taskset -p`) */
  readonly noCommand?: string;
  readonly longNoCommand?: readonly string[];
  /** nice's `-10` */
  readonly numericFlags?: boolean;
  /** VAR=value words before the command (env, sudo) */
  readonly assignments?: boolean;
  /** operands before the command (timeout's duration, taskset's mask) */
  readonly operands?: number;
  /** the operands may be left out (chrt's priority in newer releases): each count is read */
  readonly optionalOperands?: boolean;
  /** options may follow operands and nothing is a command (su) */
  readonly permute?: boolean;
}

export interface OptionReading {
  /** index of the first word of the command run, or args.length when there is none */
  readonly start: number;
  /** options seen, by letter or long name; a value-less option has null */
  readonly options: readonly (readonly [string, ShellWord | null])[];
}

// An unknown option may or may not take a value; both readings are kept (at most
// this many unknowns are split), so a guess never hides the command run.
const UNKNOWN_SPLITS = 3;
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;

/** Every way the arguments can be read; a reading that runs nothing is left out. */
export function readOptions(args: readonly ShellWord[], grammar: OptionGrammar): OptionReading[] {
  const readings: OptionReading[] = [];
  scan(args, grammar, { index: 0, splits: UNKNOWN_SPLITS, options: [] }, readings);
  return readings.sort((a, b) => a.start - b.start);
}

interface ScanState {
  index: number;
  splits: number;
  options: (readonly [string, ShellWord | null])[];
}

function scan(args: readonly ShellWord[], grammar: OptionGrammar, state: ScanState, readings: OptionReading[]): void {
  const operands = grammar.operands ?? 0;
  const done = (start: number): void => {
    readings.push({ start, options: state.options });
  };
  // the command follows the operands, or, when they may be left out, any fewer of them
  const afterOperands = (first: number): void => {
    const fewest = grammar.optionalOperands ? 0 : operands;
    for (let count = operands; count >= fewest; count--) done(Math.min(first + count, args.length));
  };
  while (state.index < args.length) {
    const word = args[state.index]!;
    // a word known only at run time may be an option or the command: the command is what matters
    if (word.kind === 'dynamic') return done(state.index);
    const arg = word.value;
    if (arg === '--') return grammar.permute ? done(args.length) : afterOperands(state.index + 1);
    if (grammar.assignments && ASSIGNMENT.test(arg)) {
      state.index++;
    } else if (arg.startsWith('--')) {
      if (!longOption(args, grammar, state, arg.slice(2), readings)) return;
    } else if (arg.startsWith('-') && arg.length > 1) {
      if (!shortOptions(args, grammar, state, arg, readings)) return;
    } else if (grammar.permute) {
      state.index++;
    } else {
      // options end at the first operand (getopt's "+"): the command follows the operands
      return afterOperands(state.index);
    }
  }
  done(Math.min(state.index, args.length));
}

/** false when this reading stops here (an option that runs nothing) */
function longOption(
  args: readonly ShellWord[],
  grammar: OptionGrammar,
  state: ScanState,
  option: string,
  readings: OptionReading[],
): boolean {
  const equals = option.indexOf('=');
  const name = equals < 0 ? option : option.slice(0, equals);
  if (grammar.longNoCommand?.includes(name)) return false;
  if (equals >= 0) {
    state.options = [...state.options, [name, { kind: 'static', value: option.slice(equals + 1) }]];
    state.index++;
  } else if (grammar.longValued?.includes(name)) {
    state.options = [...state.options, [name, args[state.index + 1] ?? null]];
    state.index += 2;
  } else if (grammar.longFlags?.includes(name)) {
    state.options = [...state.options, [name, null]];
    state.index++;
  } else {
    splitUnknown(args, grammar, state, name, state.index + 2, args[state.index + 1] ?? null, readings);
    state.index++;
  }
  return true;
}

function shortOptions(
  args: readonly ShellWord[],
  grammar: OptionGrammar,
  state: ScanState,
  arg: string,
  readings: OptionReading[],
): boolean {
  if (grammar.numericFlags && /^-\d+$/.test(arg)) {
    state.index++;
    return true;
  }
  for (let at = 1; at < arg.length; at++) {
    const letter = arg[at]!;
    const attached = arg.slice(at + 1);
    if (grammar.noCommand?.includes(letter)) return false;
    if (grammar.valued?.includes(letter)) {
      const value = attached ? { kind: 'static' as const, value: attached } : (args[state.index + 1] ?? null);
      state.options = [...state.options, [letter, value]];
      state.index += attached ? 1 : 2;
      return true;
    }
    if (grammar.attachedOnly?.includes(letter)) {
      state.options = [...state.options, [letter, attached ? { kind: 'static', value: attached } : null]];
      state.index++;
      return true;
    }
    if (!grammar.flags?.includes(letter)) {
      const value = attached ? { kind: 'static' as const, value: attached } : (args[state.index + 1] ?? null);
      splitUnknown(args, grammar, state, letter, attached ? state.index + 1 : state.index + 2, value, readings);
    }
    state.options = [...state.options, [letter, null]];
  }
  state.index++;
  return true;
}

/** Reads on from `resume` as if the unknown option had taken a value, while this reading goes on as if it had not. */
function splitUnknown(
  args: readonly ShellWord[],
  grammar: OptionGrammar,
  state: ScanState,
  name: string,
  resume: number,
  value: ShellWord | null,
  readings: OptionReading[],
): void {
  if (state.splits <= 0) return;
  state.splits--;
  scan(args, grammar, { ...state, index: resume, options: [...state.options, [name, value]] }, readings);
}
