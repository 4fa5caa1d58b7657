import type { ShellWord } from './shell-word';

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

/** The shell a runner starts when given no command: it reads the runner's standard input. */
export const SHELL_READING_INPUT = { kind: 'static', value: 'sh' } as const satisfies ShellWord;
