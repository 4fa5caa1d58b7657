import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from './schema.gen';

/** An `application/problem+json` answer, as every error of the API is. */
export type Problem = components['schemas']['Problem'];

/** A refused request: the problem's code and detail are what the person sees. */
export class ApiProblem extends Error {
  constructor(
    readonly status: number,
    readonly problem: Partial<Problem>,
  ) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
  }

  get code(): string {
    return this.problem.code ?? `HTTP_${this.status}`;
  }
}

const CSRF_HEADER = 'x-aileron-csrf';
let csrf: string | null = null;
const signedOutListeners = new Set<() => void>();

/** Set from `GET /v1/auth/session` once signed in: every change the console asks carries it. */
export function setCsrfToken(token: string | null): void {
  csrf = token;
}

/** Called when the API says the browser session is gone (expired, signed out elsewhere). */
export function onSignedOut(listener: () => void): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

const SESSION_GONE = new Set(['SESSION_REQUIRED', 'SESSION_INVALID', 'SESSION_EXPIRED']);

const session: Middleware = {
  onRequest({ request }) {
    if (request.method !== 'GET' && request.method !== 'HEAD' && csrf) request.headers.set(CSRF_HEADER, csrf);
    return request;
  },
  async onResponse({ response }) {
    if (response.status === 401) {
      const body = (await response
        .clone()
        .json()
        .catch(() => ({}))) as Partial<Problem>;
      if (body.code && SESSION_GONE.has(body.code)) signedOutListeners.forEach((listener) => listener());
    }
    return response;
  },
};

/**
 * The API client, typed from the control plane's OpenAPI document
 * (src/api/schema.gen.ts, written by scripts/build-web.mjs): a path, a
 * parameter or a field the API does not have fails the build. The browser
 * session's cookie goes along by itself (same origin); changes add the CSRF token.
 */
export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });
api.use(session);

/** The data of an answer, or an ApiProblem: what queries and mutations hand to TanStack Query. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (error !== undefined || !response.ok) throw new ApiProblem(response.status, (error ?? {}) as Partial<Problem>);
  return data as T;
}
