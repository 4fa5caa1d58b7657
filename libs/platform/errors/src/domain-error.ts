import { ERROR_CODES, ErrorCode, ErrorCodeWithStatus } from './error-codes';
import { describeIssues, FieldIssue } from './field-issues';

/**
 * Every failure a user can hit is a DomainError with a stable UPPER_SNAKE code
 * from the registry (error-codes.ts), which gives its status and title. One
 * filter (problem.filter.ts) renders it as application/problem+json, so
 * domain code never knows about HTTP beyond the code it picks.
 */
export interface DomainErrorOptions {
  /** extra machine-readable members of the problem document */
  extensions?: Record<string, unknown>;
  /** when a retry may succeed: the answer says so in Retry-After */
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class DomainError extends Error {
  readonly extensions: Record<string, unknown>;
  readonly status: number;
  readonly title: string;

  constructor(
    readonly code: ErrorCode,
    detail: string,
    options: DomainErrorOptions = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DomainError';
    this.status = ERROR_CODES[code].status;
    this.title = ERROR_CODES[code].title;
    this.extensions = options.extensions ?? {};
  }

  get detail(): string {
    return this.message;
  }
}

export class ValidationError extends DomainError {
  constructor(
    readonly issues: FieldIssue[],
    detail = describeIssues(issues),
  ) {
    super('VALIDATION_FAILED', detail, { extensions: { errors: issues } });
  }
}

/** Another tenant's resource and a missing one look the same, on purpose. */
export class NotFoundError extends DomainError {
  constructor(resource: string, id: string, code: ErrorCodeWithStatus<404>) {
    super(code, `${resource} "${id}" does not exist`);
  }
}

export class ConflictError extends DomainError {
  constructor(code: ErrorCodeWithStatus<409>, detail: string) {
    super(code, detail);
  }
}

export class UnauthenticatedError extends DomainError {
  constructor(detail = 'A valid bearer token is required', code: ErrorCodeWithStatus<401> = 'UNAUTHENTICATED') {
    super(code, detail);
  }
}

export class ForbiddenError extends DomainError {
  constructor(detail: string, code: ErrorCodeWithStatus<403> = 'FORBIDDEN') {
    super(code, detail);
  }
}
