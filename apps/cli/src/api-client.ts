import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
// the paths alone: the whole config module loads Nest and zod, which a CLI command that calls the API does not need
import { ADMIN_TOKEN_FILE } from '@aileron/config/paths';
import { CliError, codedError, oneLine } from './cli-error';

export interface ApiOptions {
  url?: string;
  token?: string;
  json?: boolean;
}

const TIMEOUT_MS = 30_000;
/** the largest page every list serves (MAX_PAGE_SIZE in @aileron/http) */
const PAGE = 200;

function nonEmpty(value: string | undefined): string | undefined {
  return value !== undefined && value.trim() !== '' ? value.trim() : undefined;
}

export function resolveBaseUrl(given: string | undefined, env: NodeJS.ProcessEnv = process.env): URL {
  const raw = nonEmpty(given) ?? nonEmpty(env.AILERON_URL) ?? `http://127.0.0.1:${nonEmpty(env.PORT) ?? '8080'}`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(
      `the control plane URL ${JSON.stringify(raw)} is not a URL (expected e.g. http://127.0.0.1:8080)`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError(`the control plane URL must be http:// or https:// (got ${url.protocol})`);
  }
  return url;
}

/**
 * --token, then AILERON_TOKEN, then the owner token the embedded mode wrote to
 * its data directory, so a developer on the same machine needs no setup.
 */
export function resolveToken(given: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = nonEmpty(given) ?? nonEmpty(env.AILERON_TOKEN);
  if (explicit) return explicit;
  const path = join(resolve(nonEmpty(env.AILERON_DATA_DIR) ?? './.aileron'), ADMIN_TOKEN_FILE);
  let fromFile: string | undefined;
  try {
    fromFile = nonEmpty(readFileSync(path, 'utf8'));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR')
      throw new CliError(`cannot read the token file ${path} (${code ?? 'error'})`);
  }
  if (fromFile) return fromFile;
  throw new CliError(
    `no API token: pass --token, set AILERON_TOKEN, or set AILERON_DATA_DIR to the data directory holding ${ADMIN_TOKEN_FILE} (looked in ${path})`,
  );
}

/** An HTTP answer, read whole. */
interface Answer {
  status: number;
  statusText: string;
  /** where a redirect points: followed by nobody, since the request carries a token */
  location?: string;
  text: string;
}

class TimedOut extends Error {}

/**
 * One request with node:http(s), not fetch: fetch loads undici, some 40 ms of
 * a command's ~100 ms of CPU, for a request and an answer the CLI reads whole.
 * The whole exchange, answer included, within TIMEOUT_MS.
 */
function send(url: URL, method: string, headers: Record<string, string>, body: string | undefined): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // one end for every way out: the answer, a failure of the request or of its answer, the time-out; the timer
    // cleared on each, so a command never waits it out after it is done
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      request.destroy();
    }, TIMEOUT_MS);
    const fail = (error: unknown): void => {
      clearTimeout(timer);
      reject(timedOut ? new TimedOut() : error);
    };
    const options = {
      method,
      headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
    };
    const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, options, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', fail);
      response.on('end', () => {
        clearTimeout(timer);
        const status = response.statusCode ?? 0;
        const location = response.headers.location;
        resolve({
          status,
          statusText: response.statusMessage ?? '',
          ...(location && status >= 300 && status < 400 ? { location } : {}),
          text: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
    request.on('error', fail);
    request.end(body);
  });
}

interface Problem {
  code?: unknown;
  detail?: unknown;
  title?: unknown;
}

/** The REST API of one control plane, as one caller. */
export class ApiClient {
  private readonly base: string;
  /** what messages call the server: no credentials, no query */
  readonly display: string;

  constructor(
    url: URL,
    private readonly token: string,
  ) {
    this.base = (url.origin + url.pathname).replace(/\/+$/, '');
    this.display = this.base;
  }

  static from(options: ApiOptions): ApiClient {
    return new ApiClient(resolveBaseUrl(options.url), resolveToken(options.token));
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** Every item of a list, page after page (`next_cursor`), at the largest page the API serves. */
  async all<T>(path: string): Promise<T[]> {
    const items: T[] = [];
    const join = path.includes('?') ? '&' : '?';
    let cursor: string | null = null;
    do {
      const page: { items: T[]; next_cursor: string | null } = await this.get(
        `${path}${join}limit=${PAGE}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      items.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor !== null);
    return items;
  }

  post<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('POST', path, body);
  }

  delete<T = void>(path: string): Promise<T> {
    return this.request<T>('DELETE', path);
  }

  /** A body sent as it is (e.g. a YAML file), with its own content type. */
  putText<T>(path: string, text: string, contentType: string): Promise<T> {
    return this.request<T>('PUT', path, undefined, { text, contentType });
  }

  put<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PUT', path, body);
  }

  patch<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PATCH', path, body);
  }

  /** A body that is not JSON (an export); errors still come back as problem+json. */
  getText(path: string): Promise<string> {
    return this.request<string>('GET', path, undefined, undefined, true);
  }

  private async request<T>(
    method: string,
    path: string,
    payload?: unknown,
    raw?: { text: string; contentType: string },
    asText = false,
  ): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: 'application/json' };
    const body = raw ? raw.text : payload === undefined ? undefined : JSON.stringify(payload);
    if (body !== undefined) headers['content-type'] = raw?.contentType ?? 'application/json';
    let response: Answer;
    try {
      response = await send(new URL(this.base + path), method, headers, body);
    } catch (error) {
      throw this.redacted(new CliError(this.unreachable(error)));
    }
    const text = response.text;
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (response.status < 200 || response.status > 299)
      throw this.redacted(this.failure(response, method, path, parsed));
    if (asText) return text as T;
    if (response.status !== 204 && parsed === undefined) {
      throw new CliError(
        `${method} ${this.display}${path} answered ${response.status} without JSON: is this an Aileron control plane?`,
      );
    }
    return parsed as T;
  }

  private unreachable(error: unknown): string {
    if (error instanceof TimedOut) return `${this.display} did not answer within ${TIMEOUT_MS / 1000} s`;
    // a connection's failure carries its reason as a code (ECONNREFUSED, ENOTFOUND…); several addresses' failures come as one
    const failure = error as { code?: unknown; message?: unknown; errors?: { code?: unknown }[] };
    const reason =
      (typeof failure.code === 'string' && failure.code) ||
      (typeof failure.errors?.[0]?.code === 'string' && failure.errors[0].code) ||
      (error instanceof Error ? error.message : String(error));
    return `cannot reach ${this.display} (${oneLine(reason)})`;
  }

  private failure(response: Answer, method: string, path: string, body: unknown): CliError {
    const problem = (body && typeof body === 'object' ? body : {}) as Problem;
    if (typeof problem.code === 'string') {
      const detail =
        typeof problem.detail === 'string'
          ? problem.detail
          : typeof problem.title === 'string'
            ? problem.title
            : `HTTP ${response.status}`;
      return codedError(problem.code, oneLine(detail));
    }
    if (response.location)
      return new CliError(
        `${method} ${this.display}${path} answered HTTP ${response.status}, moved to ${response.location}: give that address (--url or AILERON_URL)`,
      );
    return new CliError(
      `${method} ${this.display}${path} answered HTTP ${response.status} ${response.statusText}: is this an Aileron control plane?`,
    );
  }

  /** A server or proxy could echo the Authorization header back; never pass it on. */
  private redacted(error: CliError): CliError {
    return error.message.includes(this.token) ? new CliError(error.message.split(this.token).join('***')) : error;
  }
}
