/**
 * The two failures a caller shows a person. Their codes are stable; they are
 * not DomainErrors yet because the registry (libs/platform/errors) does not
 * list them.
 */
export class ShellSyntaxError extends Error {
  readonly code = 'SHELL_SYNTAX_INVALID';

  constructor(
    detail: string,
    /** zero-based UTF-16 offset into the command */
    readonly position: number,
  ) {
    super(detail);
    this.name = 'ShellSyntaxError';
  }
}

export class ShellRulesError extends Error {
  readonly code = 'SHELL_RULES_INVALID';

  constructor(
    readonly sourceName: string,
    /** one-based */
    readonly line: number,
    readonly column: number,
    readonly detail: string,
  ) {
    super(`${sourceName}:${line}:${column}: ${detail}`);
    this.name = 'ShellRulesError';
  }
}
