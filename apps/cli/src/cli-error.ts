/**
 * A failure the user can act on. main.ts prints its message as the one line
 * `aileron-cp: <message>` on stderr and exits 1, without a stack trace.
 */
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

/** `CODE: detail`, the shape the problem documents of the API have. */
export function codedError(code: string, detail: string): CliError {
  return new CliError(`${code}: ${detail}`);
}

/** Error text can span lines (engine traces, server details); the contract is one line. */
export function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
