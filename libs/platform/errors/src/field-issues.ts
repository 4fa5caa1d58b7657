/**
 * Where a value came from: a part of the request, or a tool call's arguments.
 * Every field a problem names starts with one (API.md): `body.url`,
 * `query.cursor`, `params.ws`, `headers.content-type`, `arguments.path`.
 */
export type FieldSource = 'body' | 'query' | 'params' | 'headers' | 'arguments';

export type PathSegment = string | number;

export interface FieldIssue {
  /** where the offending value is, as fieldPath names it: "body.slug", "query.cursor", "body.rules[2].effect" */
  path: string;
  message: string;
}

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** `rules[2].arguments[0].regex`: keys after dots, indexes in brackets, any other key quoted in brackets. */
export function formatPath(segments: readonly PropertyKey[]): string {
  let path = '';
  for (const key of segments) {
    const segment = typeof key === 'number' ? key : String(key);
    if (typeof segment === 'number') path += `[${segment}]`;
    else if (PLAIN_KEY.test(segment)) path += path === '' ? segment : `.${segment}`;
    else path += `[${JSON.stringify(segment)}]`;
  }
  return path;
}

/**
 * A field as problems name it: `body.rules[2].effect`, `query.cursor`, the
 * whole `body`. The path is its segments, or one formatPath already wrote.
 */
export function fieldPath(source: FieldSource, path: readonly PropertyKey[] | string = []): string {
  const rest = typeof path === 'string' ? path : formatPath(path);
  return rest === '' ? source : rest.startsWith('[') ? `${source}${rest}` : `${source}.${rest}`;
}

/** An issue as zod reports one (its path holds keys and indexes). */
export interface PathIssue {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

/** The one rendering of zod's issues (and any like them) as the fields a problem lists. */
export function fieldIssues(source: FieldSource, issues: readonly PathIssue[]): FieldIssue[] {
  return issues.map((issue) => ({ path: fieldPath(source, issue.path), message: issue.message }));
}

/** `path: message; path: message`: the detail of a problem that lists fields. */
export function describeIssues(issues: readonly FieldIssue[]): string {
  return issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
}
