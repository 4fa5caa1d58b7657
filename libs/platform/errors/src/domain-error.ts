/**
 * Every failure a user can hit is a DomainError with a stable UPPER_SNAKE code.
 * One filter (problem.filter.ts) renders it as application/problem+json, so
 * domain code never knows about HTTP status lines beyond the number here.
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
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly code: string,
    readonly status: number,
    readonly title: string,
    detail: string,
    options: DomainErrorOptions = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DomainError';
    this.extensions = options.extensions ?? {};
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get detail(): string {
    return this.message;
  }
}

export interface FieldIssue {
  /** JSON path of the offending value, e.g. "body.slug" */
  path: string;
  message: string;
}

export class ValidationError extends DomainError {
  constructor(
    readonly issues: FieldIssue[],
    detail = issues.map((i) => `${i.path}: ${i.message}`).join('; '),
  ) {
    super('VALIDATION_FAILED', 400, 'Request is not valid', detail, { extensions: { errors: issues } });
  }
}

/** Another tenant's resource and a missing one look the same, on purpose. */
export class NotFoundError extends DomainError {
  constructor(resource: string, id: string, code = `${resource.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}_NOT_FOUND`) {
    super(code, 404, 'Not found', `${resource} "${id}" does not exist`);
  }
}

export class ConflictError extends DomainError {
  constructor(code: string, detail: string) {
    super(code, 409, 'Conflict', detail);
  }
}

export class UnauthenticatedError extends DomainError {
  constructor(detail = 'A valid bearer token is required', code = 'UNAUTHENTICATED') {
    super(code, 401, 'Unauthenticated', detail);
  }
}

export class ForbiddenError extends DomainError {
  constructor(detail: string, code = 'FORBIDDEN') {
    super(code, 403, 'Forbidden', detail);
  }
}
